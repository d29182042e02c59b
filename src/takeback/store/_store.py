"""Store layer: finding, making and opening a store folder, and its locks and logs.

Layout of a store folder (0700; every file 0600)::

    store.json      format version, the workspace root it belongs to, and that folder's
                    device and inode (a moved workspace is known by them)
    objects.db      blobs and trees (SQLite, WAL)
    meta.db         snapshots, sessions, turns, steps, changes, caches (SQLite, WAL)
    lock            flock: shared for snapshots, exclusive for restores and gc
    journal.json    present only while a restore is under way
    events.jsonl    one JSON line per event (snapshot.taken, file.changed, snapshot.failed)
    reserve         room kept free for gc (``RESERVE_BYTES``), written by the first gc: gc
                    deletes it before it opens the databases, so that on a full disk it
                    still has room for its own journal, and writes it again when done
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from .._fs import atomic_write
from .._where import foreign_folder
from ..errors import (
    RootMismatchError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
)
from ._lock import Reentry
from ._meta import SCHEMA_VERSION, MetaStore
from ._sqlite import checkpoint_idle, connect, reclaim, reuse_connections, run_idle
from ._sqlite_objects import ObjectStore, read_ids

FORMAT_VERSION = 1
_MARKER = "store.json"
_RESERVE = "reserve"
#: How much room the store keeps for gc (what its deletions write to SQLite's log).
RESERVE_BYTES = 4 << 20


def read_marker(path: str) -> dict[str, Any] | None:
    """Return a store's ``store.json`` (None: missing or unreadable)."""
    try:
        with open(os.path.join(path, _MARKER), "rb") as f:
            info = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and isinstance(info.get("root"), str) else None


def _identity(root: str) -> dict[str, int]:
    """The root folder's device and inode: they survive a rename or a move in one disk."""
    try:
        st = os.stat(root)
    except OSError:
        return {}
    return {"dev": st.st_dev, "ino": st.st_ino}


def moved_here(info: dict[str, Any], root: str) -> bool:
    """Whether a store's recorded root was moved to ``root``.

    The recorded folder no longer exists, and ``root`` is the same folder (device and
    inode, as ``store.json`` recorded them): renamed or moved, not copied.
    """
    stored = info.get("root")
    if not isinstance(stored, str) or stored == root or os.path.lexists(stored):
        return False
    ident = _identity(root)
    return bool(ident) and all(info.get(k) == v for k, v in ident.items())


def rehome(path: str, root: str) -> None:
    """Make the store at ``path`` belong to ``root`` (its ``store.json`` rewritten).

    Raises:
        StoreCorruptError: the marker is unreadable.
    """
    info = read_marker(path)
    if info is None:
        raise StoreCorruptError(f"store marker is unreadable: {path}/{_MARKER}", path=path)
    info.update(root=root, **_identity(root))
    atomic_write(os.path.join(path, _MARKER), json.dumps(info).encode())


def _no_room(e: sqlite3.OperationalError) -> bool:
    """Whether SQLite failed for lack of room (a full disk shows as either)."""
    text = str(e).lower()
    return "disk is full" in text or "disk i/o error" in text


def _writable(path: str) -> bool:
    """Return whether this process may write the store folder and its databases."""
    if not os.access(path, os.W_OK | os.X_OK):
        return False
    return all(os.access(os.path.join(path, name), os.W_OK) for name in ("objects.db", "meta.db"))


#: object ids read in one query when reading the id index ahead (some 20 of its pages)
_IDS_PER_READ = 1024
#: The page cache of the objects' kept connection, in KiB (SQLite's own is 2,000). A
#: lookup of an object by its id goes down the id index, then the table, from their
#: upper pages; with a million objects those are some 10 MB, which the default cache
#: could not keep from one call to the next (each lookup read them again).
OBJECTS_CACHE_KIB = 16384


class HeldDatabases:
    """A folder store's databases, kept open between the calls of this process."""

    def __init__(self, path: str) -> None:
        self._files = [os.path.join(path, name) for name in ("meta.db", "objects.db")]
        self._ends = [
            reuse_connections(self._files[0]),
            reuse_connections(self._files[1], cache_kib=OBJECTS_CACHE_KIB),
        ]
        #: where reading the objects' id index ahead goes on from (None: it is done)
        self._ids_after: str | None = ""
        #: how many ids were read ahead
        self.ids_read = 0

    @property
    def ids_ahead(self) -> bool:
        """Whether the objects' id index is still to be read ahead (:meth:`read_ids_ahead`)."""
        return self._ids_after is not None

    def read_ids_ahead(self, budget: float) -> None:
        """Read the objects' id index on, in order, for about ``budget`` seconds.

        A snapshot asks for each new object by its id, a random place in the index:
        with a million objects, a page the system no longer held in memory, read from
        the disk (some 40 such reads, 13 ms of a snapshot of 10 changed files). Read
        once, in this process's idle time, the index stays in the system's memory (not
        this process's). Ids stored meanwhile are read too when they come later in the
        order. A failure ends it: this only saves time later.
        """
        end = time.monotonic() + budget
        objects = self._files[1]
        while self._ids_after is not None:
            got = run_idle(objects, partial(read_ids, after=self._ids_after, count=_IDS_PER_READ))
            last, n = got if got is not None else (None, 0)
            self.ids_read += n
            # Fewer than asked: that was the end of the index.
            self._ids_after = last if n == _IDS_PER_READ else None
            if time.monotonic() >= end:
                return

    def checkpoint(self) -> int:
        """Copy the databases' write-ahead logs into them, between two calls.

        The calls' commits leave that to the process's idle time (see
        :func:`._sqlite.checkpoint_idle`). Returns how many pages of the logs the
        databases hold now.
        """
        return sum(checkpoint_idle(f) for f in self._files)

    def release(self) -> None:
        """Let the kept connections go: the next close of each is the file's last."""
        for end in self._ends:
            end()


def hold_databases(path: str) -> HeldDatabases:
    """Keep a folder store's databases open between the calls of this process.

    For a process that opens and closes the store call after call (the watching
    service): each database's connections are kept open and idle when a call closes
    them, and the next call's opening takes them (see :func:`reuse_connections`). What
    cannot be opened is not held.
    """
    return HeldDatabases(path)


def release_reserve(path: str) -> bool:
    """Delete the room a store keeps for gc (before gc opens it); return whether it was there."""
    try:
        os.unlink(os.path.join(path, _RESERVE))
    except OSError:
        return False
    return True


def make_reserve(path: str) -> bool:
    """Keep ``RESERVE_BYTES`` of room in the store for gc (best effort); return whether kept."""
    target = os.path.join(path, _RESERVE)
    try:
        if os.path.getsize(target) >= RESERVE_BYTES:
            return True
    except OSError:
        pass
    tmp = target + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            # Written, not a hole: the blocks must really be taken from the disk.
            chunk = bytes(1 << 20)
            for _ in range(RESERVE_BYTES // len(chunk)):
                os.write(fd, chunk)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True


def disk_usage(path: str) -> int:
    """Return the bytes a store folder takes on the disk (its files' blocks, as ``du``).

    The room kept for gc (``reserve``) is not counted: it is the same in every store.
    """
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            if dirpath == path and name == _RESERVE:
                continue
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def disk_free(path: str) -> int:
    """Return the bytes free on the disk that holds ``path`` (0 when unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


class FolderStore:
    """An open folder store: its object store, its metadata, and the files beside them."""

    def __init__(self, path: str, root: str, objects: ObjectStore, meta: MetaStore) -> None:
        self.path = path
        self.root = root
        self.objects = objects
        self.meta = meta
        self._lock = Reentry()
        #: opened for reading only (the store cannot be written)
        self.readonly = False
        #: why it cannot be written
        self.readonly_reason = "it is read-only"
        #: when the store was made (``store.json``; 0 when it does not say)
        self.created_at = 0.0

    @property
    def url(self) -> str:
        """Where the history lives: this folder."""
        return self.path

    @classmethod
    def open(cls, path: str, root: str, *, create: bool) -> FolderStore:
        """Open the store at ``path`` for workspace ``root``, making it if ``create``.

        A store is made only where there is no ``store.json``; an existing one is opened
        as it is, never repaired (a damaged database is refused, not emptied). A store
        that cannot be written (a read-only folder or file system) is opened for reading:
        reading commands work, and nothing is created in it.

        Raises:
            StoreMissingError: no store there and ``create`` is false.
            StoreVersionError: a newer format.
            RootMismatchError: the store belongs to another workspace.
            StoreCorruptError: the marker or a database is damaged.
            StoreError: ``path`` is not a folder, or a database cannot be opened.
        """
        if os.path.lexists(path) and not os.path.isdir(path):
            raise StoreError(f"not a store folder: {path} is not a folder", path=path)
        foreign = foreign_folder(path)
        if foreign:
            raise StoreError(f"refusing the store folder: {foreign}", path=path)
        marker = os.path.join(path, _MARKER)
        if not os.path.lexists(marker):
            if not create:
                raise StoreMissingError(
                    f"no takeback store for {root} (looked in {path}); take a snapshot first",
                    path=path,
                )
            return cls._create(path, root)
        try:
            with open(marker, "rb") as f:
                info = json.loads(f.read())
            version = int(info["format"])
            stored_root = info["root"]
            if not isinstance(stored_root, str):
                raise TypeError("root is not a string")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise StoreCorruptError(f"store marker is unreadable: {marker}", path=path) from e
        if version > FORMAT_VERSION:
            raise StoreVersionError(
                f"store format {version} is newer than this takeback knows ({FORMAT_VERSION}); "
                "upgrade takeback to use it (pip install -U takeback)",
                path=path,
                expected=FORMAT_VERSION,
                actual=version,
            )
        if stored_root != root:
            hint = (
                f"; this folder looks like {stored_root}, moved: adopt its history with "
                f"`takeback adopt {path}`"
                if moved_here(info, root)
                else ""
            )
            raise RootMismatchError(
                f"store {path} belongs to {stored_root}, not {root}{hint}",
                path=path,
                expected=root,
                actual=stored_root,
            )
        for name in ("objects.db", "meta.db"):
            if not os.path.lexists(os.path.join(path, name)):
                raise StoreCorruptError(f"store is damaged: {name} is missing", path=path)
        try:
            return cls._open(path, root, info, readonly=not _writable(path))
        except StoreError as e:
            if not isinstance(e.__cause__, sqlite3.OperationalError) or not _no_room(e.__cause__):
                raise
        # A full disk: SQLite cannot make the files a writer needs beside the database.
        # Opened for reading, it needs none: what only reads works, and every write fails
        # as it would have (a snapshot then fails cleanly, and says so).
        store = cls._open(path, root, info, readonly=True, full_disk=True)
        store.readonly_reason = "the disk is full"
        return store

    @classmethod
    def _open(
        cls, path: str, root: str, info: dict[str, Any], *, readonly: bool, full_disk: bool = False
    ) -> FolderStore:
        opened: list[sqlite3.Connection] = []
        try:
            objects_path = os.path.join(path, "objects.db")
            opened.append(
                connect(objects_path, create=False, readonly=readonly, full_disk=full_disk)
            )
            objects = ObjectStore(opened[-1], objects_path)
            opened.append(
                connect(
                    os.path.join(path, "meta.db"),
                    create=False,
                    readonly=readonly,
                    full_disk=full_disk,
                )
            )
            meta = MetaStore(opened[-1])
            objects.check_schema()
            schema = meta.check_schema()
            if schema < SCHEMA_VERSION:
                # Once per store: written by an older takeback, its columns are checked
                # (and added) and the version recorded, so the next opening is one query.
                objects.upgrade()
                meta.upgrade(record=not readonly)
        except sqlite3.Error as e:
            for conn in opened:
                conn.close()
            raise StoreError(f"cannot open the store {path}: {e}", path=path) from e
        except BaseException:
            for conn in opened:
                conn.close()
            raise
        if schema > SCHEMA_VERSION:
            objects.conn.close()
            meta.conn.close()
            raise StoreVersionError(
                f"store schema {schema} is newer than this takeback knows ({SCHEMA_VERSION}); "
                "upgrade takeback to use it (pip install -U takeback)",
                path=path,
                expected=SCHEMA_VERSION,
                actual=schema,
            )
        if not readonly and "ino" not in info:
            # Written before stores kept it: the folder's identity lets a moved
            # workspace find its history again.
            try:
                rehome(path, root)
            except (OSError, StoreError):
                pass
        store = cls(path, root, objects, meta)
        store.readonly = readonly
        created = info.get("created_at")
        store.created_at = float(created) if isinstance(created, int | float) else 0.0
        return store

    @classmethod
    def _create(cls, path: str, root: str) -> FolderStore:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            os.chmod(path, 0o700)
        except OSError as e:
            raise StoreError(f"cannot make the store {path}: {e.strerror or e}", path=path) from e
        info = {
            "format": FORMAT_VERSION,
            "root": root,
            "created_at": time.time(),
            **_identity(root),
        }
        objects = ObjectStore(
            connect(os.path.join(path, "objects.db"), create=True), os.path.join(path, "objects.db")
        )
        objects.init_schema()
        meta = MetaStore(connect(os.path.join(path, "meta.db"), create=True))
        meta.init_schema()
        meta.set_meta("schema_version", str(SCHEMA_VERSION))
        # The marker is written last: a store without it is an unfinished creation,
        # which the next call simply completes.
        atomic_write(os.path.join(path, _MARKER), json.dumps(info).encode())
        store = cls(path, root, objects, meta)
        store.created_at = time.time()
        return store

    def close(self) -> None:
        """Commit pending objects and close the databases."""
        try:
            self.objects.flush()
        finally:
            self.objects.conn.close()
            self.meta.conn.close()

    # -- locks -----------------------------------------------------------------------

    @contextmanager
    def lock(self, *, exclusive: bool) -> Iterator[None]:
        """Hold the store's lock: shared for snapshots, exclusive for restores and gc.

        Re-entrant within one Store: a snapshot taken inside a restore (the pre-restore
        snapshot) runs under the restore's exclusive lock instead of waiting for it, which
        a second flock on a new file description would do forever.

        Raises:
            StoreError: the store was opened read-only (everything under the lock writes).
        """
        self._refuse_readonly()
        with self._lock.hold(exclusive, self._flock):
            yield

    def _refuse_readonly(self) -> None:
        """Raise StoreError when the store was opened for reading only."""
        if self.readonly:
            raise StoreError(
                f"cannot write to the store {self.path}: {self.readonly_reason} "
                "(it can be read, not recorded to)",
                path=self.path,
            )

    @contextmanager
    def _flock(self, exclusive: bool) -> Iterator[None]:
        """Hold the ``lock`` file's flock (released when its holder dies)."""
        fd = os.open(os.path.join(self.path, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    @contextmanager
    def gc_lock(self, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold the ``gc.lock`` file's flock, waiting for another gc's (see the seam)."""
        self._refuse_readonly()
        fd = os.open(
            os.path.join(self.path, "gc.lock"),
            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
            0o600,
        )
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # -- journal ---------------------------------------------------------------------

    @property
    def journal_path(self) -> str:
        """Where the journal of an unfinished restore lives."""
        return os.path.join(self.path, "journal.json")

    def write_journal(self, data: dict[str, Any]) -> None:
        """Record that a restore is starting (atomically, before any workspace write)."""
        atomic_write(self.journal_path, json.dumps(data).encode())

    def restore_running(self) -> bool:
        """Return whether another process holds the exclusive lock (a restore under way)."""
        if self._lock.held:
            return False
        # Opened for reading, never made: a read creates nothing in the store, and a
        # restore under way holds a lock file that exists.
        try:
            fd = os.open(os.path.join(self.path, "lock"), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def read_journal(self) -> dict[str, Any] | None:
        """Return the journal of an unfinished restore, if there is one."""
        try:
            with open(self.journal_path, "rb") as f:
                data = json.loads(f.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {"broken": True}
        return data if isinstance(data, dict) else {"broken": True}

    def clear_journal(self) -> None:
        """Close the journal: the restore finished."""
        try:
            os.unlink(self.journal_path)
        except FileNotFoundError:
            pass

    # -- events ----------------------------------------------------------------------

    def log_event(self, event: dict[str, Any]) -> None:
        """Append one event line to ``events.jsonl`` (best effort: never raises)."""
        try:
            fd = os.open(
                os.path.join(self.path, "events.jsonl"),
                os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                0o600,
            )
            try:
                os.write(fd, (json.dumps(event, sort_keys=True) + "\n").encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    # -- gc, fsck and du -------------------------------------------------------------

    def size_on_disk(self) -> int:
        """Return the blocks the store folder takes (as ``du``; the reserve left out)."""
        return disk_usage(self.path)

    def size_by_part(self) -> dict[str, int]:
        """Return the blocks each file of the store folder takes."""
        files = {}
        for name in sorted(os.listdir(self.path)):
            full = os.path.join(self.path, name)
            if os.path.isfile(full):
                files[name] = os.lstat(full).st_blocks * 512
        return files

    def check_files(self) -> list[str]:
        """Check both databases page by page (SQLite's ``quick_check``); one line a problem."""
        problems: list[str] = []
        for conn, name in ((self.objects.conn, "objects.db"), (self.meta.conn, "meta.db")):
            try:
                rows = conn.execute("PRAGMA quick_check").fetchall()
            except (sqlite3.Error, StoreCorruptError) as e:
                rows = [(str(e),)]
            problems.extend(f"{name}: {msg}" for (msg,) in rows if msg != "ok")
        return problems

    def reclaim(self) -> None:
        """Give freed pages back to the file system, then keep the reserve for the next gc.

        SQLite's incremental vacuum, a few pages per transaction on a full disk.
        """
        reclaim(self.objects.conn, room=disk_free(self.path))
        reclaim(self.meta.conn, room=disk_free(self.path))
        make_reserve(self.path)
