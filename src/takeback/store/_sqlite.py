"""Store layer: opening SQLite files the way the store needs them (WAL, private, patient).

Opening an existing database never changes it: the file is checked first (a SQLite
header, not cut short), and damage SQLite finds later, on any query, is raised as
:class:`StoreCorruptError`, so a damaged store is refused instead of read as empty (and
instead of starting a new history over the old one).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import struct
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, Self, TypeVar

from ..errors import StoreCorruptError, StoreError

_MAGIC = b"SQLite format 3\x00"
_HEADER = 100
#: primary result codes that mean the file is damaged or not a database at all
_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
_T = TypeVar("_T")


#: The database files this process has a connection open on, by (device, inode), with
#: how many. POSIX record locks belong to a process and a file, and closing *any*
#: descriptor of the file drops all of them, SQLite's included: a file that is open here
#: is therefore never opened again outside SQLite (see :func:`check_file`).
_OPEN: dict[tuple[int, int], int] = {}
_OPEN_LOCK = threading.Lock()

#: The files whose connections are kept open when closed, for the next opening of the
#: same file in this process (see :func:`reuse_connections`), by (device, inode), with
#: their connections' page cache in KiB (0: SQLite's own); and the connections kept,
#: idle. Both under ``_OPEN_LOCK``.
_REUSE: dict[tuple[int, int], int] = {}
_IDLE: dict[tuple[int, int], list[_Connection]] = {}
#: idle connections kept per file at most
_IDLE_MAX = 2
#: The write-ahead log's size, in pages, at which a commit on a kept connection copies it
#: into the database itself (SQLite's own threshold is 1,000). The process that keeps
#: them (the watching service) copies it in its idle time (:func:`checkpoint_idle`);
#: this bounds the log when it never is idle.
HELD_AUTOCHECKPOINT = 16384


def _file_id(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def damaged(path: str, why: str) -> StoreCorruptError:
    """Return the error for a store database that is damaged (one line, with the file)."""
    return StoreCorruptError(f"store is damaged: {path} {why}", path=path)


class _Cursor(sqlite3.Cursor):
    """A cursor that reports a damaged file as :class:`StoreCorruptError`, on any call."""

    def _failed(self, e: sqlite3.DatabaseError) -> NoReturn:
        conn = self.connection
        if isinstance(conn, _Connection):
            conn.broken = True  # never kept for reuse (see reuse_connections)
        # Closed first: the traceback keeps this cursor alive, and a statement it held
        # would keep the database open after its connection is closed (the -wal of a
        # failed write left on a full disk instead of being checkpointed away).
        try:
            self.close()
        except sqlite3.Error:
            pass
        code = getattr(e, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF in _DAMAGED:
            path = db_path(conn)
            raise damaged(path, f"cannot be read ({e})") from e
        raise e

    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        try:
            return super().execute(sql, parameters)
        except sqlite3.DatabaseError as e:
            self._failed(e)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Self:
        try:
            return super().executemany(sql, seq_of_parameters)
        except sqlite3.DatabaseError as e:
            self._failed(e)

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        try:
            return super().executescript(sql_script)
        except sqlite3.DatabaseError as e:
            self._failed(e)

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as e:
            self._failed(e)

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        try:
            return super().fetchmany(size)
        except sqlite3.DatabaseError as e:
            self._failed(e)

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as e:
            self._failed(e)

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as e:
            self._failed(e)


class _Connection(sqlite3.Connection):
    """A connection whose shortcuts (``execute`` and friends) use :class:`_Cursor`."""

    #: whether the settings a write needs are made (see :func:`prepare_writes`)
    writes_prepared = False
    #: the file this connection holds open (device, inode), counted in ``_OPEN``
    file_id: tuple[int, int] | None = None
    #: kept open, idle, when closed (its file is one :func:`reuse_connections` names);
    #: then ``cursors`` holds the cursors made on it, closed before it is kept
    reusable = False
    cursors: weakref.WeakSet[sqlite3.Cursor] | None = None
    #: a query on it failed as a damaged or unreadable file: closed for good
    broken = False
    #: how many :class:`Tx` blocks are open on it, and the thread they are open on
    tx_depth = 0
    tx_thread: int | None = None

    def hold(self, path: str) -> None:
        """Count this connection as one that holds ``path`` open in this process."""
        try:
            file_id = _file_id(os.stat(path))
        except OSError:
            return
        with _OPEN_LOCK:
            _OPEN[file_id] = _OPEN.get(file_id, 0) + 1
        self.file_id = file_id

    def close(self) -> None:
        if self.reusable and self._keep_idle():
            return
        try:
            super().close()
        finally:
            file_id, self.file_id = self.file_id, None
            if file_id is not None:
                with _OPEN_LOCK:
                    left = _OPEN.get(file_id, 1) - 1
                    if left > 0:
                        _OPEN[file_id] = left
                    else:
                        _OPEN.pop(file_id, None)

    def _keep_idle(self) -> bool:
        """Keep this connection open and idle for reuse; False: it is to be closed.

        A statement that a live cursor left part-way holds a read transaction open (and
        with it the write-ahead log, which no checkpoint could then empty): every cursor
        made on it is closed first. A connection inside a transaction, or whose file
        failed, is closed instead.
        """
        try:
            for cur in list(self.cursors or ()):
                cur.close()
            if self.in_transaction:
                return False
        except sqlite3.Error:
            return False
        with _OPEN_LOCK:
            if self.broken or self.file_id not in _REUSE:
                return False
            idle = _IDLE.setdefault(self.file_id, [])
            if len(idle) >= _IDLE_MAX or any(c is self for c in idle):
                return False
            idle.append(self)
        return True

    def _cursor(self) -> _Cursor:
        cur = _Cursor(self)
        if self.cursors is not None:
            self.cursors.add(cur)
        return cur

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self._cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        return self._cursor().executemany(sql, parameters)

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        return self._cursor().executescript(sql_script)


def reuse_connections(path: str, *, cache_kib: int = 0) -> Callable[[], None]:
    """Keep the connections of this process to a database open when closed, for reuse.

    For a process that opens and closes a store call after call (the watching service):
    the next opening of the same file (device and inode: a file made anew at the same
    path is opened anew) takes an idle connection. It starts with SQLite's page cache
    of the last call, runs no pragma, and skips the sync of the folder that SQLite pays
    at a new connection's first commit. While one stays open, a call's close is also
    not the database's last, so SQLite neither checkpoints and removes the write-ahead
    log at the end of every call nor starts a new one at the next. An idle connection
    holds no read transaction: checkpoints, gc's included, go on as usual.

    One connection is opened now and kept idle. Returns what ends it: the idle
    connections are closed, and later ones are closed as usual. Nothing is kept for a
    file that cannot be opened.

    Args:
        path: the database file.
        cache_kib: the page cache of each kept connection, in KiB (0: SQLite's own,
            2,000); pages are taken as they are read, up to this.
    """
    try:
        conn = connect(path, create=False)
    except (StoreError, OSError):
        return lambda: None
    if not isinstance(conn, _Connection) or conn.file_id is None:
        conn.close()
        return lambda: None
    file_id = conn.file_id
    try:
        # Opening reads nothing: one read joins the write-ahead log's readers.
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.Error:
        conn.close()
        return lambda: None
    with _OPEN_LOCK:
        _REUSE[file_id] = cache_kib
    _make_reusable(conn)
    conn.close()  # kept, idle

    def end() -> None:
        with _OPEN_LOCK:
            _REUSE.pop(file_id, None)
            idle = _IDLE.pop(file_id, [])
        for c in idle:
            c.close()

    return end


def _make_reusable(conn: _Connection) -> None:
    """Mark a connection to a kept file as one to keep idle when closed.

    Its commits leave the write-ahead log to :func:`checkpoint_idle` up to
    ``HELD_AUTOCHECKPOINT`` pages: copying it back (every page written again, then a
    sync) took 15-40 ms of one call in ten in the service, now done between calls.
    """
    conn.execute(f"PRAGMA wal_autocheckpoint={HELD_AUTOCHECKPOINT}").fetchall()
    cache_kib = _REUSE.get(conn.file_id, 0) if conn.file_id is not None else 0
    if cache_kib:
        conn.execute(f"PRAGMA cache_size=-{int(cache_kib)}").fetchall()
    conn.reusable = True
    conn.cursors = weakref.WeakSet()


def checkpoint_idle(path: str) -> int:
    """Copy a kept file's write-ahead log into the database, on an idle kept connection.

    A passive checkpoint: it waits for no one, and copies what no reader in another
    process still needs. For the process that keeps its connections (see
    :func:`reuse_connections`), between calls.

    Returns:
        How many pages of the log the database holds now (0: no log, the file is not
        kept, no kept connection is idle, or a reader in another process holds all of
        it). Best effort: a failure copies nothing, and a later checkpoint copies it.
    """
    got = run_idle(path, lambda conn: conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
    if got is None:
        return 0
    busy, _log, copied = got
    return 0 if busy else max(int(copied), 0)


def run_idle(path: str, work: Callable[[sqlite3.Connection], _T]) -> _T | None:
    """Run ``work`` on an idle kept connection to ``path``'s file, between calls.

    For a process that keeps its connections (see :func:`reuse_connections`). None: the
    file is not kept, no kept connection is idle, or the work failed (best effort: what
    is done between calls only saves time later; a damaged file is for the calls that
    need it to report).
    """
    conn = _take_idle(path)
    if conn is None:
        return None
    try:
        return work(conn)
    except (sqlite3.Error, StoreError):
        return None
    finally:
        conn.close()  # kept idle again (or closed, when the file failed)


def _take_idle(path: str) -> _Connection | None:
    """Return an idle connection to ``path``'s file kept for reuse, if any."""
    if not _REUSE:
        return None
    try:
        file_id = _file_id(os.stat(path))
    except OSError:
        return None
    with _OPEN_LOCK:
        idle = _IDLE.get(file_id)
        return idle.pop() if idle else None


def check_file(path: str) -> None:
    """Check, without opening it in SQLite, that a database file is whole.

    SQLite reads a zero-length file as an empty database (and the first write would
    start a new one there), and reads a file cut short until it reaches the missing
    pages; both are caught here, before anything reads or writes the file.

    A file that a connection of this process already holds open was checked when that
    connection opened it, and is not read again: closing the descriptor that reading it
    takes would drop that connection's locks, and another process could then checkpoint
    and remove the write-ahead log under it.

    Raises:
        StoreCorruptError: missing, not a regular file, empty, not a SQLite database, or
            shorter than its header says (when no write-ahead log holds the rest).
    """
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise damaged(path, "is not a file")
        with _OPEN_LOCK:
            if _file_id(st) in _OPEN:
                return
        with open(path, "rb") as f:
            head = f.read(_HEADER)
    except FileNotFoundError:
        raise damaged(path, "is missing") from None
    if not head:
        raise damaged(path, "is empty")
    if len(head) < _HEADER or not head.startswith(_MAGIC):
        raise damaged(path, "is not a SQLite database")
    (page_size,) = struct.unpack(">H", head[16:18])
    page_size = 65536 if page_size == 1 else page_size
    (pages,) = struct.unpack(">I", head[28:32])
    # The page count in the header is valid when the change counter matches the
    # "version valid for" field. Pages a checkpoint has not yet copied live in the -wal
    # file, so the size can only be checked when there is none.
    valid = head[24:28] == head[92:96] and pages > 0
    try:
        wal = os.stat(path + "-wal").st_size
    except FileNotFoundError:
        wal = 0
    if valid and not wal and st.st_size < pages * page_size:
        raise damaged(path, f"is cut short ({st.st_size} of {pages * page_size} bytes)")


def prepare_writes(conn: sqlite3.Connection) -> None:
    """Make the per-connection settings that writes need, once per connection.

    ``synchronous=FULL`` (a committed transaction survives a power cut, which WAL alone
    does not promise) and foreign keys (no row may name a snapshot that is not there).
    Reads need neither, so an existing store pays for them at its first write (see
    :class:`Tx`), not when it is opened: a hook call that only reads runs no pragma.
    Foreign keys cannot be turned on inside a transaction, hence before ``BEGIN``.
    """
    if getattr(conn, "writes_prepared", False):
        return
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    if isinstance(conn, _Connection):
        conn.writes_prepared = True


def connect(
    path: str, *, create: bool, readonly: bool = False, full_disk: bool = False
) -> sqlite3.Connection:
    """Open (or make) a database file with mode 0600, WAL journaling and a busy timeout.

    Connections run in autocommit mode; writers open their own ``BEGIN IMMEDIATE``
    through :class:`Tx`. Opening an existing file runs no statement: WAL journaling is
    kept in the file (it is set once, when the file is made), and what writes need is
    set by :func:`prepare_writes` before the first one. A file SQLite cannot read fails
    at the first query instead (the caller's schema check). The settings made at opening
    are a kept file's checkpoint threshold and page cache (:func:`_make_reusable`),
    which read nothing from the file.

    Args:
        path: the database file.
        create: make the file when it is missing (a new store); otherwise it must exist
            and pass :func:`check_file`.
        readonly: open for reading only, creating nothing beside the file (a store
            that cannot be written); any write then fails as a :class:`StoreError`.
        full_disk: with ``readonly``, the disk is full: read the file as it is when
            no write-ahead log holds pages beyond it.

    Raises:
        StoreCorruptError: the file is missing or damaged, or not a database.
        StoreError: the file cannot be opened.
    """
    if create and not os.path.exists(path):
        # SQLite gives its -wal and -shm files the mode of the main file, so making the
        # main file 0600 first keeps every file of the store private.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    elif not create:
        if not readonly:
            kept = _take_idle(path)
            if kept is not None:
                return kept
        check_file(path)
    try:
        if readonly:
            # A WAL database opened read-only needs its -shm file, which SQLite would
            # have to create: when there is none (and no -wal, so the main file holds
            # every page), the file is read as immutable, which creates nothing.
            immutable = not os.path.exists(path + "-shm") and not os.path.exists(path + "-wal")
            if full_disk:
                # A writer's attempt left a -shm it could not fill: with no log to read
                # (an empty -wal), the main file holds every page.
                try:
                    immutable = os.path.getsize(path + "-wal") == 0
                except FileNotFoundError:
                    immutable = True
            from urllib.parse import quote  # only here: its import is paid by every command

            uri = f"file:{quote(path)}?mode=ro" + ("&immutable=1" if immutable else "")
            conn = sqlite3.connect(
                uri,
                uri=True,
                timeout=60.0,
                isolation_level=None,
                check_same_thread=False,
                factory=_Connection,
            )
        else:
            conn = sqlite3.connect(
                path,
                timeout=60.0,
                isolation_level=None,
                check_same_thread=False,
                factory=_Connection,
            )
            if create:
                # Before the first table: pages that gc frees can then be given back to
                # the file system a few at a time (see reclaim), which needs no room.
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute("PRAGMA journal_mode=WAL")
                prepare_writes(conn)
    except StoreCorruptError:
        raise
    except sqlite3.DatabaseError as e:
        raise StoreError(f"cannot open the store database {path}: {e}", path=path) from e
    if isinstance(conn, _Connection):
        conn.hold(path)
        if not readonly and conn.file_id is not None and conn.file_id in _REUSE:
            _make_reusable(conn)
    return conn


def tables(conn: sqlite3.Connection) -> set[str]:
    """Return the names of the tables a database holds."""
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """Return the column names of a table."""
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}


def db_path(conn: sqlite3.Connection) -> str:
    """Return the file behind a connection (for error messages)."""
    for _seq, name, path in sqlite3.Connection.execute(conn, "PRAGMA database_list"):
        if name == "main":
            return str(path)
    return "?"


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the write-ahead log into the database and empty it (best effort).

    A reader in another process may hold the log; then it is copied as far as it can be
    and the rest waits for the next checkpoint.
    """
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error:
        pass


#: pages moved per incremental vacuum step (each step is its own short transaction)
_VACUUM_STEP = 256


def reclaim(conn: sqlite3.Connection, *, room: int) -> int:
    """Give the database's free pages back to the file system; return the bytes given.

    A database made with ``auto_vacuum=INCREMENTAL`` (every store made since gc exists)
    gives them back a few at a time, each step a short transaction followed by a
    checkpoint, so that it needs almost no room on the disk and never holds writers up
    for long. An older one needs a full ``VACUUM`` (which also turns incremental
    vacuuming on for next time); it is run only when ``room`` (free bytes on the disk)
    holds two copies of the file, else the free pages stay inside the file, where the
    next writes reuse them.
    """
    path = db_path(conn)

    def size() -> int:
        total = 0
        for name in (path, path + "-wal"):
            try:
                total += os.stat(name).st_size
            except OSError:
                pass
        return total

    checkpoint(conn)
    before = size()
    try:
        (mode,) = conn.execute("PRAGMA auto_vacuum").fetchone()
        (page,) = conn.execute("PRAGMA page_size").fetchone()
        if mode == 2:
            while True:
                (free,) = conn.execute("PRAGMA freelist_count").fetchone()
                if not free:
                    break
                # With room on the disk, all at once (the log holds the pages moved);
                # on a full one, a few pages per step, each checkpointed away.
                step = free if room > 4 * free * page + (64 << 20) else _VACUUM_STEP
                # As a script: a statement frees one page per step, and a plain execute
                # steps it once.
                conn.executescript(f"PRAGMA incremental_vacuum({int(step)});")
                checkpoint(conn)
                (left,) = conn.execute("PRAGMA freelist_count").fetchone()
                if left >= free:
                    break  # no progress (a reader holds the log): the rest waits
        else:
            (free,) = conn.execute("PRAGMA freelist_count").fetchone()
            if free and room > 2 * before + (8 << 20):
                conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                conn.execute("VACUUM")
    except sqlite3.Error:
        pass  # a full disk or a busy database: the free pages are reused in the file
    checkpoint(conn)
    return max(0, before - size())


class Tx:
    """``with Tx(conn):`` runs the block in one write transaction (BEGIN IMMEDIATE).

    Re-entrant on one thread: a block inside another on the same connection joins the
    transaction under way, as a savepoint. It commits nothing (only the outermost block
    commits, once, so the whole is one synced commit); if it fails, its own writes are
    undone and its error goes on to the block around it, which may still commit the
    rest. (A failure that makes SQLite end the whole transaction, a full disk, makes the
    outermost commit fail too.) Another thread's block on the same connection never
    joins: it begins a transaction of its own, and fails as SQLite says.

    A database error (a full disk, a damaged file) rolls the transaction back and is
    raised as a :class:`StoreError`, so callers see one kind of failure with one exit code.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        #: the savepoint this block is, inside another (None: the outermost block)
        self._savepoint: str | None = None

    def __enter__(self) -> sqlite3.Connection:
        conn = self.conn
        me = threading.get_ident()
        if isinstance(conn, _Connection) and conn.tx_depth and conn.tx_thread == me:
            name = f"tx{conn.tx_depth}"
            try:
                conn.execute(f"SAVEPOINT {name}")
            except sqlite3.Error as e:
                raise self._failed(e) from e
            self._savepoint = name
            conn.tx_depth += 1
            return conn
        try:
            prepare_writes(conn)
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise self._failed(e) from e
        if isinstance(conn, _Connection):
            conn.tx_depth, conn.tx_thread = 1, me
        return conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._savepoint is not None:
            self._leave_savepoint(exc_type, exc)
            return
        if isinstance(self.conn, _Connection):
            self.conn.tx_depth, self.conn.tx_thread = 0, None
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
                return
            except sqlite3.Error as e:
                self._rollback()
                raise self._failed(e) from e
        self._rollback()
        if isinstance(exc, sqlite3.Error):
            raise self._failed(exc) from exc

    def _leave_savepoint(self, exc_type: object, exc: object) -> None:
        name, self._savepoint = self._savepoint, None
        conn = self.conn
        if isinstance(conn, _Connection):  # always: only its blocks nest
            conn.tx_depth -= 1
        if exc_type is None:
            try:
                conn.execute(f"RELEASE {name}")
            except sqlite3.Error as e:
                raise self._failed(e) from e
            return
        try:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
        except sqlite3.Error:
            pass  # SQLite ended the whole transaction: the outermost commit fails
        if isinstance(exc, sqlite3.Error):
            raise self._failed(exc) from exc

    def _failed(self, e: sqlite3.Error) -> StoreError:
        return StoreError(f"cannot write to the store: {e}", path=db_path(self.conn))

    def _rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the transaction is already gone (SQLite rolls back on some errors)
