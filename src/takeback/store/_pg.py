"""Store layer: the PostgreSQL store, one database that several servers share.

``postgresql://user@host/db`` (or ``postgres://``) names it; ``#key`` at the end names the
workspace's key in it (default: the workspace's root path), for servers that mount one
workspace at different paths. ``psycopg`` (the ``takeback[postgres]`` extra) is imported
only when such a store is opened.

What lives where: objects, snapshots, sessions, turns, steps, touches, change lists, ops,
the journal of a restore and the events are rows in the database; the scan's stat cache
(which describes this machine's view of the files), the hook's pending records and its
log stay in a local folder (``path``).

Concurrency across servers: the workspace's lock is a session-level advisory lock
(shared for snapshots, exclusive for restores and gc), so the lock of a server that dies
goes with its connection; each write transaction takes a transaction-level advisory lock
on the workspace first (:class:`~._pg_conn.PgTx`); objects are inserted by content hash
and an insert that meets an existing row leaves it; objects are committed before the
snapshot row that names them, in a transaction of their own, so another server sees a
snapshot only once everything it names is there.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import StoreCorruptError, StoreError, StoreMissingError, StoreVersionError
from ._lock import Reentry
from ._meta import SCHEMA_VERSION, MetaStore
from ._pg_address import StoreAddress
from ._pg_conn import PgConn
from ._pg_limits import did_not_answer, is_timeout, wait_for_lock
from ._pg_meta import STORE_ID, PgMeta, PgObjects
from ._pg_schema import (
    EVENTS_CHANNEL,
    LOCK_GC,
    LOCK_SCHEMA,
    LOCK_WORKSPACE,
    MIGRATIONS,
    PG_SCHEMA_VERSION,
)
from ._sqlite import connect

if TYPE_CHECKING:
    import psycopg


def _driver() -> Any:
    try:
        import psycopg
    except ImportError as e:
        raise StoreError(
            "a PostgreSQL store needs the psycopg driver: pip install 'takeback[postgres]'",
            path="postgresql",
        ) from e
    return psycopg


def slow_line(address: StoreAddress) -> str:
    """Return the line for a database that did not answer (connect or statement)."""
    return did_not_answer(address.where, address.connect_timeout)


def connect_db(address: StoreAddress) -> psycopg.Connection[Any]:
    """Open an autocommit connection to the database an address names.

    The driver is given the address without its password (the password apart), so that
    nothing it says quotes the password; the connect timeout bounds the wait.

    Raises:
        StoreError: the driver is missing, the address is not one libpq reads, the
            server cannot be reached or did not answer in time.
    """
    drv = _driver()
    conninfo, params = address.connect_args()
    try:
        conn: psycopg.Connection[Any] = drv.connect(conninfo, autocommit=True, **params)
    except drv.Error as e:
        if is_timeout(e):
            raise StoreError(slow_line(address), path=address.shown) from None
        first = (str(e).strip().splitlines() or ["cannot connect"])[0]
        raise StoreError(
            f"cannot reach the PostgreSQL store {address.shown}: {first}", path=address.shown
        ) from None
    return conn


def schema_version(conn: psycopg.Connection[Any]) -> int | None:
    """Return the database's takeback schema version (None: it has none).

    One query when the schema is there (every hook call opens the store).
    """
    psycopg = _driver()
    try:
        got = conn.execute(b"SELECT version FROM takeback.version").fetchone()
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        return None
    return None if got is None else int(got[0])


def migrate(conn: psycopg.Connection[Any], where: str) -> int:
    """Bring the database's schema to this takeback's version; return the version found.

    One transaction under an advisory lock: of two servers that start at once, one makes
    the tables and the other then finds them.

    Raises:
        StoreVersionError: the database's schema is newer than this takeback knows.
    """
    with conn.transaction():
        conn.execute(b"SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_SCHEMA,))
        # Not schema_version(): a failed query would end this transaction.
        reg = conn.execute(b"SELECT to_regclass('takeback.version') IS NOT NULL").fetchone()
        there = bool(reg and reg[0])
        got = conn.execute(b"SELECT version FROM takeback.version").fetchone() if there else None
        found = int(got[0]) if got else 0
        if found > PG_SCHEMA_VERSION:
            raise _newer(found, where)
        for step in MIGRATIONS[found:]:
            conn.execute(step.encode())
        if found == 0:
            conn.execute(
                b"INSERT INTO takeback.version(one, version) VALUES (1, %s)", (PG_SCHEMA_VERSION,)
            )
        elif found < PG_SCHEMA_VERSION:
            conn.execute(b"UPDATE takeback.version SET version=%s", (PG_SCHEMA_VERSION,))
    return found


def _newer(version: int, where: str) -> StoreVersionError:
    return StoreVersionError(
        f"store schema {version} in {where} is newer than this takeback knows "
        f"({PG_SCHEMA_VERSION}); upgrade takeback to use it (pip install -U takeback)",
        path=where,
        expected=PG_SCHEMA_VERSION,
        actual=version,
    )


def _open_cache(local: str) -> MetaStore:
    """Open (making it when missing) this machine's cache file in the local folder.

    A damaged cache is made again: it holds nothing that the workspace cannot give back.
    """
    os.makedirs(local, mode=0o700, exist_ok=True)
    path = os.path.join(local, "cache.db")
    for _attempt in range(2):
        new = not os.path.exists(path)
        try:
            cache = MetaStore(connect(path, create=new))
            if new:
                cache.init_schema()
                cache.set_meta("schema_version", str(SCHEMA_VERSION))
            elif cache.check_schema() != SCHEMA_VERSION:
                raise StoreCorruptError(f"{path} is of another version", path=path)
            return cache
        except StoreCorruptError:
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.unlink(path + suffix)
                except FileNotFoundError:
                    pass
    raise StoreError(f"cannot make the local cache {path}", path=path)


class PgStore:
    """An open PostgreSQL store, for one workspace (its key), with its local folder."""

    def __init__(self, address: StoreAddress, root: str, local: str, pg: PgConn, key: str) -> None:
        self.path = local
        self.root = root
        self.key = key
        self.readonly = False
        #: when the workspace's row was made in the database
        self.created_at = 0.0
        self.address = address
        self._pg = pg
        self.objects = PgObjects(pg)
        self.meta = PgMeta(pg, lambda: _open_cache(local))
        self._lock = Reentry()

    @property
    def url(self) -> str:
        """The database's address (without a password) and the workspace's key."""
        return f"{self.address.shown}#{self.key}"

    @property
    def ws(self) -> int:
        """The workspace's id in the database."""
        return self._pg.ws

    @classmethod
    def open(cls, address: StoreAddress, root: str, *, local: str, create: bool) -> PgStore:
        """Open the workspace ``root`` in the database at ``address``; make it if ``create``.

        Args:
            address: the database, with ``#key`` to name the workspace's key.
            root: the workspace (its real path; the default key).
            local: this machine's folder for the store (cache, hook records).
            create: make the schema and the workspace's row when missing.

        Raises:
            StoreMissingError: no such workspace there (or no takeback schema at all)
                and ``create`` is false.
            StoreVersionError: the database's schema is newer than this takeback.
            StoreError: the driver is missing, or the database cannot be reached.
        """
        psycopg = _driver()
        where = address.shown
        key = address.key or root
        conn = connect_db(address)
        try:
            try:
                version = schema_version(conn)
                if version is None or version < PG_SCHEMA_VERSION:
                    if not create and version is None:
                        raise StoreMissingError(
                            f"no takeback store for {root} in {where}; take a snapshot first",
                            path=where,
                        )
                    migrate(conn, where)
                elif version > PG_SCHEMA_VERSION:
                    raise _newer(version, where)
                row = conn.execute(_ROW, (STORE_ID, key)).fetchone()
                if row is None:
                    if not create:
                        raise StoreMissingError(
                            f"no takeback store for {key} in {where}; take a snapshot first",
                            path=where,
                        )
                    conn.execute(
                        b"INSERT INTO takeback.workspaces(key, root, created_at) "
                        b"VALUES (%s,%s,%s) ON CONFLICT (key) DO NOTHING",
                        (key, root, time.time()),
                    )
                    row = conn.execute(_ROW, (STORE_ID, key)).fetchone()
                if row is not None and row[2] is None:
                    # Made now, or by a takeback that kept no id: one is made, once.
                    conn.execute(
                        b"INSERT INTO takeback.meta(ws, key, value) VALUES (%s,%s,%s) "
                        b"ON CONFLICT (ws, key) DO NOTHING",
                        (row[0], STORE_ID, secrets.token_hex(16)),
                    )
                    row = conn.execute(_ROW, (STORE_ID, key)).fetchone()
            except psycopg.Error as e:
                if is_timeout(e):
                    raise StoreError(slow_line(address), path=where) from None
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise StoreError(f"cannot open the store {where}: {first}", path=where) from None
        except BaseException:
            conn.close()
            raise
        assert row is not None  # inserted, or another server's insert won
        slow = did_not_answer(address.where, address.statement_timeout)
        store = cls(address, root, local, PgConn(conn, int(row[0]), where, slow), key)
        store.created_at = float(row[1])
        store.meta.store_id = str(row[2])
        return store

    def close(self) -> None:
        """Commit pending objects and close the connection (which releases its locks)."""
        try:
            self.objects.flush()
        finally:
            self.meta.close()
            self._pg.conn.close()

    # -- locks -----------------------------------------------------------------------

    @contextmanager
    def lock(self, *, exclusive: bool) -> Iterator[None]:
        """Hold the workspace's advisory lock: shared for snapshots, exclusive for restores.

        Held by this connection's session: a server that dies (its connection closed by
        the database) releases it. Re-entrant within one store, as the folder store's.
        """
        with self._lock.hold(exclusive, self._advisory_lock):
            yield

    @contextmanager
    def _advisory_lock(self, exclusive: bool) -> Iterator[None]:
        """Hold the workspace's session-level advisory lock."""
        kind = "" if exclusive else "_shared"
        wait_for_lock(
            self._pg.run, f"pg_advisory_lock{kind}", (LOCK_WORKSPACE, self.ws), local=False
        )
        try:
            yield
        finally:
            try:
                self._pg.run(f"SELECT pg_advisory_unlock{kind}(%s, %s)", (LOCK_WORKSPACE, self.ws))
            except StoreError:
                pass  # the connection is gone, and the lock with it

    @contextmanager
    def gc_lock(self, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold the workspace's gc advisory lock (this connection's session's), waiting."""
        got = self._pg.one("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_GC, self.ws))
        if not (got and got[0]):
            if on_wait is not None:
                on_wait()
            wait_for_lock(self._pg.run, "pg_advisory_lock", (LOCK_GC, self.ws), local=False)
        try:
            yield
        finally:
            try:
                self._pg.run("SELECT pg_advisory_unlock(%s, %s)", (LOCK_GC, self.ws))
            except StoreError:
                pass  # the connection is gone, and the lock with it

    def restore_running(self) -> bool:
        """Return whether another server (or process) holds the exclusive lock."""
        if self._lock.held:
            return False
        row = self._pg.one("SELECT pg_try_advisory_lock_shared(%s, %s)", (LOCK_WORKSPACE, self.ws))
        if not (row and row[0]):
            return True
        self._pg.run("SELECT pg_advisory_unlock_shared(%s, %s)", (LOCK_WORKSPACE, self.ws))
        return False

    # -- journal ---------------------------------------------------------------------

    def write_journal(self, data: dict[str, Any]) -> None:
        """Record that a restore is starting (committed before any workspace write)."""
        self._pg.run(
            "INSERT INTO takeback.journals(ws, data, written_at) VALUES (%s,%s,%s) "
            "ON CONFLICT (ws) DO UPDATE SET data=excluded.data, written_at=excluded.written_at",
            (self.ws, json.dumps(data), time.time()),
        )

    def read_journal(self) -> dict[str, Any] | None:
        """Return the journal of an unfinished restore, if there is one."""
        row = self._pg.one("SELECT data FROM takeback.journals WHERE ws=%s", (self.ws,))
        if row is None:
            return None
        try:
            data = json.loads(row[0])
        except ValueError:
            return {"broken": True}
        return data if isinstance(data, dict) else {"broken": True}

    def clear_journal(self) -> None:
        """Close the journal: the restore finished."""
        self._pg.run("DELETE FROM takeback.journals WHERE ws=%s", (self.ws,))

    # -- gc, fsck and du -------------------------------------------------------------

    def size_by_part(self) -> dict[str, int]:
        """Return the bytes of the workspace's rows in each table.

        Objects: the stored (compressed) size of their data, plus an estimate of the rest
        of the row (``_OBJECT_ROW``: its id, kind, sizes and header; the data is never
        read); the other tables: each row's size as PostgreSQL stores it
        (``pg_column_size`` of the row). Not
        counted: indexes, the room of deleted rows not yet reused, other workspaces.
        """
        ws = self.ws
        parts = {}
        row = self._pg.one(
            "SELECT COALESCE(sum(octet_length(data) + %s), 0) FROM takeback.objects WHERE ws=%s",
            (_OBJECT_ROW, ws),
        )
        parts["objects"] = int(row[0])
        for table in _ROW_TABLES:
            row = self._pg.one(
                f"SELECT COALESCE(sum(pg_column_size(t.*)), 0) FROM takeback.{table} t WHERE ws=%s",
                (ws,),
            )
            parts[table] = int(row[0])
        return parts

    def size_on_disk(self) -> int:
        """Return the bytes of the workspace's rows (see :meth:`size_by_part`)."""
        return sum(self.size_by_part().values())

    def check_files(self) -> list[str]:
        """Nothing below the rows to check: the database keeps its own pages whole.

        (PostgreSQL checks each page's checksum as it reads it, when the cluster has
        them on; ``fsck --read-data`` reads every object's row.)
        """
        return []

    def reclaim(self) -> None:
        """Leave the room of deleted rows to autovacuum, which makes it reusable.

        No ``VACUUM`` here: the tables are every workspace's, a plain vacuum needs the
        tables' owner, and it would not give the room back to the file system either
        (only ``VACUUM FULL``, which locks the tables for every server, does).
        """

    # -- events ----------------------------------------------------------------------

    def log_event(self, event: dict[str, Any]) -> None:
        """Add an event row and announce it on ``takeback_events`` (never raises).

        The notification's payload is ``{"key", "id", "event"}``: a listener reads the
        row by its id (a payload has a size limit an event need not keep).
        """
        sql = (
            "WITH e AS (INSERT INTO takeback.events(ws, at, data) VALUES (%s,%s,%s) "
            "RETURNING id) SELECT pg_notify(%s, json_build_object("
            "'key', %s::text, 'id', e.id, 'event', %s::text)::text) FROM e"
        )
        args = (
            self.ws,
            time.time(),
            json.dumps(event, sort_keys=True),
            EVENTS_CHANNEL,
            self.key,
            str(event.get("event", "")),
        )
        try:
            if self._pg.conn.info.transaction_status == 0:  # idle: one statement, its own
                self._pg.run(sql, args)
            else:
                # Inside a transaction: a savepoint, so a failed event cannot end it.
                with self._pg.conn.transaction():
                    self._pg.run(sql, args)
        except Exception:  # noqa: BLE001 - an event is never worth a failed operation
            pass

    def events(self, after: int = 0, limit: int = 1000) -> list[tuple[int, dict[str, Any]]]:
        """Return the workspace's events with an id above ``after``, oldest first."""
        rows = self._pg.run(
            "SELECT id, data FROM takeback.events WHERE ws=%s AND id>%s ORDER BY id LIMIT %s",
            (self.ws, after, limit),
        )
        return [(int(r[0]), json.loads(r[1])) for r in rows]


#: a workspace's row and its history's id (``STORE_ID``), by its key: one query
_ROW = (
    b"SELECT w.id, w.created_at, m.value FROM takeback.workspaces w "
    b"LEFT JOIN takeback.meta m ON m.ws = w.id AND m.key = %s WHERE w.key = %s"
)
#: about how many bytes an object's row takes besides its data (id, columns, header)
_OBJECT_ROW = 120
#: the tables whose rows :meth:`PgStore.size_by_part` counts, besides the objects
_ROW_TABLES = ("snapshots", "sessions", "steps", "turns", "touches", "changes", "ops", "events")


def find_workspace(address: StoreAddress, candidates: list[str]) -> str | None:
    """Return the workspace root among ``candidates`` (folders, nearest first) the database has.

    With ``#key`` in the URL, the root recorded with that key, if it is a candidate.
    None when the database has none of them (or cannot be reached: the command that
    follows says why).
    """
    key = address.key
    try:
        conn = connect_db(address)
    except StoreError as e:
        if e.message == slow_line(address):
            raise  # the command that follows would wait as long again
        return None
    psycopg = _driver()
    try:
        if key is not None:
            row = conn.execute(b"SELECT root FROM takeback.workspaces WHERE key=%s", (key,))
            got = row.fetchone()
            return str(got[0]) if got and got[0] in candidates else None
        rows = conn.execute(
            b"SELECT key FROM takeback.workspaces WHERE key = ANY(%s)", (candidates,)
        ).fetchall()
    except psycopg.Error:
        return None
    finally:
        conn.close()
    found = {str(r[0]) for r in rows}
    return next((c for c in candidates if c in found), None)
