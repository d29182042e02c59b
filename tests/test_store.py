"""Store layer: objects are checked on read, the store refuses what it cannot trust."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from takeback.errors import (
    RootMismatchError,
    StoreCorruptError,
    StoreMissingError,
    StoreVersionError,
)
from takeback.store import FolderStore


def test_objects_round_trip_and_are_named_by_their_sha256(tmp_path: Path) -> None:
    store = FolderStore.open(str(tmp_path / "s"), "/root-a", create=True)
    data = b"hello\n" * 1000
    oid = store.objects.put("blob", data)
    assert oid == hashlib.sha256(data).hexdigest()
    store.objects.flush()
    assert store.objects.get(oid) == data
    assert store.objects.put("blob", data) == oid  # written once
    (size,) = store.objects.conn.execute("SELECT length(data) FROM objects").fetchone()
    assert size < len(data) // 10  # compressed
    store.close()


def test_a_tampered_object_fails_its_check(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = FolderStore.open(str(path), "/r", create=True)
    oid = store.objects.put("blob", b"original")
    store.close()
    conn = sqlite3.connect(path / "objects.db")
    conn.execute("UPDATE objects SET data=? WHERE oid=?", (b"not zstd at all", oid))
    conn.commit()
    conn.close()
    store = FolderStore.open(str(path), "/r", create=False)
    with pytest.raises(StoreCorruptError, match="damaged"):
        store.objects.get(oid)
    with pytest.raises(StoreCorruptError, match="missing"):
        store.objects.get("0" * 64)
    store.close()


def test_missing_newer_and_foreign_stores_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with pytest.raises(StoreMissingError):
        FolderStore.open(str(path), "/r", create=False)
    FolderStore.open(str(path), "/r", create=True).close()
    with pytest.raises(RootMismatchError):
        FolderStore.open(str(path), "/other", create=False)
    marker = path / "store.json"
    info = json.loads(marker.read_text())
    info["format"] = 99
    marker.write_text(json.dumps(info))
    with pytest.raises(StoreVersionError):
        FolderStore.open(str(path), "/r", create=False)
    marker.write_text("{not json")
    with pytest.raises(StoreCorruptError):
        FolderStore.open(str(path), "/r", create=False)


def test_a_store_without_its_databases_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "s"
    FolderStore.open(str(path), "/r", create=True).close()
    (path / "objects.db").unlink()
    with pytest.raises(StoreCorruptError, match="objects.db is missing"):
        FolderStore.open(str(path), "/r", create=False)


def test_store_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = FolderStore.open(str(path), "/r", create=True)
    store.objects.put("blob", b"x")
    store.objects.flush()
    with store.lock(exclusive=True):
        with store.lock(exclusive=False):  # re-entrant: a snapshot inside a restore
            pass
    store.log_event({"event": "x"})
    store.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for p in path.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p.name


def test_a_new_version_is_stored_as_a_small_delta_and_reads_back_exactly(tmp_path: Path) -> None:
    import random

    from takeback.store._objects import MAX_DEPTH

    store = FolderStore.open(str(tmp_path / "s"), "/r", create=True)
    rng = random.Random(5)
    text = "".join(f"line {rng.random()}\n" for _ in range(400)).encode()
    ids = [store.objects.put("blob", text)]
    versions = [text]
    for i in range(MAX_DEPTH + 3):  # longer than a chain may be
        text = text.replace(b"line", b"LINE", 1) + b"edit %d\n" % i
        versions.append(text)
        ids.append(store.objects.put("blob", text, base=ids[-1]))
    store.close()
    store = FolderStore.open(str(tmp_path / "s"), "/r", create=False)
    for oid, data in zip(ids, versions, strict=True):
        assert store.objects.get(oid) == data
    rows = dict(store.objects.conn.execute("SELECT oid, length(data) FROM objects"))
    assert rows[ids[1]] < rows[ids[0]] // 20  # a delta, not a copy
    depths = [d for (d,) in store.objects.conn.execute("SELECT depth FROM objects")]
    assert max(depths) == MAX_DEPTH and 0 in depths[1:]  # the chain was cut and restarted
    store.close()


def test_a_chain_over_committed_bases_stays_within_its_depth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each version put by a store opened afresh, with nothing kept in memory: every
    base is read back from its row, depth and bytes in one query."""
    import random

    from takeback.store import _objects
    from takeback.store._objects import MAX_DEPTH

    monkeypatch.setattr(_objects, "_RECENT", {})
    rng = random.Random(7)
    text = "".join(f"row {rng.random()}\n" for _ in range(300)).encode()
    ids: list[str] = []
    versions: list[bytes] = []
    for i in range(MAX_DEPTH + 4):
        _objects._RECENT.clear()
        store = FolderStore.open(str(tmp_path / "s"), "/r", create=not ids)
        ids.append(store.objects.put("blob", text, base=ids[-1] if ids else None))
        versions.append(text)
        store.close()
        text = text.replace(b"row", b"ROW", 1) + b"edit %d\n" % i
    _objects._RECENT.clear()
    store = FolderStore.open(str(tmp_path / "s"), "/r", create=False)
    try:
        for oid, data in zip(ids, versions, strict=True):
            assert store.objects.get(oid) == data
        depth = dict(store.objects.conn.execute("SELECT oid, depth FROM objects"))
        assert [depth[o] for o in ids] == [*range(MAX_DEPTH + 1), 0, 1, 2]
    finally:
        store.close()


@pytest.mark.parametrize("made", ["right", "wrong", "none"])
def test_a_base_made_by_the_caller_is_used_only_if_it_hashes_to_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: str
) -> None:
    """A scan makes a folder's last tree from its cache: with the right bytes, the base's
    row is not read back; with bytes that are not the base's (or none), it is. Either
    way the new version is a delta of the base and reads back exactly."""
    from takeback.store import _objects

    monkeypatch.setattr(_objects, "_RECENT", {})
    base_text = b"".join(b"entry %d\n" % i for i in range(400))
    new_text = base_text.replace(b"entry 7\n", b"entry seven\n")
    path = str(tmp_path / "s")
    store = FolderStore.open(path, "/r", create=True)
    base = store.objects.put("tree", base_text)
    store.close()
    _objects._RECENT.clear()
    store = FolderStore.open(path, "/r", create=False)
    reads: list[str] = []
    row_full = store.objects._row_full

    def spy(oid: str) -> tuple[bytes, str | None, int] | None:
        reads.append(oid)
        return row_full(oid)

    monkeypatch.setattr(store.objects, "_row_full", spy)
    offer = {"right": base_text, "wrong": base_text + b"x", "none": None}[made]
    oid = store.objects.put("tree", new_text, None, base, base_bytes=lambda: offer)
    store.close()
    assert reads == ([] if made == "right" else [base])
    _objects._RECENT.clear()
    store = FolderStore.open(path, "/r", create=False)
    try:
        assert store.objects.get(oid) == new_text
        row = store.objects.conn.execute(
            "SELECT base, depth, length(data) FROM objects WHERE oid=?", (oid,)
        ).fetchone()
        assert row[:2] == (base, 1) and row[2] < 100  # a small delta of the base
    finally:
        store.close()


def test_a_tree_read_back_for_a_snapshot_is_kept_for_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder above a change is made from its last tree, read back through its chain
    of deltas. The next snapshot (the next call the service runs, with the store opened
    afresh) is above a change there too: it reads no row for it again."""
    from takeback.store import _objects

    monkeypatch.setattr(_objects, "_RECENT", {})
    path = str(tmp_path / "s")
    store = FolderStore.open(path, "/r", create=True)
    text = b"".join(b"name %d\n" % i for i in range(300))
    oid = store.objects.put("tree", text)
    for i in range(3):
        text += b"more %d\n" % i
        oid = store.objects.put("tree", text, None, oid)
    store.close()
    _objects._RECENT.clear()
    for expect_reads in (True, False):
        store = FolderStore.open(path, "/r", create=False)
        reads: list[str] = []
        row = store.objects._row

        def spy(o: str, row: Any = row, reads: list[str] = reads) -> Any:
            reads.append(o)
            return row(o)

        monkeypatch.setattr(store.objects, "_row", spy)
        try:
            assert store.objects.get_stored(oid) == text
        finally:
            store.close()
        assert bool(reads) == expect_reads, reads


def test_objects_used_again_outlast_those_that_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its bytes, what a process keeps drops the least recently used first, not all:
    the root's tree, used by every snapshot, is never what goes."""
    from takeback.store import _objects

    monkeypatch.setattr(_objects, "_RECENT", {})
    monkeypatch.setattr(_objects, "_RECENT_SIZE", [0])
    monkeypatch.setattr(_objects, "_RECENT_MAX_BYTES", 10_000)
    root = b"r" * 3000
    _objects._keep_recent("root", root)
    for i in range(20):
        _objects._keep_recent(f"blob{i}", b"b" * 3000)
        assert _objects._recent("root") == root  # every snapshot reads it
    assert "root" in _objects._RECENT and "blob19" in _objects._RECENT
    assert "blob17" not in _objects._RECENT
    assert sum(map(len, _objects._RECENT.values())) == _objects._RECENT_SIZE[0] <= 10_000


def test_reading_ahead_keeps_the_trees_named_within_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service reads folders' last trees ahead: each is then had without a row read;
    one missing is passed over, and it stops at its budget, the first named first."""
    from takeback.store import _objects

    monkeypatch.setattr(_objects, "_RECENT", {})
    monkeypatch.setattr(_objects, "_RECENT_SIZE", [0])
    path = str(tmp_path / "s")
    store = FolderStore.open(path, "/r", create=True)
    texts = [b"".join(b"tree %d entry %d\n" % (t, i) for i in range(200)) for t in range(4)]
    ids = [store.objects.put("tree", t) for t in texts]
    store.close()
    _objects._RECENT.clear()
    _objects._RECENT_SIZE[0] = 0
    store = FolderStore.open(path, "/r", create=False)
    try:
        missing = "0" * 64
        budget = len(texts[0]) * 2 + 1
        assert store.objects.read_ahead([ids[0], missing, ids[1], ids[2], ids[3]], budget) == 3
        assert [o in _objects._RECENT for o in ids] == [True, True, True, False]
        assert missing not in _objects._RECENT
        assert store.objects.read_ahead(ids[:3], budget) == 0  # kept already
    finally:
        store.close()
    store = FolderStore.open(path, "/r", create=False)
    monkeypatch.setattr(store.objects, "_row", lambda o: pytest.fail(f"read {o}"))
    try:
        assert [store.objects.get_stored(o) for o in ids[:3]] == texts[:3]
    finally:
        store.close()


def test_a_tree_put_again_keeps_its_stored_row_and_chains_stay_within_depth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree is put without asking whether it is stored (it is new all but always): one
    stored already, as deep as a chain may go, keeps its row, and a delta built on it in
    the same batch does not go deeper than a chain may."""
    from takeback.store import _objects
    from takeback.store._objects import MAX_DEPTH

    monkeypatch.setattr(_objects, "_RECENT", {})
    path = str(tmp_path / "s")
    store = FolderStore.open(path, "/r", create=True)
    text = b"".join(b"name %d\n" % i for i in range(300))
    versions = [text]
    ids = [store.objects.put("tree", text)]
    for i in range(MAX_DEPTH):
        text = text + b"more %d\n" % i
        versions.append(text)
        ids.append(store.objects.put("tree", text, None, ids[-1]))
    store.close()
    _objects._RECENT.clear()
    store = FolderStore.open(path, "/r", create=False)
    deepest = ids[-1]
    # Put again, as a delta of the shallowest version, then a new version of it.
    assert store.objects.put("tree", versions[-1], None, ids[0]) == deepest
    newest = versions[-1] + b"newest\n"
    new_id = store.objects.put("tree", newest, None, deepest)
    store.close()
    _objects._RECENT.clear()
    store = FolderStore.open(path, "/r", create=False)
    try:
        rows = {
            oid: (base, depth)
            for oid, base, depth in store.objects.conn.execute(
                "SELECT oid, base, depth FROM objects"
            )
        }
        assert rows[deepest] == (ids[-2], MAX_DEPTH)  # the stored row, as it was
        for oid, (_base, depth) in rows.items():
            chain, at = 0, oid
            while rows[at][0] is not None:
                chain, at = chain + 1, str(rows[at][0])
            assert depth == chain <= MAX_DEPTH, oid
        for oid, data in zip([*ids, new_id], [*versions, newest], strict=True):
            assert store.objects.get(oid) == data
    finally:
        store.close()


def test_a_damaged_base_fails_the_objects_built_on_it(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = FolderStore.open(str(path), "/r", create=True)
    base = store.objects.put("blob", b"x" * 5000 + b"tail\n")
    child = store.objects.put("blob", b"x" * 5000 + b"tail, edited\n", base=base)
    store.close()
    conn = sqlite3.connect(path / "objects.db")
    conn.execute("UPDATE objects SET data=? WHERE oid=?", (b"garbage", base))
    conn.commit()
    conn.close()
    store = FolderStore.open(str(path), "/r", create=False)
    with pytest.raises(StoreCorruptError):
        store.objects.get(child)
    store.close()


def test_a_restore_under_way_in_another_process_is_not_called_interrupted(tmp_path: Path) -> None:
    import fcntl
    import os

    from takeback import Workspace

    root = tmp_path / "ws"
    root.mkdir()
    with Workspace(root, store=tmp_path / "s") as ws:
        ws.snapshot()
        ws.open_store().write_journal({"op": "rewind", "target": "a" * 64, "pre": "b" * 64})
        assert ws.interrupted() is not None
        fd = os.open(tmp_path / "s" / "lock", os.O_RDWR)  # another process's restore
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            assert ws.interrupted() is None
        finally:
            os.close(fd)
        assert ws.interrupted() is not None


def test_a_transaction_nests_on_its_own_thread_only(tmp_path: Path) -> None:
    """Another thread's block on the same connection does not join this one's."""
    import threading

    from takeback.errors import StoreError

    store = FolderStore.open(str(tmp_path / "s"), "/root-a", create=True)
    failed: list[BaseException] = []

    def elsewhere() -> None:
        try:
            with store.meta.tx():
                store.meta.set_meta("from", "another thread")
        except StoreError as e:
            failed.append(e)

    with store.meta.tx():
        store.meta.set_meta("from", "this thread")
        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
    assert len(failed) == 1 and "transaction" in str(failed[0])
    assert store.meta.get_meta("from") == "this thread"
    store.close()
