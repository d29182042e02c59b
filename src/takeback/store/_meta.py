"""Store layer: the folder store's metadata database, SQLite's dialect of the history.

One SQLite file in WAL mode, so an agent, its hooks and a person at the command line can
read and write it at once. Rows only ever point at objects that were committed before
them (blobs, then trees, then the snapshot row, then what refers to it). The history's
queries are :class:`~._sql_meta.SqlMeta`'s, shared with the PostgreSQL store; here are
SQLite's words for them, the schema and its upgrades, the store-wide sequence, the
transaction (``BEGIN IMMEDIATE``: one writer at a time), and the scan's cache
(``kv``, ``dircache``), which the PostgreSQL store also keeps in such a file.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from typing import Any

from ._sql import SQLITE
from ._sql_meta import SqlMeta
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


def _after(prefix: str) -> str:
    """Return the least string after every string that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


#: Sets a cached value. A value that is there is updated in place: ``INSERT OR REPLACE``
#: would delete the row and insert it anew under a new rowid, which writes the page it
#: left, the page at the table's end and two pages of the key's index, where an update
#: writes the one page that holds it (the scan cache's shards and folder rows are
#: rewritten at every snapshot that changes something).
_SET_KV = (
    "INSERT INTO kv(key, value) VALUES (?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value"
)


class MetaStore(SqlMeta):
    """The history's rows in one SQLite database, and the scan's cache."""

    dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _run(self, sql: str, params: dict[str, Any]) -> Any:
        return self.conn.execute(sql, params)

    def _many(self, sql: str, rows: list[dict[str, Any]]) -> None:
        self.conn.executemany(sql, rows)

    def tx(self) -> Tx:
        """Return a write transaction context (re-entrant, see :class:`~._sqlite.Tx`)."""
        return Tx(self.conn)

    def _one_write(self) -> Tx:
        return Tx(self.conn)

    def _copy_order(self, table: str) -> str:
        return "rowid"

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

    def set_meta(self, key: str, value: str) -> None:
        """Set a store-level setting."""
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?,?)", (key, value))

    def snapshot_ids_with_prefix(self, prefix: str) -> list[str]:
        """Return the ids that start with ``prefix`` (lower-case hex)."""
        hi = prefix + "g"
        rows = self.conn.execute(
            "SELECT id FROM snapshots WHERE id >= ? AND id < ? LIMIT 10", (prefix, hi)
        )
        return [r[0] for r in rows]

    # -- the scan's cache -------------------------------------------------------------

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

    def dircache_rows(self) -> list[bytes]:
        """Return the scan cache's detailed rows (they name objects a scan reuses)."""
        return [bytes(r[0]) for r in self.conn.execute("SELECT data FROM dircache")]

    def drop_scan_cache(self) -> None:
        """Forget the scan cache (the caller's transaction): the next scan reads every file."""
        self.conn.execute("DELETE FROM kv WHERE substr(key, 1, 5) = 'dirs-'")
        self.conn.execute("DELETE FROM dircache")

    # -- gc ------------------------------------------------------------------------

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
