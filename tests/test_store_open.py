"""Store layer: what opening a store costs, and the one-time upgrade of an older store.

Every hook call opens the store, so its opening is counted in SQL statements: each
connection the store makes is traced (``set_trace_callback``) from the moment SQLite
opens it, pragmas included.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from takeback import Workspace
from takeback.store import FolderStore
from takeback.store._meta import SCHEMA_VERSION

#: (database file name, statement) in the order SQLite ran them
Trace = list[tuple[str, str]]


@pytest.fixture
def trace(monkeypatch: pytest.MonkeyPatch) -> Iterator[Trace]:
    """Trace every statement of every SQLite connection opened while the test runs."""
    seen: Trace = []
    real = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = real(database, *args, **kwargs)
        name = os.path.basename(str(database).split("?")[0])
        conn.set_trace_callback(lambda sql: seen.append((name, sql)))
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    yield seen


def _recorded(ws_dir: Path, store_dir: Path) -> str:
    """Make a store with a session, a turn and a snapshot; return the workspace's root."""
    (ws_dir / "a.txt").write_text("one\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        session = ws.session("s")
        with session.turn("edit") as turn:
            turn.touch("a.txt")
            (ws_dir / "a.txt").write_text("two\n")
        ws.snapshot()
        return ws.root


def _by_file(trace: Trace) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, sql in trace:
        out.setdefault(name, []).append(sql)
    return out


def _version(store_dir: Path) -> str:
    conn = sqlite3.connect(store_dir / "meta.db")
    try:
        (value,) = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    finally:
        conn.close()
    return str(value)


def test_opening_a_current_store_is_one_query_per_database(
    ws_dir: Path, store_dir: Path, trace: Trace
) -> None:
    root = _recorded(ws_dir, store_dir)
    trace.clear()
    store = FolderStore.open(str(store_dir), root, create=False)
    try:
        opened = _by_file(trace)
        # meta.db: the schema version and the table count, in one query; objects.db:
        # its one table. No pragma: WAL is kept in the file, and what writes need is
        # set at the first write.
        assert len(opened["meta.db"]) == 1, opened
        assert "schema_version" in opened["meta.db"][0]
        assert len(opened["objects.db"]) == 1, opened
        assert len(trace) == 2
        # What the store reads then works.
        assert [t.label for t in store.meta.turn_rows("s")] == ["edit"]
    finally:
        store.close()


def test_the_first_write_of_an_opened_store_is_durable_and_checks_references(
    ws_dir: Path, store_dir: Path, trace: Trace
) -> None:
    root = _recorded(ws_dir, store_dir)
    store = FolderStore.open(str(store_dir), root, create=False)
    try:
        trace.clear()
        with store.meta.tx():
            store.meta.set_kv("probe", b"x")
        with store.meta.tx():
            store.meta.set_kv("probe", b"y")
        pragmas = [sql for _name, sql in trace if sql.startswith("PRAGMA")]
        assert pragmas == ["PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"]  # once
        assert store.meta.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert store.meta.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        (mode,) = store.meta.conn.execute("PRAGMA journal_mode").fetchone()
        assert mode == "wal"
    finally:
        store.close()


def _make_old(store_dir: Path) -> None:
    """Turn a store into one an earlier takeback made: version 1, columns missing."""
    conn = sqlite3.connect(store_dir / "meta.db")
    conn.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    conn.execute("ALTER TABLE snapshots DROP COLUMN unreadable_count")
    conn.execute("ALTER TABLE touches DROP COLUMN at")
    conn.execute("ALTER TABLE changes DROP COLUMN approximate")
    conn.execute("ALTER TABLE turns DROP COLUMN begun_seq")
    conn.execute("ALTER TABLE turns DROP COLUMN ended_seq")
    conn.execute("ALTER TABLE ops DROP COLUMN seq")
    conn.execute("ALTER TABLE touches DROP COLUMN unconfirmed")
    conn.execute("ALTER TABLE changes DROP COLUMN unconfirmed")
    conn.commit()
    conn.close()
    conn = sqlite3.connect(store_dir / "objects.db")
    conn.execute("ALTER TABLE objects DROP COLUMN depth")
    conn.execute("ALTER TABLE objects DROP COLUMN base")
    conn.commit()
    conn.close()


def _columns(db: Path, table: str) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}
    finally:
        conn.close()


def test_an_older_store_is_upgraded_once_then_opens_in_one_query(
    ws_dir: Path, store_dir: Path, trace: Trace
) -> None:
    root = _recorded(ws_dir, store_dir)
    _make_old(store_dir)
    assert "unreadable_count" not in _columns(store_dir / "meta.db", "snapshots")

    trace.clear()
    FolderStore.open(str(store_dir), root, create=False).close()
    upgrade = _by_file(trace)
    assert any("ALTER TABLE snapshots ADD COLUMN unreadable_count" in s for s in upgrade["meta.db"])
    assert any("ALTER TABLE objects ADD COLUMN base" in s for s in upgrade["objects.db"])
    assert _version(store_dir) == str(SCHEMA_VERSION) == "4"
    assert "unreadable_count" in _columns(store_dir / "meta.db", "snapshots")
    # Turns get the sequence numbers of the snapshots around them (version 4).
    conn = sqlite3.connect(store_dir / "meta.db")
    try:
        (begun, ended, before_seq), *_ = conn.execute(
            "SELECT t.begun_seq, t.ended_seq, s.seq FROM turns t "
            "JOIN snapshots s ON s.id = t.before"
        )
    finally:
        conn.close()
    assert begun == before_seq and ended is not None and ended >= begun
    assert "approximate" in _columns(store_dir / "meta.db", "changes")
    assert "at" in _columns(store_dir / "meta.db", "touches")
    assert {"base", "depth"} <= _columns(store_dir / "objects.db", "objects")

    trace.clear()
    store = FolderStore.open(str(store_dir), root, create=False)
    try:
        assert [name for name, _sql in trace] == ["objects.db", "meta.db"]
        assert not any("ALTER" in sql for _name, sql in trace)
    finally:
        store.close()
    # The history survived the upgrade, and the store records again.
    with Workspace(ws_dir, store=store_dir) as ws:
        assert [t.label for t in ws.session("s").turns()] == ["edit"]
        assert len(ws.log()) == 3
        (ws_dir / "a.txt").write_text("three\n")
        ws.snapshot()
        assert (ws_dir / "a.txt").read_text() == "three\n"


def test_an_older_store_that_lacks_nothing_is_only_marked(
    ws_dir: Path, store_dir: Path, trace: Trace
) -> None:
    root = _recorded(ws_dir, store_dir)
    conn = sqlite3.connect(store_dir / "meta.db")
    conn.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    trace.clear()
    FolderStore.open(str(store_dir), root, create=False).close()
    assert not any("ALTER" in sql for _name, sql in trace)
    assert _version(store_dir) == "4"
