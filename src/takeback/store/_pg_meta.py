"""Store layer: the PostgreSQL store's objects and rows (the two halves of the seam).

Every query names its workspace (``ws``). Writes of rows run in :class:`PgTx`, which
also takes a transaction-level advisory lock on the workspace: two servers' writers of
one workspace follow each other, as SQLite's ``BEGIN IMMEDIATE`` makes them do in a
folder store (numbering a new turn or step reads then writes). The scan's stat cache
(``kv``, ``dircache``) is per machine: it is a SQLite file in the local folder, written in
the same ``with tx():`` block as the rows.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..model import Change, SessionInfo, SnapshotInfo, StepInfo
from ._copy import COPY_TABLES
from ._meta import _SNAP_COLS, MetaStore, _snap, _step, change_row, changes_of
from ._objects import PackedObjects
from ._pg_conn import PgConn, PgTx
from ._rows import ChangeRow, ObjectRow, OpRow, Seqs, TouchRow, TurnRow

#: the workspace's cache generation (a number gc raises before it deletes objects)
GENERATION = "gc.generation"
#: the keys of the scan's cache (``scan.CACHE_KEY`` and its older formats)
SCAN_CACHE_PREFIX = "dirs-"
#: the history and generation this machine's scan cache was made under (in ``cache.db``)
LOCAL_GENERATION = "cache.generation"
#: the workspace's history's id, random, made with it (never copied to another store)
STORE_ID = "store.id"

if TYPE_CHECKING:
    pass

_MAX_INT = 2**63 - 1
_STEP_COLS = "session, n, turn, before, after, label, exit_code, command"


def _storable(n: int) -> bool:
    return -_MAX_INT - 1 <= n <= _MAX_INT


def _path(value: object) -> str:
    return os.fsdecode(bytes(value)) if isinstance(value, bytes | memoryview) else str(value)


class PgObjects(PackedObjects):
    """A workspace's objects, as rows of ``takeback.objects``."""

    #: one connection, whose transaction a second thread's reads would join
    write_behind_ok = False

    def __init__(self, pg: PgConn) -> None:
        super().__init__(pg.where)
        self.pg = pg

    def _row_exists(self, oid: str) -> bool:
        sql = "SELECT 1 FROM takeback.objects WHERE ws=%s AND oid=%s"
        return self.pg.one(sql, (self.pg.ws, oid)) is not None

    def _row_depth(self, oid: str) -> int | None:
        sql = "SELECT depth FROM takeback.objects WHERE ws=%s AND oid=%s"
        row = self.pg.one(sql, (self.pg.ws, oid))
        return None if row is None else int(row[0])

    def _row(self, oid: str) -> tuple[bytes, str | None] | None:
        sql = "SELECT data, base FROM takeback.objects WHERE ws=%s AND oid=%s"
        row = self.pg.one(sql, (self.pg.ws, oid))
        return None if row is None else (bytes(row[0]), row[1])

    def _insert_rows(self, rows: list[tuple[str, str, int, bytes, str | None, int]]) -> None:
        # Written once by content hash: an insert that meets a row another server wrote
        # first (the same bytes, by their name) leaves it.
        import psycopg

        try:
            with self.pg.conn.transaction():
                self.pg.many(
                    "INSERT INTO takeback.objects(ws, oid, kind, size, data, base, depth) "
                    "VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (ws, oid) DO NOTHING",
                    [(self.pg.ws, *r) for r in rows],
                )
        except psycopg.Error as e:
            raise self.pg.error(e) from e

    def entries(self) -> list[tuple[str, str, str | None]]:
        """Return every committed object: (id, kind, base), each base before its deltas."""
        rows = self.pg.run(
            "SELECT oid, kind, base FROM takeback.objects WHERE ws=%s ORDER BY depth, oid",
            (self.pg.ws,),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def _replace_row(self, oid: str, kind: str, size: int, packed: bytes) -> bool:
        try:
            self.pg.run(
                "INSERT INTO takeback.objects(ws, oid, kind, size, data, base, depth) "
                "VALUES (%s,%s,%s,%s,%s,NULL,0) ON CONFLICT (ws, oid) DO UPDATE SET "
                "kind=excluded.kind, size=excluded.size, data=excluded.data, base=NULL, depth=0",
                (self.pg.ws, oid, kind, size, packed),
            )
        except StoreError:
            return False
        return True

    # -- gc and fsck -----------------------------------------------------------------

    def index(self) -> dict[str, ObjectRow]:
        """Return every object's id with its kind, base, depth and stored size.

        ``octet_length`` of a stored value reads its header only, not its data.
        """
        self.flush()
        rows = self.pg.run(
            "SELECT oid, kind, base, depth, octet_length(data) FROM takeback.objects WHERE ws=%s",
            (self.pg.ws,),
        )
        return {r[0]: ObjectRow(r[1], r[2], int(r[3]), int(r[4])) for r in rows}

    def _rewrite_rows(self, batch: list[tuple[bytes, str]]) -> None:
        import psycopg

        try:
            with self.pg.conn.transaction():
                self.pg.many(
                    "UPDATE takeback.objects SET data=%s, base=NULL, depth=0 "
                    "WHERE ws=%s AND oid=%s",
                    [(packed, self.pg.ws, oid) for packed, oid in batch],
                )
        except psycopg.Error as e:
            raise self.pg.error(e) from e

    def delete(self, oids: Sequence[str], *, batch: int = 4096) -> None:
        """Delete objects, in the order given, a batch per transaction (deepest first).

        Raises:
            StoreError: a batch could not be deleted (it is rolled back).
        """
        self.flush()
        for i in range(0, len(oids), batch):
            part = list(oids[i : i + batch])
            self.pg.run(
                "DELETE FROM takeback.objects WHERE ws=%s AND oid = ANY(%s)", (self.pg.ws, part)
            )
            for o in part:
                self._drop_raw(o)
                self._trees.pop(o, None)


class PgMeta:
    """A workspace's rows in the database; the scan's cache in a local SQLite file."""

    def __init__(self, pg: PgConn, cache: Callable[[], MetaStore]) -> None:
        self.pg = pg
        self._open_cache = cache
        self._cache: MetaStore | None = None
        #: the history's id (``STORE_ID``): a local cache made for another is dropped
        self.store_id = ""

    def _local(self) -> MetaStore:
        if self._cache is None:
            cache = self._open_cache()
            if cache.get_meta(LOCAL_GENERATION) is None:
                # A new cache is this history's, as it is now (see _fresh_cache).
                cache.set_meta(LOCAL_GENERATION, self._stamp())
            self._cache = cache
        return self._cache

    def _stamp(self) -> str:
        return f"{self.store_id}/{self.get_meta(GENERATION) or '0'}"

    def close(self) -> None:
        """Close the local cache."""
        if self._cache is not None:
            self._cache.conn.close()
            self._cache = None

    def tx(self) -> PgTx:
        """Return a write transaction context."""
        return PgTx(self.pg, self._local)

    # -- meta and kv -----------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """Return a workspace-level setting."""
        row = self.pg.one(
            "SELECT value FROM takeback.meta WHERE ws=%s AND key=%s", (self.pg.ws, key)
        )
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Set a workspace-level setting."""
        self.pg.run(
            "INSERT INTO takeback.meta(ws, key, value) VALUES (%s,%s,%s) "
            "ON CONFLICT (ws, key) DO UPDATE SET value=excluded.value",
            (self.pg.ws, key, value),
        )

    def swap_meta(self, key: str, old: str | None, value: str) -> bool:
        """Set a setting only if it is still ``old`` (None: unset); return whether it was."""
        if old is None:
            cur = self.pg.run(
                "INSERT INTO takeback.meta(ws, key, value) VALUES (%s,%s,%s) "
                "ON CONFLICT (ws, key) DO NOTHING",
                (self.pg.ws, key, value),
            )
        else:
            cur = self.pg.run(
                "UPDATE takeback.meta SET value=%s WHERE ws=%s AND key=%s AND value=%s",
                (value, self.pg.ws, key, old),
            )
        return cur.rowcount > 0

    def _fresh_cache(self) -> MetaStore:
        """Return this machine's cache, emptied first if gc ran since it was made.

        gc (on any server) raises the workspace's generation before it deletes objects;
        this machine's scan cache, made under an older one, may name objects that are
        gone, so it is dropped (the next scan reads every file, as a first one does). So is
        a cache made for another history (``store_id``: a database made again at the same
        address, a key that names another workspace). Asked each time a scan reads its
        cache, under the shared lock that keeps gc out until the snapshot's rows are written.
        """
        cache = self._local()
        now = self._stamp()
        if (cache.get_meta(LOCAL_GENERATION) or "0") == now:
            return cache
        if cache.conn.in_transaction:
            cache.drop_scan_cache()
            cache.set_meta(LOCAL_GENERATION, now)
        else:
            with cache.tx():
                cache.drop_scan_cache()
                cache.set_meta(LOCAL_GENERATION, now)
        return cache

    def get_kv(self, key: str) -> bytes | None:
        """Return a cached value (this machine's; the scan's, when still valid)."""
        if key.startswith(SCAN_CACHE_PREFIX):
            return self._fresh_cache().get_kv(key)
        return self._local().get_kv(key)

    def get_kv_prefix(self, prefix: str) -> list[tuple[str, bytes]]:
        """Return the cached values under ``prefix``, in one statement (this machine's)."""
        if prefix.startswith(SCAN_CACHE_PREFIX):
            return self._fresh_cache().get_kv_prefix(prefix)
        return self._local().get_kv_prefix(prefix)

    def set_kv(self, key: str, value: bytes) -> None:
        """Store a cached value (this machine's)."""
        self._local().set_kv(key, value)

    def set_kvs(self, rows: dict[str, bytes | None]) -> None:
        """Store (or, for None, delete) some cached values (this machine's)."""
        self._local().set_kvs(rows)

    def drop_kv_except(self, keep: str, *, prefix: str) -> bool:
        """Delete this machine's cached values under ``prefix``, but ``keep`` and those under it."""
        return self._local().drop_kv_except(keep, prefix=prefix)

    def dircache_rows(self) -> list[bytes]:
        """Return the scan cache's detailed rows (this machine's)."""
        return self._local().dircache_rows()

    def dircache_dirs(self) -> list[str]:
        """Return the folders that have a detailed stat cache row (this machine's)."""
        return self._local().dircache_dirs()

    def get_dircache(self, dirs: Iterable[str]) -> dict[str, bytes]:
        """Return the detailed stat cache rows of some folders (this machine's)."""
        return self._local().get_dircache(dirs)

    def put_dircache(self, rows: dict[str, bytes | None]) -> None:
        """Replace (or, for None, drop) detailed stat cache rows (this machine's)."""
        self._local().put_dircache(rows)

    # -- snapshots -------------------------------------------------------------------

    def add_snapshot(self, s: SnapshotInfo) -> None:
        """Insert a snapshot row (its tree must already be committed)."""
        self.pg.run(
            f"INSERT INTO takeback.snapshots(ws, {_SNAP_COLS}) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            (
                self.pg.ws,
                s.id,
                s.tree,
                s.created_at,
                s.kind,
                s.session,
                s.turn,
                s.step,
                s.message,
                s.files,
                json.dumps(list(s.skipped)),
                s.skipped_count,
                s.duration_ms,
                json.dumps([list(u) for u in s.unreadable]),
                s.unreadable_count,
            ),
        )

    def snapshot(self, sid: str) -> SnapshotInfo | None:
        """Return one snapshot by full id."""
        row = self.pg.one(
            f"SELECT {_SNAP_COLS} FROM takeback.snapshots WHERE ws=%s AND id=%s",
            (self.pg.ws, sid),
        )
        return None if row is None else _snap(row)

    def snapshot_ids_with_prefix(self, prefix: str) -> list[str]:
        """Return the ids that start with ``prefix`` (lower-case hex)."""
        rows = self.pg.run(
            "SELECT id FROM takeback.snapshots WHERE ws=%s AND starts_with(id, %s) "
            "ORDER BY id LIMIT 10",
            (self.pg.ws, prefix),
        )
        return [r[0] for r in rows]

    def latest_snapshot(self, session: str | None = None) -> SnapshotInfo | None:
        """Return the newest snapshot (of a session, or of the whole workspace)."""
        if session is None:
            row = self.pg.one(
                f"SELECT {_SNAP_COLS} FROM takeback.snapshots WHERE ws=%s "
                "ORDER BY seq DESC LIMIT 1",
                (self.pg.ws,),
            )
        else:
            row = self.pg.one(
                f"SELECT {_SNAP_COLS} FROM takeback.snapshots WHERE ws=%s AND session=%s "
                "ORDER BY seq DESC LIMIT 1",
                (self.pg.ws, session),
            )
        return None if row is None else _snap(row)

    def snapshots(self, session: str | None = None, limit: int | None = None) -> list[SnapshotInfo]:
        """Return snapshots newest first."""
        sql = f"SELECT {_SNAP_COLS} FROM takeback.snapshots WHERE ws=%s"
        args: list[Any] = [self.pg.ws]
        if session is not None:
            sql += " AND session=%s"
            args.append(session)
        sql += " ORDER BY seq DESC"
        if limit is not None and 0 <= limit <= _MAX_INT:  # SQLite reads a negative as none
            sql += " LIMIT %s"
            args.append(limit)
        return [_snap(r) for r in self.pg.run(sql, args)]

    # -- sessions and steps ----------------------------------------------------------

    def session(self, name: str) -> SessionInfo | None:
        """Return a session by name."""
        row = self.pg.one(
            "SELECT name, baseline, created_at FROM takeback.sessions WHERE ws=%s AND name=%s",
            (self.pg.ws, name),
        )
        return None if row is None else SessionInfo(*row)

    def sessions(self) -> list[SessionInfo]:
        """Return every session, newest first."""
        rows = self.pg.run(
            "SELECT name, baseline, created_at FROM takeback.sessions WHERE ws=%s "
            "ORDER BY created_at DESC",
            (self.pg.ws,),
        )
        return [SessionInfo(*r) for r in rows]

    def add_session(self, s: SessionInfo) -> None:
        """Insert a session row (its baseline snapshot must exist)."""
        self.pg.run(
            "INSERT INTO takeback.sessions(ws, name, baseline, created_at) VALUES (%s,%s,%s,%s)",
            (self.pg.ws, s.name, s.baseline, s.created_at),
        )

    def next_step(self, session: str) -> int:
        """Return the number the next step of a session gets."""
        row = self.pg.one(
            "SELECT COALESCE(MAX(n), 0) FROM takeback.steps WHERE ws=%s AND session=%s",
            (self.pg.ws, session),
        )
        return int(row[0]) + 1

    def add_step(self, st: StepInfo) -> None:
        """Insert a step row."""
        self.pg.run(
            f"INSERT INTO takeback.steps(ws, {_STEP_COLS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            (
                self.pg.ws,
                st.session,
                st.n,
                st.turn,
                st.before,
                st.after,
                st.label,
                st.exit_code,
                int(st.command),
            ),
        )

    def written_since(self, at: float) -> dict[str, str | None]:
        """What take-backs of any session wrote after ``at``: path -> state (newest wins)."""
        out: dict[str, str | None] = {}
        for (data,) in self.pg.run(
            "SELECT data FROM takeback.ops WHERE ws=%s AND created_at > %s ORDER BY id",
            (self.pg.ws, at),
        ):
            wrote = json.loads(data).get("wrote")
            if isinstance(wrote, dict):
                out.update(wrote)
        return out

    def last_recording_session(self) -> str | None:
        """Return the session of the newest snapshot that has one."""
        row = self.pg.one(
            "SELECT session FROM takeback.snapshots WHERE ws=%s AND session IS NOT NULL "
            "ORDER BY seq DESC LIMIT 1",
            (self.pg.ws,),
        )
        return None if row is None else str(row[0])

    def last_ended_turn_session(self) -> str | None:
        """Return the session of the turn that ended last (None: no turn has ended)."""
        row = self.pg.one(
            "SELECT session FROM takeback.turns WHERE ws=%s AND ended_seq IS NOT NULL "
            "ORDER BY ended_seq DESC, seq DESC LIMIT 1",
            (self.pg.ws,),
        )
        return None if row is None else str(row[0])

    def set_step_start(self, session: str, n: int, *, before: str, turn: int | None) -> None:
        """Record a step's snapshot before it, and the turn it belongs to."""
        self.pg.run(
            "UPDATE takeback.steps SET before=%s, turn=%s WHERE ws=%s AND session=%s AND n=%s",
            (before, turn, self.pg.ws, session, n),
        )

    def finish_step(self, session: str, n: int, after: str | None, exit_code: int | None) -> None:
        """Record the snapshot after a step and the command's status."""
        self.pg.run(
            "UPDATE takeback.steps SET after=%s, exit_code=%s WHERE ws=%s AND session=%s AND n=%s",
            (after, exit_code, self.pg.ws, session, n),
        )

    def step(self, session: str, n: int) -> StepInfo | None:
        """Return one step (None when there is none)."""
        if not _storable(n):
            return None
        row = self.pg.one(
            f"SELECT {_STEP_COLS} FROM takeback.steps WHERE ws=%s AND session=%s AND n=%s",
            (self.pg.ws, session, n),
        )
        return None if row is None else _step(row)

    def steps(self, session: str) -> list[StepInfo]:
        """Return a session's steps in order."""
        rows = self.pg.run(
            f"SELECT {_STEP_COLS} FROM takeback.steps WHERE ws=%s AND session=%s ORDER BY n",
            (self.pg.ws, session),
        )
        return [_step(r) for r in rows]

    # -- turns, touches, changes, ops ------------------------------------------------

    def turn_row(self, session: str, n: int) -> TurnRow | None:
        """Return one turn (None when there is none)."""
        if not _storable(n):
            return None
        row = self.pg.one(
            "SELECT n, label, before, after, state FROM takeback.turns "
            "WHERE ws=%s AND session=%s AND n=%s",
            (self.pg.ws, session, n),
        )
        return None if row is None else TurnRow(*row)

    def turn_rows(self, session: str) -> list[TurnRow]:
        """Return every turn of a session, in order."""
        rows = self.pg.run(
            "SELECT n, label, before, after, state FROM takeback.turns "
            "WHERE ws=%s AND session=%s ORDER BY n",
            (self.pg.ws, session),
        )
        return [TurnRow(*r) for r in rows]

    def turn_end_seqs(self, session: str) -> dict[int, int]:
        """Return the sequence number at which each ended turn of the session ended."""
        rows = self.pg.run(
            "SELECT n, ended_seq FROM takeback.turns "
            "WHERE ws=%s AND session=%s AND ended_seq IS NOT NULL",
            (self.pg.ws, session),
        )
        return {int(r[0]): int(r[1]) for r in rows}

    def turn_end_times(self, session: str) -> dict[int, float]:
        """Return when each ended turn of the session ended."""
        rows = self.pg.run(
            "SELECT n, ended_at FROM takeback.turns "
            "WHERE ws=%s AND session=%s AND ended_at IS NOT NULL",
            (self.pg.ws, session),
        )
        return {int(r[0]): float(r[1]) for r in rows}

    def add_turn(self, session: str, n: int, label: str, before: str | None, at: float) -> None:
        """Open a turn."""
        self.pg.run(
            "INSERT INTO takeback.turns(ws, session, n, label, before, state, begun_at, "
            f"begun_seq) VALUES (%s,%s,%s,%s,%s,%s,%s,{_NEXT_SEQ})",
            (self.pg.ws, session, n, label, before, "open", at),
        )

    def set_turn_state(
        self, session: str, n: int, state: str, *, ended: float | None = None
    ) -> None:
        """Change a turn's state (open, done, undone, reverted); ``ended`` when it ends."""
        if ended is None:
            self.pg.run(
                "UPDATE takeback.turns SET state=%s WHERE ws=%s AND session=%s AND n=%s",
                (state, self.pg.ws, session, n),
            )
        else:
            self.pg.run(
                f"UPDATE takeback.turns SET state=%s, ended_at=%s, ended_seq={_NEXT_SEQ} "
                "WHERE ws=%s AND session=%s AND n=%s",
                (state, ended, self.pg.ws, session, n),
            )

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
    ) -> bool:
        """Keep a file's state before the turn's first write; return False if already kept.

        The same rules as the folder store's (:meth:`MetaStore.add_touch`).
        """
        when = time.time() if at is None else at
        key = (self.pg.ws, session, turn, os.fsencode(path))
        cur = self.pg.run(
            "INSERT INTO takeback.touches(ws, session, turn, path, state, tool_call_id, at, "
            "unconfirmed) VALUES (%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
            (*key, state, tool_call_id, when, int(unconfirmed)),
        )
        if cur.rowcount > 0:
            return True
        if unconfirmed:
            self.pg.run(
                "UPDATE takeback.touches SET unconfirmed=1 "
                "WHERE ws=%s AND session=%s AND turn=%s AND path=%s",
                key,
            )
        self.pg.run(
            "UPDATE takeback.touches SET state=%s, at=%s "
            "WHERE ws=%s AND session=%s AND turn=%s AND path=%s AND at>%s",
            (state, when, *key, when),
        )
        self.pg.run(
            "UPDATE takeback.touches SET tool_call_id=NULL "
            "WHERE ws=%s AND session=%s AND turn=%s AND path=%s "
            "AND tool_call_id IS DISTINCT FROM %s",
            (*key, tool_call_id),
        )
        return False

    def claimed_by_others(self, session: str, since: float) -> set[str]:
        """Return the paths other sessions claimed: touched since ``since``, or in an open turn."""
        rows = self.pg.run(
            "SELECT t.path FROM takeback.touches t JOIN takeback.turns u "
            "ON u.ws=t.ws AND u.session=t.session AND u.n=t.turn "
            "WHERE t.ws=%s AND t.session != %s AND (t.at >= %s OR u.state = 'open')",
            (self.pg.ws, session, since),
        )
        return {_path(r[0]) for r in rows}

    def touches(self, session: str, turn: int) -> dict[str, TouchRow]:
        """Return what a turn kept of each path it touched, by path."""
        rows = self.pg.run(
            "SELECT path, state, tool_call_id, unconfirmed FROM takeback.touches "
            "WHERE ws=%s AND session=%s AND turn=%s",
            (self.pg.ws, session, turn),
        )
        return {_path(r[0]): TouchRow(r[1], r[2], bool(r[3])) for r in rows}

    def set_changes(self, session: str, turn: int, rows: Iterable[ChangeRow]) -> None:
        """Replace a turn's change list."""
        self.pg.run(
            "DELETE FROM takeback.changes WHERE ws=%s AND session=%s AND turn=%s",
            (self.pg.ws, session, turn),
        )
        self.pg.many(
            "INSERT INTO takeback.changes(ws, session, turn, path, status, added, removed, "
            "before, after, sha256, undoable, approximate, unconfirmed) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            [
                (
                    self.pg.ws,
                    session,
                    turn,
                    os.fsencode(r.path),
                    r.status,
                    r.added,
                    r.removed,
                    r.before,
                    r.after,
                    r.sha256,
                    int(r.undoable),
                    int(r.approximate),
                    int(r.unconfirmed),
                )
                for r in rows
            ],
        )

    def change_rows(self, session: str, turn: int) -> list[ChangeRow]:
        """Return a turn's change list as stored (states encoded), in path order."""
        rows = self.pg.run(
            "SELECT path, status, added, removed, before, after, sha256, undoable, approximate, "
            "unconfirmed FROM takeback.changes WHERE ws=%s AND session=%s AND turn=%s "
            "ORDER BY path",
            (self.pg.ws, session, turn),
        )
        return [change_row(r) for r in rows]

    def changes(self, session: str, turn: int) -> list[Change]:
        """Return a turn's change list."""
        return changes_of(self.change_rows(session, turn))

    def add_op(
        self,
        session: str,
        kind: str,
        turns: list[int],
        pre: str | None,
        data: dict[str, Any],
        at: float,
    ) -> int:
        """Record an undo, redo, revert or unrevert (state ``active``); return its id."""
        row = self.pg.one(
            "INSERT INTO takeback.ops(ws, session, kind, turns, pre, data, state, created_at, "
            f"seq) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,{_NEXT_SEQ}) RETURNING id",
            (self.pg.ws, session, kind, json.dumps(turns), pre, json.dumps(data), "active", at),
        )
        return int(row[0])

    def ops(self, session: str, kind: str | None = None, state: str | None = None) -> list[OpRow]:
        """Return a session's ops (of one kind, in one state), newest first."""
        sql = (
            "SELECT id, kind, turns, pre, data, state FROM takeback.ops WHERE ws=%s AND session=%s"
        )
        args: list[Any] = [self.pg.ws, session]
        if kind is not None:
            sql += " AND kind=%s"
            args.append(kind)
        if state is not None:
            sql += " AND state=%s"
            args.append(state)
        sql += " ORDER BY id DESC"
        return [
            OpRow(int(r[0]), r[1], json.loads(r[2]), r[3], json.loads(r[4]), r[5])
            for r in self.pg.run(sql, args)
        ]

    def op_seqs(self, session: str) -> dict[int, int]:
        """Return the sequence number of each op of the session."""
        rows = self.pg.run(
            "SELECT id, seq FROM takeback.ops WHERE ws=%s AND session=%s",
            (self.pg.ws, session),
        )
        return {int(r[0]): int(r[1] or 0) for r in rows}

    def next_seq(self) -> int:
        """Hand out the next number of the store-wide sequence (snapshots, turns, ops)."""
        row = self.pg.one(f"SELECT {_NEXT_SEQ}", ())
        return int(row[0])

    def history_seq(self) -> int:
        """The sequence number of the history's last change: a turn begun or ended, an op."""
        row = self.pg.one(
            "SELECT GREATEST("
            "(SELECT MAX(GREATEST(begun_seq, COALESCE(ended_seq, 0))) FROM takeback.turns "
            "WHERE ws=%s), (SELECT MAX(seq) FROM takeback.ops WHERE ws=%s), 0)",
            (self.pg.ws, self.pg.ws),
        )
        return int(row[0] or 0)

    def seqs(self) -> Seqs:
        """Every snapshot's, turn's and op's sequence numbers (what gc orders by)."""
        ws = self.pg.ws
        snaps = {
            str(r[0]): int(r[1])
            for r in self.pg.run("SELECT id, seq FROM takeback.snapshots WHERE ws=%s", (ws,))
        }
        turns = {
            (str(r[0]), int(r[1])): (int(r[2] or 0), None if r[3] is None else int(r[3]))
            for r in self.pg.run(
                "SELECT session, n, begun_seq, ended_seq FROM takeback.turns WHERE ws=%s", (ws,)
            )
        }
        ops_ = {
            int(r[0]): int(r[1] or 0)
            for r in self.pg.run("SELECT id, seq FROM takeback.ops WHERE ws=%s", (ws,))
        }
        return Seqs(snaps, turns, ops_)

    def op_times(self, session: str) -> dict[int, float]:
        """Return when each op of the session was recorded."""
        rows = self.pg.run(
            "SELECT id, created_at FROM takeback.ops WHERE ws=%s AND session=%s",
            (self.pg.ws, session),
        )
        return {int(r[0]): float(r[1]) for r in rows}

    def update_op(self, op_id: int, turns: list[int], data: dict[str, Any]) -> None:
        """Change what an active op covers (a standing revert moved to another turn)."""
        self.pg.run(
            "UPDATE takeback.ops SET turns=%s, data=%s WHERE ws=%s AND id=%s",
            (json.dumps(turns), json.dumps(data), self.pg.ws, op_id),
        )

    def set_op_state(self, op_id: int, state: str) -> None:
        """Mark an op (active, redone, unreverted, final)."""
        self.pg.run(
            "UPDATE takeback.ops SET state=%s WHERE ws=%s AND id=%s", (state, self.pg.ws, op_id)
        )

    # -- gc, purge and fsck ----------------------------------------------------------

    def snapshot_rows(self) -> list[tuple[str, str, float, str, str | None]]:
        """Return every snapshot as (id, tree, created_at, kind, session), oldest first."""
        rows = self.pg.run(
            "SELECT id, tree, created_at, kind, session FROM takeback.snapshots "
            "WHERE ws=%s ORDER BY seq",
            (self.pg.ws,),
        )
        return [(str(r[0]), str(r[1]), float(r[2]), str(r[3]), r[4]) for r in rows]

    def all_turns(self) -> list[tuple[str, int, str | None, str | None, str, float]]:
        """Return every turn as (session, n, before, after, state, begun_at)."""
        rows = self.pg.run(
            "SELECT session, n, before, after, state, begun_at FROM takeback.turns "
            "WHERE ws=%s ORDER BY session, n",
            (self.pg.ws,),
        )
        return [(str(r[0]), int(r[1]), r[2], r[3], str(r[4]), float(r[5])) for r in rows]

    def all_steps(self) -> list[StepInfo]:
        """Return every step of every session."""
        rows = self.pg.run(
            f"SELECT {_STEP_COLS} FROM takeback.steps WHERE ws=%s ORDER BY session, n",
            (self.pg.ws,),
        )
        return [_step(r) for r in rows]

    def all_ops(self) -> list[tuple[OpRow, str, float]]:
        """Return every op with its session and when it was recorded."""
        rows = self.pg.run(
            "SELECT id, kind, turns, pre, data, state, session, created_at FROM takeback.ops "
            "WHERE ws=%s ORDER BY id",
            (self.pg.ws,),
        )
        return [
            (
                OpRow(int(r[0]), r[1], json.loads(r[2]), r[3], json.loads(r[4]), r[5]),
                str(r[6]),
                float(r[7]),
            )
            for r in rows
        ]

    def recorded_states(self) -> list[tuple[str, int, str | None]]:
        """Return (session, turn, state) of every state a touch or a change list keeps."""
        out: list[tuple[str, int, str | None]] = []
        for r in self.pg.run(
            "SELECT session, turn, state FROM takeback.touches WHERE ws=%s", (self.pg.ws,)
        ):
            out.append((str(r[0]), int(r[1]), r[2]))
        for r in self.pg.run(
            "SELECT session, turn, before, after FROM takeback.changes WHERE ws=%s",
            (self.pg.ws,),
        ):
            out.append((str(r[0]), int(r[1]), r[2]))
            out.append((str(r[0]), int(r[1]), r[3]))
        return out

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
        """Delete history rows in one transaction, referring rows first.

        The database checks every foreign key (a kept row naming a deleted snapshot
        fails the whole transaction). With ``objects_go`` the workspace's cache
        generation is raised in the same transaction, before any object is deleted, and
        this machine's cache (whose ids gc kept) is marked as made under the new one.

        Raises:
            StoreError: the transaction could not be committed (it is rolled back).
        """
        ws = self.pg.ws
        with self.tx():
            self.pg.many("DELETE FROM takeback.ops WHERE ws=%s AND id=%s", [(ws, i) for i in ops])
            self.pg.many(
                "DELETE FROM takeback.steps WHERE ws=%s AND session=%s AND n=%s",
                [(ws, s, n) for s, n in steps],
            )
            turn_keys = [(ws, s, n) for s, n in turns]
            for table in ("touches", "changes"):
                self.pg.many(
                    f"DELETE FROM takeback.{table} WHERE ws=%s AND session=%s AND turn=%s",
                    turn_keys,
                )
            self.pg.many(
                "DELETE FROM takeback.turns WHERE ws=%s AND session=%s AND n=%s", turn_keys
            )
            names = [(ws, s) for s in sessions]
            for table in ("ops", "steps", "touches", "changes", "turns", "sessions"):
                key = "name" if table == "sessions" else "session"
                self.pg.many(f"DELETE FROM takeback.{table} WHERE ws=%s AND {key}=%s", names)
            ids = list(snapshots)
            if ids:
                self.pg.run(
                    "DELETE FROM takeback.snapshots WHERE ws=%s AND id = ANY(%s)", (ws, ids)
                )
            cache = self._local()
            if scan_cache:
                cache.drop_scan_cache()
            if objects_go:
                row = self.pg.one(
                    "INSERT INTO takeback.meta(ws, key, value) VALUES (%s,%s,'1') "
                    "ON CONFLICT (ws, key) DO UPDATE SET "
                    "value=(takeback.meta.value::bigint + 1)::text RETURNING value",
                    (ws, GENERATION),
                )
                cache.set_meta(LOCAL_GENERATION, f"{self.store_id}/{row[0]}")
            if last_gc is not None:
                self.set_meta("gc.last", last_gc)

    # -- copying a history -----------------------------------------------------------

    def copy_rows(self, table: str) -> list[tuple[Any, ...]]:
        """Return every row of a table (``COPY_TABLES``' columns), in the order written."""
        cols = ", ".join(COPY_TABLES[table])
        order = _COPY_ORDER.get(table, ", ".join(COPY_TABLES[table][:3]))
        rows = self.pg.run(
            f"SELECT {cols} FROM takeback.{table} WHERE ws=%s ORDER BY {order}", (self.pg.ws,)
        )
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows]

    def add_copied_rows(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        """Insert rows :meth:`copy_rows` (of any store) returned, keeping their order."""
        cols = COPY_TABLES[table]
        marks = ",".join(["%s"] * (len(cols) + 1))
        self.pg.many(
            f"INSERT INTO takeback.{table}(ws, {', '.join(cols)}) VALUES ({marks})",
            [(self.pg.ws, *r) for r in rows],
        )


#: The store-wide sequence: the snapshots' own, from which turns and ops take their
#: numbers too (one order for all three, whatever the clock says).
_NEXT_SEQ = "nextval(pg_get_serial_sequence('takeback.snapshots', 'seq'))"

#: how a table's rows are read in the order they were written (else by their key)
_COPY_ORDER = {"meta": "key", "snapshots": "seq", "turns": "seq", "ops": "id"}
