"""Store layer: the connections a long-lived process (the watching service) keeps open
between the calls it runs, and that the next opening of the same store takes.

Each test checks what another process or the next call would see: that gc's checkpoint
can still empty the write-ahead log, that a store made anew is read anew, that no lock
is left behind, and that nothing stays open once the process lets them go.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from takeback import Workspace
from takeback.errors import StoreCorruptError
from takeback.store import FolderStore, HeldDatabases, hold_databases

from .conftest import CLI


def _open(ws_dir: Path, store_dir: Path) -> FolderStore:
    return FolderStore.open(str(store_dir), str(ws_dir), create=False)


def _snapshot(ws_dir: Path, store_dir: Path, text: str) -> str:
    (ws_dir / "f.txt").write_text(text)
    ws = Workspace(ws_dir, store=store_dir)
    try:
        return ws.snapshot().id
    finally:
        ws.close()


@pytest.fixture
def held(ws_dir: Path, store_dir: Path) -> Iterator[HeldDatabases]:
    _snapshot(ws_dir, store_dir, "one\n")
    databases = hold_databases(str(store_dir))
    try:
        yield databases
    finally:
        databases.release()


def _checkpoint(db: Path) -> int:
    """Checkpoint ``db`` whole from a connection of its own; return SQLite's busy flag."""
    conn = sqlite3.connect(db, timeout=0.5)
    try:
        busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return int(busy)
    finally:
        conn.close()


def test_the_next_opening_takes_the_connections_the_last_one_closed(
    ws_dir: Path, store_dir: Path, held: HeldDatabases
) -> None:
    store = _open(ws_dir, store_dir)
    meta, objects = store.meta.conn, store.objects.conn
    store.close()
    again = _open(ws_dir, store_dir)
    try:
        assert again.meta.conn is meta and again.objects.conn is objects
        assert len(again.meta.snapshots()) == 1
    finally:
        again.close()


@pytest.mark.quick
def test_a_cursor_left_part_way_does_not_keep_the_log_from_a_checkpoint(
    ws_dir: Path, store_dir: Path, held: HeldDatabases, tb: CLI
) -> None:
    """A statement stepped once and never finished holds a read transaction: kept idle
    so, it would keep every later write in the log, and gc's checkpoint from emptying it."""
    store = _open(ws_dir, store_dir)
    left = store.meta.conn.execute("SELECT key FROM kv")  # the scan cache: many rows
    assert left.fetchone() is not None  # one row read, the statement still open
    store.close()  # kept idle for the next opening
    (ws_dir / "f.txt").write_text("two\n")
    tb("snapshot")  # another process: more pages in the log
    assert _checkpoint(store_dir / "meta.db") == 0
    assert (store_dir / "meta.db-wal").stat().st_size == 0
    assert left is not None  # the cursor lived through all of it


def test_a_store_made_anew_at_the_same_path_is_read_anew(
    ws_dir: Path, store_dir: Path, held: HeldDatabases
) -> None:
    store = _open(ws_dir, store_dir)
    old = store.meta.conn
    store.close()  # its connections kept, to the files about to be removed
    shutil.rmtree(store_dir)
    new_id = _snapshot(ws_dir, store_dir, "another history\n")
    fresh = _open(ws_dir, store_dir)
    try:
        assert fresh.meta.conn is not old
        assert [s.id for s in fresh.meta.snapshots()] == [new_id]
    finally:
        fresh.close()


def test_a_connection_closed_inside_a_transaction_is_closed_not_kept(
    ws_dir: Path, store_dir: Path, held: HeldDatabases
) -> None:
    store = _open(ws_dir, store_dir)
    conn = store.meta.conn
    conn.execute("BEGIN IMMEDIATE")
    store.close()
    other = sqlite3.connect(store_dir / "meta.db", timeout=0.5)
    try:
        other.execute("BEGIN IMMEDIATE")  # no write lock was left behind
        other.execute("ROLLBACK")
    finally:
        other.close()
    again = _open(ws_dir, store_dir)
    try:
        assert again.meta.conn is not conn
    finally:
        again.close()


def test_once_let_go_nothing_stays_open(ws_dir: Path, store_dir: Path) -> None:
    """The last connection to close removes the write-ahead log: once the process lets
    its kept connections go, none is left."""
    _snapshot(ws_dir, store_dir, "one\n")
    databases = hold_databases(str(store_dir))
    store = _open(ws_dir, store_dir)
    store.close()
    _snapshot(ws_dir, store_dir, "two\n")
    assert (store_dir / "meta.db-wal").exists()
    databases.release()
    assert not list(store_dir.glob("*.db-wal")), sorted(p.name for p in store_dir.iterdir())


def test_a_call_leaves_copying_the_log_into_the_database_to_idle_time(
    ws_dir: Path, store_dir: Path, held: HeldDatabases
) -> None:
    """Copying the write-ahead log back into the database (a checkpoint: every page
    written again, then synced) took 15-40 ms of one call in ten in the service. With the
    databases held, a call's commit leaves it; the service does it when idle."""
    main = store_dir / "objects.db"
    before = main.stat().st_size
    store = _open(ws_dir, store_dir)
    for _ in range(6):  # about 1,500 pages: SQLite's own threshold is 1,000
        store.objects.put("blob", os.urandom(1 << 20))
    store.objects.flush()
    store.close()
    assert main.stat().st_size == before  # committed to the log only
    reader = _open(ws_dir, store_dir)  # what another opening sees: all of it
    try:
        assert reader.objects.conn.execute("SELECT count(*) FROM objects").fetchone()[0] >= 7
    finally:
        reader.close()
    assert held.checkpoint() >= 1500
    assert main.stat().st_size >= before + 6 * (1 << 20)


def test_the_objects_kept_connection_keeps_the_upper_pages_of_a_million_objects(
    ws_dir: Path, store_dir: Path, held: HeldDatabases
) -> None:
    """A lookup by id goes down the id index and the table from their upper pages, some
    10 MB with a million objects: the kept objects connection has room for them from one
    call to the next (SQLite's own cache, 2,000 KiB, kept none); the metadata's keeps
    SQLite's own, and a connection this process does not keep is as SQLite makes it."""
    store = _open(ws_dir, store_dir)
    try:
        (objects,) = store.objects.conn.execute("PRAGMA cache_size").fetchone()
        (meta,) = store.meta.conn.execute("PRAGMA cache_size").fetchone()
    finally:
        store.close()
    assert (objects, meta) == (-16384, -2000)
    held.release()
    store = _open(ws_dir, store_dir)
    try:
        assert store.objects.conn.execute("PRAGMA cache_size").fetchone() == (-2000,)
    finally:
        store.close()


def _object_ids(store_dir: Path) -> int:
    conn = sqlite3.connect(store_dir / "objects.db")
    try:
        return int(conn.execute("SELECT count(*) FROM objects").fetchone()[0])
    finally:
        conn.close()


def test_the_objects_id_index_is_read_ahead_once_a_part_at_a_time(
    ws_dir: Path, store_dir: Path, held: HeldDatabases, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service reads the objects' id index ahead in its idle time, so that a new
    object's lookup finds its page in memory: every id once, in parts that each end
    when the time given is spent (here none: one part per step), and then no more."""
    for n in range(6):
        _snapshot(ws_dir, store_dir, f"version {n}\n")
    stored = _object_ids(store_dir)
    assert stored >= 12  # each snapshot: a blob and a tree
    monkeypatch.setattr("takeback.store._store._IDS_PER_READ", 5)
    steps = 0
    while held.ids_ahead:
        held.read_ids_ahead(0.0)
        steps += 1
        assert steps <= stored
    assert held.ids_read == stored
    assert steps == -(-stored // 5) + (stored % 5 == 0)  # a last, empty part says it is done
    held.read_ids_ahead(1.0)
    assert held.ids_read == stored


def test_a_damaged_id_index_ends_reading_ahead_and_nothing_else(
    ws_dir: Path, store_dir: Path, held: HeldDatabases
) -> None:
    """Reading the id index ahead only saves time later: a page of it that SQLite finds
    damaged ends it quietly, and the store says what is wrong when a command reads it."""
    conn = sqlite3.connect(store_dir / "objects.db")
    try:
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE type='index' AND tbl_name='objects'"
        ).fetchone()
        (page,) = conn.execute("PRAGMA page_size").fetchone()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()
    with open(store_dir / "objects.db", "r+b") as f:
        f.seek((root - 1) * page)
        f.write(b"\xff" * page)
    held.read_ids_ahead(1.0)
    assert not held.ids_ahead and held.ids_read == 0
    with pytest.raises(StoreCorruptError):
        _open(ws_dir, store_dir).objects.has("0" * 64)
