"""Store layer: the store seam, the three interfaces every store meets.

The use cases (``ops/``) and the API see a store only through these: :class:`Store` (the
lock, the journal, the event log, and its two halves), :class:`Objects` (content-addressed
blobs and trees) and :class:`Meta` (snapshots, sessions, turns, touches, change lists, ops,
the scan's cache). Two stores meet them: the folder store (``_store.py``, SQLite files in
one folder) and the PostgreSQL store (``_pg*.py``, one database that several servers
share). ``tests/test_store_contract.py`` runs one suite against both.

A method here is small and named for one question or one write; a new store feature is a
new method on each of the three classes that meet it, never a query outside them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..model import Change, SessionInfo, SnapshotInfo, StepInfo, Tree
    from ._rows import ChangeRow, ObjectRow, OpRow, Seqs, TouchRow, TurnRow


class Objects(Protocol):
    """Blobs and trees by the SHA-256 of their content, written once, checked on read.

    Attributes:
        raw_cache: how many objects' bytes are kept once read (gc, which walks every
            kept tree and so each delta chain many times, raises it).
    """

    raw_cache: int

    def has(self, oid: str) -> bool:
        """Return whether the object exists (committed or pending)."""
        ...

    def put(
        self,
        kind: str,
        data: bytes,
        oid: str | None = None,
        base: str | None = None,
        *,
        base_bytes: Callable[[], bytes | None] | None = None,
    ) -> str:
        """Add an object (if new), maybe as a delta against ``base``; return its id.

        ``base_bytes`` makes what should be ``base``'s bytes when they are not at hand
        (checked against its id before use).
        """
        ...

    def flush(self) -> None:
        """Commit the objects put so far (before anything that names them)."""
        ...

    def pack(self, data: bytes) -> bytes:
        """Return ``data`` compressed as a whole object is stored (safe on any thread)."""
        ...

    def put_packed(self, items: Sequence[tuple[str, str, int, bytes]]) -> None:
        """Add objects :meth:`pack` compressed: (kind, SHA-256, size, packed bytes)."""
        ...

    def write_behind(self) -> AbstractContextManager[None]:
        """Within the block, full batches may be committed by a writer thread meanwhile."""
        ...

    def repair(self, kind: str, data: bytes) -> bool:
        """Store ``data`` again, whole, over a damaged copy; return whether it was written."""
        ...

    def get(self, oid: str) -> bytes:
        """Return an object's bytes, checked against its id (StoreCorruptError if not)."""
        ...

    def get_stored(self, oid: str) -> bytes:
        """Return the bytes of an object the caller knows is stored, from memory if here."""
        ...

    def read_ahead(self, oids: Iterable[str]) -> int:
        """Keep in memory stored objects that snapshots will read back; return how many."""
        ...

    def get_tree(self, oid: str) -> Tree:
        """Return a decoded tree."""
        ...

    def tree_changes(self, old: str | None, new: str | None) -> tuple[Tree, Tree]:
        """Return the entries of two trees (None: empty) whose records differ, each side's.

        An entry alike in both (kind, mode, size, name and id) is in neither.
        """
        ...

    def entries(self) -> list[tuple[str, str, str | None]]:
        """Return every committed object: (id, kind, base), each base before its deltas."""
        ...

    # gc and fsck
    def index(self) -> dict[str, ObjectRow]:
        """Return every stored object's kind, base, depth and stored size (not its data)."""
        ...

    def bases(self, oids: Iterable[str]) -> dict[str, str | None]:
        """Return the delta base of each stored object named (None: whole); absent ones left out.

        Row by row: for the few objects written since gc read :meth:`index`.
        """
        ...

    def stored_mark(self) -> int:
        """Return where the order of stored rows stands: a row stored later comes after.

        Read by gc under the exclusive lock (no write under way), and again after its
        own deletions.
        """
        ...

    def stored_after(self, mark: int) -> list[tuple[str, str | None]]:
        """Return each row stored after ``mark`` (:meth:`stored_mark`): (id, delta base).

        What a scan stored while gc ran, whether or not anything names it yet (a scan
        that died after storing its objects leaves them named by nothing).
        """
        ...

    def rewrite_whole(self, oids: Iterable[str]) -> list[str]:
        """Store objects again whole (not as deltas); return the ids that could not be."""
        ...

    def delete(self, oids: Sequence[str]) -> None:
        """Delete objects in the order given (deepest delta first), a batch per commit."""
        ...


class Meta(Protocol):
    """Typed queries over the history's rows, and the scan's cache."""

    def tx(self) -> AbstractContextManager[Any]:
        """Return a write transaction: the block's writes are committed together or not."""
        ...

    # store-level settings and the scan's cache (kept per machine by a shared store)
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def get_kv(self, key: str) -> bytes | None: ...
    def get_kv_prefix(self, prefix: str) -> list[tuple[str, bytes]]: ...
    def set_kv(self, key: str, value: bytes) -> None: ...
    def set_kvs(self, rows: dict[str, bytes | None]) -> None: ...
    def drop_kv_except(self, keep: str, *, prefix: str) -> bool: ...
    def dircache_dirs(self) -> list[str]: ...
    def get_dircache(self, dirs: Iterable[str]) -> dict[str, bytes]: ...
    def put_dircache(self, rows: dict[str, bytes | None]) -> None: ...

    # snapshots
    def add_snapshot(self, s: SnapshotInfo) -> None: ...
    def snapshot(self, sid: str) -> SnapshotInfo | None: ...
    def snapshot_ids_with_prefix(self, prefix: str) -> list[str]: ...
    def latest_snapshot(self, session: str | None = None) -> SnapshotInfo | None: ...
    def snapshots(
        self, session: str | None = None, limit: int | None = None
    ) -> list[SnapshotInfo]: ...

    # sessions and steps
    def session(self, name: str) -> SessionInfo | None: ...
    def sessions(self) -> list[SessionInfo]: ...
    def add_session(self, s: SessionInfo) -> None: ...
    def next_step(self, session: str) -> int: ...
    def add_step(self, st: StepInfo) -> None: ...
    def written_since(self, at: float) -> dict[str, str | None]: ...
    def last_recording_session(self) -> str | None: ...
    def last_ended_turn_session(self) -> str | None: ...
    def set_step_start(self, session: str, n: int, *, before: str, turn: int | None) -> None: ...
    def finish_step(
        self, session: str, n: int, after: str | None, exit_code: int | None
    ) -> None: ...
    def step(self, session: str, n: int) -> StepInfo | None: ...
    def steps(self, session: str) -> list[StepInfo]: ...

    # turns, touches, change lists, ops
    def turn_row(self, session: str, n: int) -> TurnRow | None: ...
    def turn_rows(self, session: str) -> list[TurnRow]: ...
    def turn_end_times(self, session: str) -> dict[int, float]: ...
    def turn_end_seqs(self, session: str) -> dict[int, int]: ...
    def add_turn(self, session: str, n: int, label: str, before: str | None, at: float) -> None: ...
    def set_turn_state(
        self, session: str, n: int, state: str, *, ended: float | None = None
    ) -> None: ...
    def add_touch(
        self,
        session: str,
        turn: int,
        path: str,
        state: str | None,
        tool_call_id: str | None,
        *,
        at: float | None = None,
        unconfirmed: bool = False,
    ) -> bool: ...
    def claimed_by_others(self, session: str, since: float) -> set[str]: ...
    def touches(self, session: str, turn: int) -> dict[str, TouchRow]: ...
    def set_changes(self, session: str, turn: int, rows: Iterable[ChangeRow]) -> None: ...
    def change_rows(self, session: str, turn: int) -> list[ChangeRow]: ...
    def changes(self, session: str, turn: int) -> list[Change]: ...
    def add_op(
        self,
        session: str,
        kind: str,
        turns: list[int],
        pre: str | None,
        data: dict[str, Any],
        at: float,
    ) -> int: ...
    def ops(
        self, session: str, kind: str | None = None, state: str | None = None
    ) -> list[OpRow]: ...
    def op_times(self, session: str) -> dict[int, float]: ...
    def op_seqs(self, session: str) -> dict[int, int]: ...

    # the store-wide sequence: snapshots, turns and ops are ordered by it, never by clock
    def next_seq(self) -> int: ...
    def history_seq(self) -> int: ...
    def seqs(self) -> Seqs: ...
    def update_op(self, op_id: int, turns: list[int], data: dict[str, Any]) -> None: ...
    def set_op_state(self, op_id: int, state: str) -> None: ...

    def swap_meta(self, key: str, old: str | None, value: str) -> bool:
        """Set a setting only if it is still ``old`` (None: unset); return whether it was."""
        ...

    # gc, purge and fsck: the whole history in a few queries, and deleting part of it
    def snapshot_rows(self) -> list[tuple[str, str, float, str, str | None]]: ...
    def all_turns(self) -> list[tuple[str, int, str | None, str | None, str, float]]: ...
    def all_steps(self) -> list[StepInfo]: ...
    def all_ops(self) -> list[tuple[OpRow, str, float]]: ...
    def recorded_states(self) -> list[tuple[str, int, str | None]]: ...
    def dircache_rows(self) -> list[bytes]: ...
    def drop_history_tx(
        self,
        *,
        turns: Iterable[tuple[str, int]] = (),
        steps: Iterable[tuple[str, int]] = (),
        ops: Iterable[int] = (),
        sessions: Iterable[str] = (),
        snapshots: Iterable[str] = (),
        scan_cache: bool = False,
        last_gc: str | None = None,
        objects_go: bool = False,
    ) -> None:
        """Delete history rows in one transaction of their own, referring rows first.

        ``scan_cache``: forget this machine's scan cache too; ``last_gc``: record when gc
        ran; ``objects_go``: objects are deleted next, so a shared store tells the other
        machines' scan caches (which may name them) to start again.
        """
        ...

    # copying a history between stores (the tables of ``_copy.COPY_TABLES``)
    def copy_rows(self, table: str) -> list[tuple[Any, ...]]: ...
    def add_copied_rows(self, table: str, rows: list[tuple[Any, ...]]) -> None: ...


class Store(Protocol):
    """An open store: its two halves, the lock, the journal of a restore, the event log.

    Attributes:
        path: the local folder (per machine: the folder store's whole store; a shared
            store's per-machine cache, the hook's pending records and its log).
        root: the workspace this store records.
        url: where the history lives, as a person names it (the folder, or the
            database's address without its password).
        readonly: opened for reading only.
        created_at: when the store (or the workspace's row in it) was made (0: unknown).
    """

    path: str
    root: str
    readonly: bool
    created_at: float

    @property
    def objects(self) -> Objects: ...
    @property
    def meta(self) -> Meta: ...
    @property
    def url(self) -> str: ...

    def close(self) -> None:
        """Commit pending objects and close."""
        ...

    def lock(self, *, exclusive: bool) -> AbstractContextManager[None]:
        """Hold the workspace's lock: shared for snapshots, exclusive for restores and gc.

        Re-entrant within one open store; released when its holder dies.
        """
        ...

    def gc_lock(self, on_wait: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        """Hold the workspace's gc lock, waiting for another gc's: one gc at a time.

        ``on_wait`` is called once before waiting, when another holds it. Not
        re-entrant; released when its holder dies. It keeps nothing else out.
        """
        ...

    def write_journal(self, data: dict[str, Any]) -> None:
        """Record that a restore is starting (durably, before any workspace write)."""
        ...

    def read_journal(self) -> dict[str, Any] | None:
        """Return the journal of an unfinished restore, if any (``{"broken": True}``)."""
        ...

    def clear_journal(self) -> None:
        """Close the journal: the restore finished."""
        ...

    def restore_running(self) -> bool:
        """Return whether another process holds the exclusive lock."""
        ...

    def log_event(self, event: dict[str, Any]) -> None:
        """Record one event (best effort: never raises)."""
        ...

    # gc, fsck and du: the parts that differ between a folder and a database
    def size_on_disk(self) -> int:
        """Return the bytes the history takes (a folder: its blocks; a database: its rows)."""
        ...

    def size_by_part(self) -> dict[str, int]:
        """Return the bytes of each part: a folder's files, a database's tables."""
        ...

    def check_files(self) -> list[str]:
        """Check the storage below the rows (a folder: SQLite's page checks); one line each."""
        ...

    def reclaim(self) -> None:
        """After gc, give the room of deleted rows back (best effort; never raises)."""
        ...
