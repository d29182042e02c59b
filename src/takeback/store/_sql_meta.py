"""Store layer: the history's rows in SQL, written once for every SQL store.

:class:`SqlMeta` holds the queries of the ``Meta`` seam that both stores ask the same way:
snapshots, sessions, steps, turns, touches, change lists, ops, the history read whole
for gc and deleted in part, and a history's copy. A store gives its dialect
(``_sql.Dialect``: how a template's words are written there) and the few things that
truly differ (the subclasses ``_meta.MetaStore``, SQLite, and ``_pg_meta.PgMeta``,
PostgreSQL): how a statement is sent, the transaction (and its locks), the schema, the
store-wide sequence, settings, and the scan's cache.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from typing import Any

from ..model import Change, SessionInfo, SnapshotInfo, StepInfo
from ._copy import COPY_TABLES
from ._rows import ChangeRow, OpRow, Seqs, TouchRow, TurnRow
from ._sql import (
    MAX_INT,
    SqlBase,
    change_row,
    changes_of,
    op_of,
    snapshot_of,
    step_of,
    storable,
    stored_path,
)

#: a snapshot row's columns, as both stores select them (``snapshot_of``): every column
#: but its place in the store-wide sequence, which each store gives it
SNAP_COLS = tuple(c for c in COPY_TABLES["snapshots"] if c != "seq")
_SNAP = ", ".join(SNAP_COLS)
#: a step row's columns (``step_of``)
STEP_COLS = COPY_TABLES["steps"]
_STEP = ", ".join(STEP_COLS)
#: the columns an insert of a touch or a change row names (by name: in any order)
_TOUCH_COLS = COPY_TABLES["touches"]
_CHANGE_COLS = COPY_TABLES["changes"]
_CHANGES = (
    "SELECT path, status, added, removed, before, after, sha256, undoable, approximate, "
    "unconfirmed FROM {changes} WHERE {ws}session=:session AND turn=:turn ORDER BY path"
)
_OP = "id, kind, turns, pre, data, state"


class SqlMeta(SqlBase):
    """The history's queries, written once; a store's subclass sends them in its dialect."""

    # -- settings --------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """Return a store-level setting."""
        row = self._one("SELECT value FROM {meta} WHERE {ws}key=:key", key=key)
        return None if row is None else str(row[0])

    def swap_meta(self, key: str, old: str | None, value: str) -> bool:
        """Set a setting only if it is still ``old`` (None: unset); return whether it was.

        One conditional write: of several processes that read ``old`` and swap at once,
        one wins.
        """
        with self._one_write():
            if old is None:
                sql = self.dialect.insert("meta", ("key", "value"), ignore=True)
                cur = self._run(sql, {"key": key, "value": value})
            else:
                cur = self._q(
                    "UPDATE {meta} SET value=:value WHERE {ws}key=:key AND value=:old",
                    key=key,
                    value=value,
                    old=old,
                )
            return bool(cur.rowcount > 0)

    # -- snapshots -------------------------------------------------------------------

    def add_snapshot(self, s: SnapshotInfo) -> None:
        """Insert a snapshot row (its tree must already be committed)."""
        row = {c: getattr(s, c) for c in SNAP_COLS}
        row["skipped"] = json.dumps(list(s.skipped))
        row["unreadable"] = json.dumps([list(u) for u in s.unreadable])
        self._run(self.dialect.insert("snapshots", SNAP_COLS), row)

    def snapshot(self, sid: str) -> SnapshotInfo | None:
        """Return one snapshot by full id."""
        row = self._one(f"SELECT {_SNAP} FROM {{snapshots}} WHERE {{ws}}id=:id", id=sid)
        return None if row is None else snapshot_of(row)

    def latest_snapshot(self, session: str | None = None) -> SnapshotInfo | None:
        """Return the newest snapshot (of a session, or of the whole store)."""
        if session is None:
            row = self._one(
                f"SELECT {_SNAP} FROM {{snapshots}}{{where_ws}} ORDER BY seq DESC LIMIT 1"
            )
        else:
            row = self._one(
                f"SELECT {_SNAP} FROM {{snapshots}} WHERE {{ws}}session=:session "
                "ORDER BY seq DESC LIMIT 1",
                session=session,
            )
        return None if row is None else snapshot_of(row)

    def snapshots(self, session: str | None = None, limit: int | None = None) -> list[SnapshotInfo]:
        """Return snapshots newest first.

        ``limit``: at most so many (below 0, or beyond what both stores keep: all).
        """
        sql = f"SELECT {_SNAP} FROM {{snapshots}}"
        params: dict[str, Any] = {}
        if session is not None:
            sql += " WHERE {ws}session=:session"
            params["session"] = session
        else:
            sql += "{where_ws}"
        sql += " ORDER BY seq DESC"
        if limit is not None and 0 <= limit <= MAX_INT:
            sql += " LIMIT :limit"
            params["limit"] = limit
        return [snapshot_of(r) for r in self._rows(sql, **params)]

    def last_recording_session(self) -> str | None:
        """Return the session of the newest snapshot that has one."""
        row = self._one(
            "SELECT session FROM {snapshots} WHERE {ws}session IS NOT NULL "
            "ORDER BY seq DESC LIMIT 1"
        )
        return None if row is None else str(row[0])

    # -- sessions and steps ----------------------------------------------------------

    def session(self, name: str) -> SessionInfo | None:
        """Return a session by name."""
        row = self._one(
            "SELECT name, baseline, created_at FROM {sessions} WHERE {ws}name=:name", name=name
        )
        return None if row is None else SessionInfo(*row)

    def sessions(self) -> list[SessionInfo]:
        """Return every session, newest first."""
        rows = self._rows(
            "SELECT name, baseline, created_at FROM {sessions}{where_ws} ORDER BY created_at DESC"
        )
        return [SessionInfo(*r) for r in rows]

    def add_session(self, s: SessionInfo) -> None:
        """Insert a session row (its baseline snapshot must exist)."""
        sql = self.dialect.insert("sessions", ("name", "baseline", "created_at"))
        self._run(sql, {"name": s.name, "baseline": s.baseline, "created_at": s.created_at})

    def next_step(self, session: str) -> int:
        """Return the number the next step of a session gets."""
        row = self._one(
            "SELECT COALESCE(MAX(n), 0) FROM {steps} WHERE {ws}session=:session", session=session
        )
        return int(row[0]) + 1

    def add_step(self, st: StepInfo) -> None:
        """Insert a step row."""
        row = {c: getattr(st, c) for c in STEP_COLS}
        row["command"] = int(st.command)
        self._run(self.dialect.insert("steps", STEP_COLS), row)

    def set_step_start(self, session: str, n: int, *, before: str, turn: int | None) -> None:
        """Record a step's snapshot before it, and the turn it belongs to."""
        self._q(
            "UPDATE {steps} SET before=:before, turn=:turn WHERE {ws}session=:session AND n=:n",
            before=before,
            turn=turn,
            session=session,
            n=n,
        )

    def finish_step(self, session: str, n: int, after: str | None, exit_code: int | None) -> None:
        """Record the snapshot after a step and the command's status."""
        self._q(
            "UPDATE {steps} SET after=:after, exit_code=:exit_code "
            "WHERE {ws}session=:session AND n=:n",
            after=after,
            exit_code=exit_code,
            session=session,
            n=n,
        )

    def step(self, session: str, n: int) -> StepInfo | None:
        """Return one step (None when there is none, or ``n`` is beyond what is stored)."""
        if not storable(n):
            return None
        row = self._one(
            f"SELECT {_STEP} FROM {{steps}} WHERE {{ws}}session=:session AND n=:n",
            session=session,
            n=n,
        )
        return None if row is None else step_of(row)

    def steps(self, session: str) -> list[StepInfo]:
        """Return a session's steps in order."""
        rows = self._rows(
            f"SELECT {_STEP} FROM {{steps}} WHERE {{ws}}session=:session ORDER BY n",
            session=session,
        )
        return [step_of(r) for r in rows]

    def written_since(self, at: float) -> dict[str, str | None]:
        """What take-backs of any session wrote after ``at``: path -> state (newest wins)."""
        out: dict[str, str | None] = {}
        for (data,) in self._rows(
            "SELECT data FROM {ops} WHERE {ws}created_at > :at ORDER BY id", at=at
        ):
            wrote = json.loads(data).get("wrote")
            if isinstance(wrote, dict):
                out.update(wrote)
        return out

    # -- turns -----------------------------------------------------------------------

    def turn_row(self, session: str, n: int) -> TurnRow | None:
        """Return one turn (None when there is none)."""
        if not storable(n):
            return None
        row = self._one(
            "SELECT n, label, before, after, state FROM {turns} "
            "WHERE {ws}session=:session AND n=:n",
            session=session,
            n=n,
        )
        return None if row is None else TurnRow(*row)

    def turn_rows(self, session: str) -> list[TurnRow]:
        """Return every turn of a session, in order."""
        rows = self._rows(
            "SELECT n, label, before, after, state FROM {turns} "
            "WHERE {ws}session=:session ORDER BY n",
            session=session,
        )
        return [TurnRow(*r) for r in rows]

    def turn_end_seqs(self, session: str) -> dict[int, int]:
        """Return the sequence number at which each ended turn of the session ended."""
        rows = self._rows(
            "SELECT n, ended_seq FROM {turns} WHERE {ws}session=:session AND ended_seq IS NOT NULL",
            session=session,
        )
        return {int(r[0]): int(r[1]) for r in rows}

    def turn_end_times(self, session: str) -> dict[int, float]:
        """Return when each ended turn of the session ended."""
        rows = self._rows(
            "SELECT n, ended_at FROM {turns} WHERE {ws}session=:session AND ended_at IS NOT NULL",
            session=session,
        )
        return {int(r[0]): float(r[1]) for r in rows}

    def last_ended_turn_session(self) -> str | None:
        """Return the session of the turn that ended last (None: no turn has ended)."""
        row = self._one(
            "SELECT session FROM {turns} WHERE {ws}ended_seq IS NOT NULL "
            "ORDER BY ended_seq DESC, {written} DESC LIMIT 1"
        )
        return None if row is None else str(row[0])

    def add_turn(self, session: str, n: int, label: str, before: str | None, at: float) -> None:
        """Open a turn (it takes the store-wide sequence's next number)."""
        sql = self.dialect.insert(
            "turns", ("session", "n", "label", "before", "state", "begun_at"), seq="begun_seq"
        )
        row: dict[str, Any] = {"session": session, "n": n, "label": label, "before": before}
        self._run(sql, self._seq(row | {"state": "open", "begun_at": at}))

    def set_turn_state(
        self, session: str, n: int, state: str, *, ended: float | None = None
    ) -> None:
        """Change a turn's state (open, done, undone, reverted); ``ended`` when it ends."""
        if ended is None:
            self._q(
                "UPDATE {turns} SET state=:state WHERE {ws}session=:session AND n=:n",
                state=state,
                session=session,
                n=n,
            )
            return
        sql = self.dialect.sql(
            "UPDATE {turns} SET state=:state, ended_at=:ended, ended_seq={next_seq} "
            "WHERE {ws}session=:session AND n=:n"
        )
        self._run(sql, self._seq({"state": state, "ended": ended, "session": session, "n": n}))

    # -- touches and change lists ----------------------------------------------------

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

        A path already kept keeps its state, unless this one was seen earlier (``at``, by
        default now): the earliest state is the one before the turn. If this touch comes
        from another tool call (or from an unknown one), the change is no longer one
        call's and its id is dropped. ``unconfirmed`` (a step whose end was never seen
        changed the path) stays once said.
        """
        when = time.time() if at is None else at
        key = {"session": session, "turn": turn, "path": os.fsencode(path)}
        row = {**key, "state": state, "tool_call_id": tool_call_id, "at": when}
        row["unconfirmed"] = int(unconfirmed)
        cur = self._run(self.dialect.insert("touches", _TOUCH_COLS, ignore=True), row)
        if cur.rowcount > 0:
            return True
        where = "WHERE {ws}session=:session AND turn=:turn AND path=:path"
        if unconfirmed:
            self._q("UPDATE {touches} SET unconfirmed=1 " + where, **key)
        self._q(
            "UPDATE {touches} SET state=:state, at=:at " + where + " AND at>:at",
            state=state,
            at=when,
            **key,
        )
        self._q(
            "UPDATE {touches} SET tool_call_id=NULL "
            + where
            + " AND tool_call_id {distinct} :tool_call_id",
            tool_call_id=tool_call_id,
            **key,
        )
        return False

    def claimed_by_others(self, session: str, since: float) -> set[str]:
        """Return the paths other sessions claimed: touched since ``since``, or in an open turn.

        A path another conversation's file tool touched (or its command changed) is
        that conversation's change, not something a command of ``session`` did.
        """
        rows = self._rows(
            "SELECT t.path FROM {touches} t JOIN {turns} u "
            "ON {ws_ut}u.session=t.session AND u.n=t.turn "
            "WHERE {ws_t}t.session != :session AND (t.at >= :since OR u.state = 'open')",
            session=session,
            since=since,
        )
        return {stored_path(r[0]) for r in rows}

    def touches(self, session: str, turn: int) -> dict[str, TouchRow]:
        """Return what a turn kept of each path it touched, by path."""
        rows = self._rows(
            "SELECT path, state, tool_call_id, unconfirmed FROM {touches} "
            "WHERE {ws}session=:session AND turn=:turn",
            session=session,
            turn=turn,
        )
        return {stored_path(r[0]): TouchRow(r[1], r[2], bool(r[3])) for r in rows}

    def set_changes(self, session: str, turn: int, rows: Iterable[ChangeRow]) -> None:
        """Replace a turn's change list."""
        self._q(
            "DELETE FROM {changes} WHERE {ws}session=:session AND turn=:turn",
            session=session,
            turn=turn,
        )
        self._many(
            self.dialect.insert("changes", _CHANGE_COLS),
            [
                {
                    "session": session,
                    "turn": turn,
                    "path": os.fsencode(r.path),
                    "status": r.status,
                    "added": r.added,
                    "removed": r.removed,
                    "before": r.before,
                    "after": r.after,
                    "sha256": r.sha256,
                    "undoable": int(r.undoable),
                    "approximate": int(r.approximate),
                    "unconfirmed": int(r.unconfirmed),
                }
                for r in rows
            ],
        )

    def change_rows(self, session: str, turn: int) -> list[ChangeRow]:
        """Return a turn's change list as stored (states encoded), in path order."""
        return [change_row(r) for r in self._rows(_CHANGES, session=session, turn=turn)]

    def changes(self, session: str, turn: int) -> list[Change]:
        """Return a turn's change list."""
        return changes_of(self.change_rows(session, turn))

    # -- ops -------------------------------------------------------------------------

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
        sql = self.dialect.insert(
            "ops",
            ("session", "kind", "turns", "pre", "data", "state", "created_at"),
            seq="seq",
            returning="id",
        )
        row: dict[str, Any] = {"session": session, "kind": kind, "pre": pre, "created_at": at}
        row |= {"turns": json.dumps(turns), "data": json.dumps(data), "state": "active"}
        return int(self._run(sql, self._seq(row)).fetchone()[0])

    def ops(self, session: str, kind: str | None = None, state: str | None = None) -> list[OpRow]:
        """Return a session's ops (of one kind, in one state), newest first."""
        sql = f"SELECT {_OP} FROM {{ops}} WHERE {{ws}}session=:session"
        params: dict[str, Any] = {"session": session}
        if kind is not None:
            sql += " AND kind=:kind"
            params["kind"] = kind
        if state is not None:
            sql += " AND state=:state"
            params["state"] = state
        return [op_of(r) for r in self._rows(sql + " ORDER BY id DESC", **params)]

    def op_seqs(self, session: str) -> dict[int, int]:
        """Return the sequence number of each op of the session."""
        rows = self._rows("SELECT id, seq FROM {ops} WHERE {ws}session=:session", session=session)
        return {int(r[0]): int(r[1] or 0) for r in rows}

    def op_times(self, session: str) -> dict[int, float]:
        """Return when each op of the session was recorded."""
        rows = self._rows(
            "SELECT id, created_at FROM {ops} WHERE {ws}session=:session", session=session
        )
        return {int(r[0]): float(r[1]) for r in rows}

    def update_op(self, op_id: int, turns: list[int], data: dict[str, Any]) -> None:
        """Change what an active op covers (a standing revert moved to another turn)."""
        self._q(
            "UPDATE {ops} SET turns=:turns, data=:data WHERE {ws}id=:id",
            turns=json.dumps(turns),
            data=json.dumps(data),
            id=op_id,
        )

    def set_op_state(self, op_id: int, state: str) -> None:
        """Mark an op (active, redone, unreverted, final)."""
        self._q("UPDATE {ops} SET state=:state WHERE {ws}id=:id", state=state, id=op_id)

    # -- gc, purge and fsck ----------------------------------------------------------
    # The whole history in a few queries, and deletions in the order that never leaves a
    # row naming one that is gone: what refers first, then what it refers to.

    def snapshot_rows(self) -> list[tuple[str, str, float, str, str | None]]:
        """Return every snapshot as (id, tree, created_at, kind, session), oldest first."""
        rows = self._rows(
            "SELECT id, tree, created_at, kind, session FROM {snapshots}{where_ws} ORDER BY seq"
        )
        return [(str(r[0]), str(r[1]), float(r[2]), str(r[3]), r[4]) for r in rows]

    def all_turns(self) -> list[tuple[str, int, str | None, str | None, str, float]]:
        """Return every turn as (session, n, before, after, state, begun_at)."""
        rows = self._rows(
            "SELECT session, n, before, after, state, begun_at FROM {turns}{where_ws} "
            "ORDER BY session, n"
        )
        return [(str(r[0]), int(r[1]), r[2], r[3], str(r[4]), float(r[5])) for r in rows]

    def seqs(self) -> Seqs:
        """Every snapshot's, turn's and op's sequence numbers (what gc orders by)."""
        snaps = {
            str(r[0]): int(r[1]) for r in self._rows("SELECT id, seq FROM {snapshots}{where_ws}")
        }
        turns = {
            (str(r[0]), int(r[1])): (int(r[2] or 0), None if r[3] is None else int(r[3]))
            for r in self._rows("SELECT session, n, begun_seq, ended_seq FROM {turns}{where_ws}")
        }
        ops_ = {
            int(r[0]): int(r[1] or 0) for r in self._rows("SELECT id, seq FROM {ops}{where_ws}")
        }
        return Seqs(snaps, turns, ops_)

    def all_steps(self) -> list[StepInfo]:
        """Return every step of every session."""
        rows = self._rows(f"SELECT {_STEP} FROM {{steps}}{{where_ws}} ORDER BY session, n")
        return [step_of(r) for r in rows]

    def all_ops(self) -> list[tuple[OpRow, str, float]]:
        """Return every op with its session and when it was recorded, in order."""
        rows = self._rows(f"SELECT {_OP}, session, created_at FROM {{ops}}{{where_ws}} ORDER BY id")
        return [(op_of(r), str(r[6]), float(r[7])) for r in rows]

    def recorded_states(self) -> list[tuple[str, int, str | None]]:
        """Return (session, turn, state) of every state a touch or a change list keeps."""
        out: list[tuple[str, int, str | None]] = []
        for r in self._rows("SELECT session, turn, state FROM {touches}{where_ws}"):
            out.append((str(r[0]), int(r[1]), r[2]))
        for r in self._rows("SELECT session, turn, before, after FROM {changes}{where_ws}"):
            out.append((str(r[0]), int(r[1]), r[2]))
            out.append((str(r[0]), int(r[1]), r[3]))
        return out

    def drop_history(
        self,
        *,
        turns: Iterable[tuple[str, int]] = (),
        steps: Iterable[tuple[str, int]] = (),
        ops: Iterable[int] = (),
        sessions: Iterable[str] = (),
        snapshots: Iterable[str] = (),
        scan_cache: bool = False,
        last_gc: str | None = None,
    ) -> None:
        """Delete history rows (the caller's transaction), referring rows first.

        A turn goes with its touches and change list; a session with everything of it.
        ``scan_cache``: forget the scan cache too; ``last_gc``: record when gc ran.
        """
        sql = self.dialect.sql
        self._many(sql("DELETE FROM {ops} WHERE {ws}id=:id"), [{"id": i} for i in ops])
        self._many(
            sql("DELETE FROM {steps} WHERE {ws}session=:session AND n=:n"),
            [{"session": s, "n": n} for s, n in steps],
        )
        keys = [{"session": s, "n": n} for s, n in turns]
        for table in ("touches", "changes"):
            self._many(
                sql(f"DELETE FROM {{{table}}} WHERE {{ws}}session=:session AND turn=:n"), keys
            )
        self._many(sql("DELETE FROM {turns} WHERE {ws}session=:session AND n=:n"), keys)
        names = [{"session": s} for s in sessions]
        for table in ("ops", "steps", "touches", "changes", "turns", "sessions"):
            key = "name" if table == "sessions" else "session"
            self._many(sql(f"DELETE FROM {{{table}}} WHERE {{ws}}{key}=:session"), names)
        self._delete_snapshots(list(snapshots))
        if scan_cache:
            self.drop_scan_cache()
        if last_gc is not None:
            self.set_meta("gc.last", last_gc)

    def _delete_snapshots(self, ids: list[str]) -> None:
        self._many(
            self.dialect.sql("DELETE FROM {snapshots} WHERE {ws}id=:id"), [{"id": i} for i in ids]
        )

    # -- copying a history -----------------------------------------------------------

    def copy_rows(self, table: str) -> list[tuple[Any, ...]]:
        """Return every row of a table (``COPY_TABLES``' columns), in the order written."""
        cols = ", ".join(COPY_TABLES[table])
        rows = self._rows(
            f"SELECT {cols} FROM {{{table}}}{{where_ws}} ORDER BY {self._copy_order(table)}"
        )
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows]

    def add_copied_rows(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        """Insert rows :meth:`copy_rows` (of any store) returned, keeping their order."""
        cols = COPY_TABLES[table]
        self._many(
            self.dialect.insert(table, cols), [dict(zip(cols, r, strict=True)) for r in rows]
        )
