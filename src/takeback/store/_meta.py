"""Store layer: the metadata database (snapshots, sessions, turns, steps, changes, caches).

One SQLite file in WAL mode, so an agent, its hooks and a person at the command line can
read and write it at once. Rows only ever point at objects that were committed before
them (blobs, then trees, then the snapshot row, then what refers to it).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..model import (
    Change,
    SessionInfo,
    SnapshotInfo,
    StepInfo,
    change_kind,
)
from ._copy import COPY_TABLES
from ._rows import ChangeRow, OpRow, Seqs, TouchRow, TurnRow
from ._sqlite import Tx, columns, damaged, db_path, tables

#: The version of both databases' tables. 1: a store from before it counted columns,
#: which may lack some of ``_ADDED_COLUMNS`` (and objects' delta columns); 2: has them all
#: but ``changes.approximate``; 3: has it too; 4: turns and ops have their sequence
#: numbers (``begun_seq``, ``ended_seq``, ``ops.seq``), and touches and changes say
#: whether a step whose end was never seen brought them (``unconfirmed``).
SCHEMA_VERSION = 4

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snapshots(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tree TEXT NOT NULL,
    created_at REAL NOT NULL,
    kind TEXT NOT NULL,
    session TEXT,
    turn INTEGER,
    step INTEGER,
    message TEXT NOT NULL DEFAULT '',
    files INTEGER NOT NULL,
    skipped TEXT NOT NULL DEFAULT '[]',
    skipped_count INTEGER NOT NULL DEFAULT 0,
    duration_ms INTEGER NOT NULL DEFAULT 0,
    unreadable TEXT NOT NULL DEFAULT '[]',
    unreadable_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS snapshots_session ON snapshots(session, seq);
CREATE TABLE IF NOT EXISTS sessions(
    name TEXT PRIMARY KEY,
    baseline TEXT NOT NULL REFERENCES snapshots(id),
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS steps(
    session TEXT NOT NULL REFERENCES sessions(name),
    n INTEGER NOT NULL,
    turn INTEGER,
    before TEXT REFERENCES snapshots(id),
    after TEXT REFERENCES snapshots(id),
    label TEXT NOT NULL DEFAULT '',
    exit_code INTEGER,
    command INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY(session, n)
);
CREATE TABLE IF NOT EXISTS turns(
    session TEXT NOT NULL REFERENCES sessions(name),
    n INTEGER NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    before TEXT REFERENCES snapshots(id),
    after TEXT REFERENCES snapshots(id),
    state TEXT NOT NULL,
    begun_at REAL NOT NULL,
    ended_at REAL,
    begun_seq INTEGER,
    ended_seq INTEGER,
    PRIMARY KEY(session, n)
);
CREATE TABLE IF NOT EXISTS touches(
    session TEXT NOT NULL,
    turn INTEGER NOT NULL,
    path TEXT NOT NULL,
    state TEXT,
    tool_call_id TEXT,
    at REAL NOT NULL DEFAULT 0,
    unconfirmed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY(session, turn, path)
);
CREATE TABLE IF NOT EXISTS changes(
    session TEXT NOT NULL,
    turn INTEGER NOT NULL,
    path TEXT NOT NULL,
    status TEXT NOT NULL,
    added INTEGER NOT NULL,
    removed INTEGER NOT NULL,
    before TEXT,
    after TEXT,
    sha256 TEXT,
    undoable INTEGER NOT NULL,
    approximate INTEGER NOT NULL DEFAULT 0,
    unconfirmed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY(session, turn, path)
);
CREATE TABLE IF NOT EXISTS ops(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    kind TEXT NOT NULL,
    turns TEXT NOT NULL,
    pre TEXT REFERENCES snapshots(id),
    data TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    seq INTEGER
);
CREATE TABLE IF NOT EXISTS dircache(dir BLOB PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS kv(key TEXT PRIMARY KEY, value BLOB NOT NULL);
"""

#: every table of the schema (an existing store must have them all)
_TABLES = (
    "meta",
    "snapshots",
    "sessions",
    "steps",
    "turns",
    "touches",
    "changes",
    "ops",
    "dircache",
    "kv",
)
#: columns added after the first release: (table, column, declaration)
_ADDED_COLUMNS = (
    ("touches", "at", "REAL NOT NULL DEFAULT 0"),
    ("steps", "command", "INTEGER NOT NULL DEFAULT 0"),
    ("snapshots", "unreadable", "TEXT NOT NULL DEFAULT '[]'"),
    ("snapshots", "unreadable_count", "INTEGER NOT NULL DEFAULT 0"),
    ("changes", "approximate", "INTEGER NOT NULL DEFAULT 0"),
    ("turns", "begun_seq", "INTEGER"),
    ("turns", "ended_seq", "INTEGER"),
    ("ops", "seq", "INTEGER"),
    ("touches", "unconfirmed", "INTEGER NOT NULL DEFAULT 0"),
    ("changes", "unconfirmed", "INTEGER NOT NULL DEFAULT 0"),
)

#: The store-wide sequence: the snapshots' own (``sqlite_sequence``), from which turns
#: and ops take their numbers too, so that one order holds for all three, whatever the
#: clock says. (The row is there once the first snapshot was written; before that, the
#: first number is 1.)
_NEXT_SEQ = "UPDATE sqlite_sequence SET seq = seq + 1 WHERE name='snapshots' RETURNING seq"

#: A store from before sequence numbers: each turn and op is given the number of the
#: snapshot taken just before it (its own, or the newest by time), the best order known.
_BACKFILL_SEQ = (
    "UPDATE turns SET begun_seq = COALESCE("
    "(SELECT seq FROM snapshots s WHERE s.id = turns.before), "
    "(SELECT MAX(seq) FROM snapshots s WHERE s.created_at <= turns.begun_at), 0) "
    "WHERE begun_seq IS NULL",
    "UPDATE turns SET ended_seq = COALESCE("
    "(SELECT MAX(seq) FROM snapshots s WHERE s.created_at <= turns.ended_at), 0) "
    "WHERE ended_seq IS NULL AND ended_at IS NOT NULL",
    "UPDATE ops SET seq = COALESCE("
    "(SELECT seq FROM snapshots s WHERE s.id = ops.pre), "
    "(SELECT MAX(seq) FROM snapshots s WHERE s.created_at <= ops.created_at), 0) "
    "WHERE seq IS NULL",
)

#: Opening a store: its version, and whether every table is there, in one query.
_OPEN_QUERY = (
    "SELECT (SELECT value FROM meta WHERE key='schema_version'), "
    "(SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ("
    + ", ".join(f"'{t}'" for t in _TABLES)
    + "))"
)

_SNAP_COLS = (
    "id, tree, created_at, kind, session, turn, step, message, files, skipped, "
    "skipped_count, duration_ms, unreadable, unreadable_count"
)


#: the largest integer SQLite stores; a step or turn number beyond it names no row
MAX_INT = 2**63 - 1


def _after(prefix: str) -> str:
    """Return the least string after every string that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _storable(n: int) -> bool:
    return -MAX_INT - 1 <= n <= MAX_INT


def _path(value: object) -> str:
    """A path as stored: its bytes (a name need not be UTF-8; SQLite text must be)."""
    return os.fsdecode(bytes(value)) if isinstance(value, bytes) else str(value)


def _step(r: tuple[Any, ...]) -> StepInfo:
    return StepInfo(r[0], r[1], r[2], r[3], r[4], r[5], r[6], command=bool(r[7]))


def _snap(row: tuple[Any, ...]) -> SnapshotInfo:
    return SnapshotInfo(
        id=row[0],
        tree=row[1],
        created_at=row[2],
        kind=row[3],
        session=row[4],
        turn=row[5],
        step=row[6],
        message=row[7],
        files=row[8],
        skipped=tuple(json.loads(row[9])),
        skipped_count=row[10],
        duration_ms=row[11],
        unreadable=tuple((str(p), str(r)) for p, r in json.loads(row[12])),
        unreadable_count=row[13],
    )


def change_row(r: Sequence[Any]) -> ChangeRow:
    """Type a ``changes`` row as both stores select it.

    Its columns: path, status, added, removed, before, after, sha256, undoable,
    approximate, unconfirmed.
    """
    return ChangeRow(
        _path(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]), bool(r[8]), bool(r[9])
    )


def changes_of(rows: Iterable[ChangeRow]) -> list[Change]:
    """A turn's change list from its rows."""
    return [
        Change(
            path=r.path,
            status=r.status,
            added=r.added,
            removed=r.removed,
            sha256=r.sha256,
            undoable=r.undoable,
            kind=change_kind(r.status, r.before, r.after),
            approximate=r.approximate,
            unconfirmed=r.unconfirmed,
        )
        for r in rows
    ]


#: Sets a cached value. A value that is there is updated in place: ``INSERT OR REPLACE``
#: would delete the row and insert it anew under a new rowid, which writes the page it
#: left, the page at the table's end and two pages of the key's index, where an update
#: writes the one page that holds it (the scan cache's shards and folder rows are
#: rewritten at every snapshot that changes something).
_SET_KV = (
    "INSERT INTO kv(key, value) VALUES (?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value"
)


class MetaStore:
    """Typed queries over the metadata database."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def init_schema(self) -> None:
        """Create the tables of a new store (idempotent: a creation cut short is finished)."""
        self.conn.executescript(_SCHEMA)
        self._add_columns(self._missing_columns())

    def check_schema(self) -> int:
        """Check an existing store's tables and return its schema version.

        One query when the store is whole: every hook call opens the store, so the
        tables are counted in the same query that reads the version. Nothing is created
        or changed: a table that is missing means the file is damaged (making it empty
        would read as a store without history). An older store is brought up to date
        by :meth:`upgrade`, which the caller runs.

        Raises:
            StoreCorruptError: a table or the schema version is missing.
        """
        try:
            version, present = self.conn.execute(_OPEN_QUERY).fetchone()
        except sqlite3.OperationalError:
            version, present = None, 0  # the meta table is gone: the check below says so
        if present == len(_TABLES) and isinstance(version, str) and version.isdigit():
            return int(version)
        path = db_path(self.conn)
        missing = sorted(set(_TABLES) - tables(self.conn))
        if missing:
            raise damaged(path, f"has lost its tables: {', '.join(missing)}")
        version = self.get_meta("schema_version")
        if version is None or not version.isdigit():
            raise damaged(path, "has no schema version")
        return int(version)

    def upgrade(self, *, record: bool) -> None:
        """Add the columns an older store lacks, and record the current schema version.

        One transaction: a store is either upgraded and says so, or left as it was (and
        upgraded at its next opening).

        Args:
            record: write the version (false for a store opened read-only, which is
                only checked: it can be read as long as no column is missing).

        Raises:
            StoreError: a column is missing and the store cannot be written.
        """
        missing = self._missing_columns()
        if not missing and not record:
            return
        with Tx(self.conn):
            self._add_columns(missing)
            if record:
                self.set_meta("schema_version", str(SCHEMA_VERSION))

    def _missing_columns(self) -> list[tuple[str, str, str]]:
        return [(t, c, d) for t, c, d in _ADDED_COLUMNS if c not in columns(self.conn, t)]

    def _add_columns(self, missing: Iterable[tuple[str, str, str]]) -> None:
        added = False
        for table, column, decl in missing:
            self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
            added = added or column.endswith("seq")
        if added:
            for sql in _BACKFILL_SEQ:
                self.conn.execute(sql)

    def next_seq(self) -> int:
        """Hand out the next number of the store-wide sequence (snapshots, turns, ops)."""
        row = self.conn.execute(_NEXT_SEQ).fetchone()
        if row is not None:
            return int(row[0])
        self.conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('snapshots', 1)")
        return 1

    def history_seq(self) -> int:
        """The sequence number of the history's last change: a turn begun or ended, an op.

        What take-backs decide from (which turn is last, what can be redone) changes only
        with one of these, so a plan made at one number still holds while it stays.
        """
        row = self.conn.execute(
            "SELECT MAX(COALESCE((SELECT MAX(begun_seq) FROM turns), 0), "
            "COALESCE((SELECT MAX(ended_seq) FROM turns), 0), "
            "COALESCE((SELECT MAX(seq) FROM ops), 0))"
        ).fetchone()
        return int(row[0] or 0)

    def tx(self) -> Tx:
        """Return a write transaction context."""
        return Tx(self.conn)

    # -- meta and kv -----------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """Return a store-level setting."""
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Set a store-level setting."""
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?,?)", (key, value))

    def swap_meta(self, key: str, old: str | None, value: str) -> bool:
        """Set a setting only if it is still ``old`` (None: unset); return whether it was.

        One conditional write in its own transaction: of several processes that read
        ``old`` and swap at once, one wins.
        """
        with Tx(self.conn) as c:
            if old is None:
                cur = c.execute(
                    "INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value)
                )
            else:
                cur = c.execute(
                    "UPDATE meta SET value=? WHERE key=? AND value=?", (value, key, old)
                )
            return cur.rowcount > 0

    def get_kv(self, key: str) -> bytes | None:
        """Return a cached value."""
        row = self.conn.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def set_kv(self, key: str, value: bytes) -> None:
        """Store a cached value."""
        self.conn.execute(_SET_KV, (key, value))

    def get_kv_prefix(self, prefix: str) -> list[tuple[str, bytes]]:
        """Return the cached values whose key starts with ``prefix``, in key order.

        They are read in one statement: one committed state.
        """
        rows = self.conn.execute(
            "SELECT key, value FROM kv WHERE key >= ? AND key < ? ORDER BY key",
            (prefix, _after(prefix)),
        )
        return [(str(k), bytes(v)) for k, v in rows]

    def set_kvs(self, rows: dict[str, bytes | None]) -> None:
        """Store (or, for None, delete) some cached values."""
        self.conn.executemany(_SET_KV, [(k, v) for k, v in rows.items() if v is not None])
        gone = [(k,) for k, v in rows.items() if v is None]
        self.conn.executemany("DELETE FROM kv WHERE key=?", gone)

    def drop_kv_except(self, keep: str, *, prefix: str) -> bool:
        """Delete the cached values under ``prefix``, but ``keep`` and those under it.

        Those under ``keep`` are the keys that start with ``keep + "/"``.

        Returns:
            Whether anything was deleted.
        """
        # Three ranges of the key's index around what is kept: nothing else is read.
        deleted = 0
        for low, high in ((prefix, keep), (keep + "\0", keep + "/"), (keep + "0", _after(prefix))):
            cur = self.conn.execute("DELETE FROM kv WHERE key >= ? AND key < ?", (low, high))
            deleted += cur.rowcount
        return deleted > 0

    # Folder names are kept as their bytes (os.fsencode): a name that is not UTF-8 cannot
    # be stored as SQLite text.

    def dircache_dirs(self) -> list[str]:
        """Return the folders that have a detailed stat cache row."""
        return [os.fsdecode(bytes(r[0])) for r in self.conn.execute("SELECT dir FROM dircache")]

    def get_dircache(self, dirs: Iterable[str]) -> dict[str, bytes]:
        """Return the detailed stat cache rows of some folders."""
        out: dict[str, bytes] = {}
        keys = [os.fsencode(d) for d in dirs]
        for i in range(0, len(keys), 500):  # SQLite takes so many parameters at least
            part = keys[i : i + 500]
            marks = ",".join("?" * len(part))
            rows = self.conn.execute(f"SELECT dir, data FROM dircache WHERE dir IN ({marks})", part)
            for d, data in rows:
                out[os.fsdecode(bytes(d))] = bytes(data)
        return out

    def put_dircache(self, rows: dict[str, bytes | None]) -> None:
        """Replace (or, for None, drop) detailed stat cache rows."""
        self.conn.executemany(
            "INSERT INTO dircache(dir, data) VALUES (?,?)"
            " ON CONFLICT(dir) DO UPDATE SET data=excluded.data",
            [(os.fsencode(d), v) for d, v in rows.items() if v is not None],
        )
        self.conn.executemany(
            "DELETE FROM dircache WHERE dir=?",
            [(os.fsencode(d),) for d, v in rows.items() if v is None],
        )

    # -- snapshots -------------------------------------------------------------------

    def add_snapshot(self, s: SnapshotInfo) -> None:
        """Insert a snapshot row (its tree must already be committed)."""
        self.conn.execute(
            f"INSERT INTO snapshots({_SNAP_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
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
        row = self.conn.execute(f"SELECT {_SNAP_COLS} FROM snapshots WHERE id=?", (sid,)).fetchone()
        return None if row is None else _snap(row)

    def snapshot_ids_with_prefix(self, prefix: str) -> list[str]:
        """Return the ids that start with ``prefix`` (lower-case hex)."""
        hi = prefix + "g"
        rows = self.conn.execute(
            "SELECT id FROM snapshots WHERE id >= ? AND id < ? LIMIT 10", (prefix, hi)
        )
        return [r[0] for r in rows]

    def latest_snapshot(self, session: str | None = None) -> SnapshotInfo | None:
        """Return the newest snapshot (of a session, or of the whole store)."""
        if session is None:
            row = self.conn.execute(
                f"SELECT {_SNAP_COLS} FROM snapshots ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        else:
            row = self.conn.execute(
                f"SELECT {_SNAP_COLS} FROM snapshots WHERE session=? ORDER BY seq DESC LIMIT 1",
                (session,),
            ).fetchone()
        return None if row is None else _snap(row)

    def snapshots(self, session: str | None = None, limit: int | None = None) -> list[SnapshotInfo]:
        """Return snapshots newest first."""
        sql = f"SELECT {_SNAP_COLS} FROM snapshots"
        args: list[Any] = []
        if session is not None:
            sql += " WHERE session=?"
            args.append(session)
        sql += " ORDER BY seq DESC"
        if limit is not None and _storable(limit):  # beyond it, there is no limit at all
            sql += " LIMIT ?"
            args.append(limit)
        return [_snap(r) for r in self.conn.execute(sql, args)]

    # -- sessions and steps ----------------------------------------------------------

    def session(self, name: str) -> SessionInfo | None:
        """Return a session by name."""
        row = self.conn.execute(
            "SELECT name, baseline, created_at FROM sessions WHERE name=?", (name,)
        ).fetchone()
        return None if row is None else SessionInfo(*row)

    def sessions(self) -> list[SessionInfo]:
        """Return every session, newest first."""
        rows = self.conn.execute(
            "SELECT name, baseline, created_at FROM sessions ORDER BY created_at DESC"
        )
        return [SessionInfo(*r) for r in rows]

    def add_session(self, s: SessionInfo) -> None:
        """Insert a session row (its baseline snapshot must exist)."""
        self.conn.execute(
            "INSERT INTO sessions(name, baseline, created_at) VALUES (?,?,?)",
            (s.name, s.baseline, s.created_at),
        )

    def next_step(self, session: str) -> int:
        """Return the number the next step of a session gets."""
        row = self.conn.execute(
            "SELECT COALESCE(MAX(n), 0) FROM steps WHERE session=?", (session,)
        ).fetchone()
        return int(row[0]) + 1

    def add_step(self, st: StepInfo) -> None:
        """Insert a step row."""
        self.conn.execute(
            "INSERT INTO steps(session, n, turn, before, after, label, exit_code, command) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (
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
        for (data,) in self.conn.execute(
            "SELECT data FROM ops WHERE created_at > ? ORDER BY id", (at,)
        ):
            wrote = json.loads(data).get("wrote")
            if isinstance(wrote, dict):
                out.update(wrote)
        return out

    def last_recording_session(self) -> str | None:
        """Return the session of the newest snapshot that has one."""
        row = self.conn.execute(
            "SELECT session FROM snapshots WHERE session IS NOT NULL ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        return None if row is None else str(row[0])

    def last_ended_turn_session(self) -> str | None:
        """Return the session of the turn that ended last (None: no turn has ended)."""
        row = self.conn.execute(
            "SELECT session FROM turns WHERE ended_seq IS NOT NULL "
            "ORDER BY ended_seq DESC, rowid DESC LIMIT 1"
        ).fetchone()
        return None if row is None else str(row[0])

    def set_step_start(self, session: str, n: int, *, before: str, turn: int | None) -> None:
        """Record a step's snapshot before it, and the turn it belongs to."""
        self.conn.execute(
            "UPDATE steps SET before=?, turn=? WHERE session=? AND n=?", (before, turn, session, n)
        )

    def finish_step(self, session: str, n: int, after: str | None, exit_code: int | None) -> None:
        """Record the snapshot after a step and the command's status."""
        self.conn.execute(
            "UPDATE steps SET after=?, exit_code=? WHERE session=? AND n=?",
            (after, exit_code, session, n),
        )

    def step(self, session: str, n: int) -> StepInfo | None:
        """Return one step (None when there is none, or ``n`` is beyond what SQLite stores)."""
        if not _storable(n):
            return None
        row = self.conn.execute(
            "SELECT session, n, turn, before, after, label, exit_code, command FROM steps "
            "WHERE session=? AND n=?",
            (session, n),
        ).fetchone()
        return None if row is None else _step(row)

    def steps(self, session: str) -> list[StepInfo]:
        """Return a session's steps in order."""
        rows = self.conn.execute(
            "SELECT session, n, turn, before, after, label, exit_code, command FROM steps "
            "WHERE session=? ORDER BY n",
            (session,),
        )
        return [_step(r) for r in rows]

    # -- turns, touches, changes, ops ------------------------------------------------

    def turn_row(self, session: str, n: int) -> TurnRow | None:
        """Return one turn (None when there is none)."""
        if not _storable(n):
            return None
        row = self.conn.execute(
            "SELECT n, label, before, after, state FROM turns WHERE session=? AND n=?",
            (session, n),
        ).fetchone()
        return None if row is None else TurnRow(*row)

    def turn_rows(self, session: str) -> list[TurnRow]:
        """Return every turn of a session, in order."""
        return [
            TurnRow(*r)
            for r in self.conn.execute(
                "SELECT n, label, before, after, state FROM turns WHERE session=? ORDER BY n",
                (session,),
            )
        ]

    def turn_end_seqs(self, session: str) -> dict[int, int]:
        """Return the sequence number at which each ended turn of the session ended."""
        return {
            int(r[0]): int(r[1])
            for r in self.conn.execute(
                "SELECT n, ended_seq FROM turns WHERE session=? AND ended_seq IS NOT NULL",
                (session,),
            )
        }

    def turn_end_times(self, session: str) -> dict[int, float]:
        """Return when each ended turn of the session ended."""
        return {
            int(r[0]): float(r[1])
            for r in self.conn.execute(
                "SELECT n, ended_at FROM turns WHERE session=? AND ended_at IS NOT NULL",
                (session,),
            )
        }

    def add_turn(self, session: str, n: int, label: str, before: str | None, at: float) -> None:
        """Open a turn (it takes the store-wide sequence's next number)."""
        self.conn.execute(
            "INSERT INTO turns(session, n, label, before, state, begun_at, begun_seq) "
            "VALUES (?,?,?,?,?,?,?)",
            (session, n, label, before, "open", at, self.next_seq()),
        )

    def set_turn_state(
        self, session: str, n: int, state: str, *, ended: float | None = None
    ) -> None:
        """Change a turn's state (open, done, undone, reverted); ``ended`` when it ends."""
        if ended is None:
            self.conn.execute(
                "UPDATE turns SET state=? WHERE session=? AND n=?", (state, session, n)
            )
        else:
            self.conn.execute(
                "UPDATE turns SET state=?, ended_at=?, ended_seq=? WHERE session=? AND n=?",
                (state, ended, self.next_seq(), session, n),
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

        A path already kept keeps its state, unless this one was seen earlier (``at``, by
        default now): the earliest state is the one before the turn. If this touch comes
        from another tool call (or from an unknown one), the change is no longer one
        call's and its id is dropped. ``unconfirmed`` (a step whose end was never seen
        changed the path) stays once said.
        """
        when = time.time() if at is None else at
        key = (session, turn, os.fsencode(path))
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO touches(session, turn, path, state, tool_call_id, at, "
            "unconfirmed) VALUES (?,?,?,?,?,?,?)",
            (*key, state, tool_call_id, when, int(unconfirmed)),
        )
        if cur.rowcount > 0:
            return True
        if unconfirmed:
            self.conn.execute(
                "UPDATE touches SET unconfirmed=1 WHERE session=? AND turn=? AND path=?", key
            )
        self.conn.execute(
            "UPDATE touches SET state=?, at=? WHERE session=? AND turn=? AND path=? AND at>?",
            (state, when, *key, when),
        )
        self.conn.execute(
            "UPDATE touches SET tool_call_id=NULL WHERE session=? AND turn=? AND path=? "
            "AND tool_call_id IS NOT ?",
            (session, turn, os.fsencode(path), tool_call_id),
        )
        return False

    def claimed_by_others(self, session: str, since: float) -> set[str]:
        """Return the paths other sessions claimed: touched since ``since``, or in an open turn.

        A path another conversation's file tool touched (or its command changed) is
        that conversation's change, not something a command of ``session`` did.
        """
        rows = self.conn.execute(
            "SELECT t.path FROM touches t JOIN turns u ON u.session=t.session AND u.n=t.turn "
            "WHERE t.session != ? AND (t.at >= ? OR u.state = 'open')",
            (session, since),
        )
        return {_path(r[0]) for r in rows}

    def touches(self, session: str, turn: int) -> dict[str, TouchRow]:
        """Return what a turn kept of each path it touched, by path."""
        rows = self.conn.execute(
            "SELECT path, state, tool_call_id, unconfirmed FROM touches WHERE session=? AND turn=?",
            (session, turn),
        )
        return {_path(r[0]): TouchRow(r[1], r[2], bool(r[3])) for r in rows}

    def set_changes(self, session: str, turn: int, rows: Iterable[ChangeRow]) -> None:
        """Replace a turn's change list."""
        self.conn.execute("DELETE FROM changes WHERE session=? AND turn=?", (session, turn))
        self.conn.executemany(
            "INSERT INTO changes(session, turn, path, status, added, removed, before, after, "
            "sha256, undoable, approximate, unconfirmed) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
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
        rows = self.conn.execute(
            "SELECT path, status, added, removed, before, after, sha256, undoable, approximate, "
            "unconfirmed FROM changes "
            "WHERE session=? AND turn=? ORDER BY path",
            (session, turn),
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
        cur = self.conn.execute(
            "INSERT INTO ops(session, kind, turns, pre, data, state, created_at, seq) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (
                session,
                kind,
                json.dumps(turns),
                pre,
                json.dumps(data),
                "active",
                at,
                self.next_seq(),
            ),
        )
        return int(cur.lastrowid or 0)

    def ops(self, session: str, kind: str | None = None, state: str | None = None) -> list[OpRow]:
        """Return a session's ops (of one kind, in one state), newest first."""
        sql = "SELECT id, kind, turns, pre, data, state FROM ops WHERE session=?"
        args: list[Any] = [session]
        if kind is not None:
            sql += " AND kind=?"
            args.append(kind)
        if state is not None:
            sql += " AND state=?"
            args.append(state)
        sql += " ORDER BY id DESC"
        return [
            OpRow(r[0], r[1], json.loads(r[2]), r[3], json.loads(r[4]), r[5])
            for r in self.conn.execute(sql, args)
        ]

    def op_seqs(self, session: str) -> dict[int, int]:
        """Return the sequence number of each op of the session."""
        return {
            int(r[0]): int(r[1] or 0)
            for r in self.conn.execute("SELECT id, seq FROM ops WHERE session=?", (session,))
        }

    def op_times(self, session: str) -> dict[int, float]:
        """Return when each op of the session was recorded."""
        return {
            int(r[0]): float(r[1])
            for r in self.conn.execute("SELECT id, created_at FROM ops WHERE session=?", (session,))
        }

    def update_op(self, op_id: int, turns: list[int], data: dict[str, Any]) -> None:
        """Change what an active op covers (a standing revert moved to another turn)."""
        self.conn.execute(
            "UPDATE ops SET turns=?, data=? WHERE id=?",
            (json.dumps(turns), json.dumps(data), op_id),
        )

    def set_op_state(self, op_id: int, state: str) -> None:
        """Mark an op (active, redone, unreverted, final)."""
        self.conn.execute("UPDATE ops SET state=? WHERE id=?", (state, op_id))

    # -- copying a history -----------------------------------------------------------

    def copy_rows(self, table: str) -> list[tuple[Any, ...]]:
        """Return every row of a table (``COPY_TABLES``' columns), in the order written."""
        cols = ", ".join(COPY_TABLES[table])
        return [tuple(r) for r in self.conn.execute(f"SELECT {cols} FROM {table} ORDER BY rowid")]

    def add_copied_rows(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        """Insert rows :meth:`copy_rows` (of any store) returned, keeping their order."""
        cols = COPY_TABLES[table]
        marks = ",".join("?" * len(cols))
        self.conn.executemany(f"INSERT INTO {table}({', '.join(cols)}) VALUES ({marks})", rows)

    # -- gc, purge and fsck ----------------------------------------------------------
    # The whole history in a few queries, and deletions in the order that never leaves a
    # row naming one that is gone: what refers first, then what it refers to.

    def snapshot_rows(self) -> list[tuple[str, str, float, str, str | None]]:
        """Return every snapshot as (id, tree, created_at, kind, session), oldest first."""
        return [
            (str(r[0]), str(r[1]), float(r[2]), str(r[3]), r[4])
            for r in self.conn.execute(
                "SELECT id, tree, created_at, kind, session FROM snapshots ORDER BY seq"
            )
        ]

    def all_turns(self) -> list[tuple[str, int, str | None, str | None, str, float]]:
        """Return every turn as (session, n, before, after, state, begun_at)."""
        return [
            (str(r[0]), int(r[1]), r[2], r[3], str(r[4]), float(r[5]))
            for r in self.conn.execute(
                "SELECT session, n, before, after, state, begun_at FROM turns ORDER BY session, n"
            )
        ]

    def seqs(self) -> Seqs:
        """Every snapshot's, turn's and op's sequence numbers (what gc orders by)."""
        snaps = {str(r[0]): int(r[1]) for r in self.conn.execute("SELECT id, seq FROM snapshots")}
        turns = {
            (str(r[0]), int(r[1])): (int(r[2] or 0), None if r[3] is None else int(r[3]))
            for r in self.conn.execute("SELECT session, n, begun_seq, ended_seq FROM turns")
        }
        ops_ = {int(r[0]): int(r[1] or 0) for r in self.conn.execute("SELECT id, seq FROM ops")}
        return Seqs(snaps, turns, ops_)

    def all_steps(self) -> list[StepInfo]:
        """Return every step of every session."""
        rows = self.conn.execute(
            "SELECT session, n, turn, before, after, label, exit_code, command FROM steps "
            "ORDER BY session, n"
        )
        return [_step(r) for r in rows]

    def all_ops(self) -> list[tuple[OpRow, str, float]]:
        """Return every op with its session and when it was recorded."""
        return [
            (OpRow(r[0], r[1], json.loads(r[2]), r[3], json.loads(r[4]), r[5]), str(r[6]), r[7])
            for r in self.conn.execute(
                "SELECT id, kind, turns, pre, data, state, session, created_at FROM ops"
            )
        ]

    def recorded_states(self) -> list[tuple[str, int, str | None]]:
        """Return (session, turn, state) of every state a touch or a change list keeps."""
        out: list[tuple[str, int, str | None]] = []
        for r in self.conn.execute("SELECT session, turn, state FROM touches"):
            out.append((str(r[0]), int(r[1]), r[2]))
        for r in self.conn.execute("SELECT session, turn, before, after FROM changes"):
            out.append((str(r[0]), int(r[1]), r[2]))
            out.append((str(r[0]), int(r[1]), r[3]))
        return out

    def dircache_rows(self) -> list[bytes]:
        """Return the scan cache's detailed rows (they name objects a scan reuses)."""
        return [bytes(r[0]) for r in self.conn.execute("SELECT data FROM dircache")]

    def drop_history_tx(self, *, objects_go: bool = False, **rows: Any) -> None:
        """Delete history rows in one transaction of their own (see :meth:`drop_history`).

        ``objects_go`` asks nothing more here: a folder store's one scan cache is this
        machine's, whose ids gc keeps.

        The foreign keys are not checked in it: the caller (gc) has kept every row that
        a kept row names, and each check of a deleted snapshot would read every turn and
        step (their snapshot columns have no index). ``fsck`` checks the result.

        Raises:
            StoreError: the transaction could not be written (it is rolled back).
        """
        self.conn.execute("PRAGMA foreign_keys=OFF")
        try:
            with Tx(self.conn):
                self.drop_history(**rows)
        finally:
            self.conn.execute("PRAGMA foreign_keys=ON")

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
        c = self.conn
        c.executemany("DELETE FROM ops WHERE id=?", [(i,) for i in ops])
        c.executemany("DELETE FROM steps WHERE session=? AND n=?", list(steps))
        turn_keys = list(turns)
        for table in ("touches", "changes"):
            c.executemany(f"DELETE FROM {table} WHERE session=? AND turn=?", turn_keys)
        c.executemany("DELETE FROM turns WHERE session=? AND n=?", turn_keys)
        names = [(s,) for s in sessions]
        for table in ("ops", "steps", "touches", "changes", "turns", "sessions"):
            key = "name" if table == "sessions" else "session"
            c.executemany(f"DELETE FROM {table} WHERE {key}=?", names)
        c.executemany("DELETE FROM snapshots WHERE id=?", [(i,) for i in snapshots])
        if scan_cache:
            self.drop_scan_cache()
        if last_gc is not None:
            self.set_meta("gc.last", last_gc)

    def drop_scan_cache(self) -> None:
        """Forget the scan cache (the caller's transaction): the next scan reads every file."""
        self.conn.execute("DELETE FROM kv WHERE substr(key, 1, 5) = 'dirs-'")
        self.conn.execute("DELETE FROM dircache")
