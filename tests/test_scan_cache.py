"""Scan layer: the folder cache is saved in shards, and a save never mixes two scans'."""

from __future__ import annotations

import json
import marshal
import os
import sqlite3
import time
from pathlib import Path

from takeback.ops import Options, scan
from takeback.ops._snapshot import _scan, stored_cache
from takeback.scan import CACHE_KEY, GRANULARITY_NS, LEGACY_KEY
from takeback.scan._cache import shard_key, shard_of
from takeback.store import FolderStore

from .conftest import CLI
from .test_scan import age


def fill(root: Path, tops: int = 8, files: int = 5) -> None:
    """Five folders under each of ``tops`` folders, ``files`` files in each."""
    for a in range(tops):
        for b in range(5):
            d = root / f"a{a}" / f"b{b}"
            d.mkdir(parents=True)
            for i in range(files):
                (d / f"f{i}.txt").write_text(f"{a} {b} {i}\n")


def make(tmp_path: Path) -> tuple[Path, FolderStore]:
    """200 files in 40 folders, two levels deep."""
    root = tmp_path / "ws"
    fill(root)
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    return root, store


def kv(store: FolderStore) -> dict[str, bytes]:
    return dict(store.meta.get_kv_prefix("dirs-"))


def test_a_changed_file_rewrites_only_its_folders_shards(tmp_path: Path) -> None:
    root, store = make(tmp_path)
    age(root)
    scan(store, Options())
    before = kv(store)
    # Every folder's record is in the shard its path names.
    token, cache = stored_cache(store.meta)
    assert cache is not None and token == before[CACHE_KEY]
    assert set(cache.folders) == {""} | {f"a{a}" for a in range(8)} | {
        f"a{a}/b{b}" for a in range(8) for b in range(5)
    }
    for rel in cache.folders:
        assert rel in marshal.loads(before[shard_key(shard_of(rel))])
    (root / "a3" / "b1" / "f2.txt").write_text("changed\n")
    again = scan(store, Options())
    assert again.hashed_files == 1
    # The folders above it were rebuilt for their subfolders alone: their rows stay.
    assert set(again.cache_rows) == {"a3/b1"}
    after = kv(store)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {CACHE_KEY} | {shard_key(shard_of(d)) for d in ("", "a3", "a3/b1")}


def test_a_scan_does_not_save_over_a_cache_saved_meanwhile(tmp_path: Path) -> None:
    """Two scans start from one cache; the one that saves second keeps the first's whole."""
    root, store = make(tmp_path)
    age(root)
    scan(store, Options())
    (root / "a1" / "b0" / "f0.txt").write_text("one\n")
    (root / "a6" / "b4" / "f4.txt").write_text("two\n")
    age(root)
    first, save_first = _scan(store, Options())
    (root / "a2" / "b2" / "new.txt").write_text("three\n")
    age(root)
    second, save_second = _scan(store, Options())
    assert save_first is not None and save_second is not None
    with store.meta.tx():
        save_second()
    saved = kv(store)
    with store.meta.tx():
        save_first()  # too late: its cache was made from the one the other replaced
    assert kv(store) == saved
    # The cache left is the second scan's: the next scan finds nothing to redo.
    again = scan(store, Options())
    assert again.tree == second.tree != first.tree
    assert again.changed_dirs == 0


def test_a_damaged_shard_costs_a_full_read_never_a_wrong_snapshot(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    for d in ("src", "docs", "src/deep"):
        (ws_dir / d).mkdir(parents=True, exist_ok=True)
        (ws_dir / d / "a.txt").write_text(f"{d}\n")
    age(ws_dir)
    first = json.loads(tb("snapshot", "--json").stdout)["id"]
    db = sqlite3.connect(store_dir / "meta.db")
    with db:
        db.execute(
            "UPDATE kv SET value=? WHERE key=?", (b"not marshal", shard_key(shard_of("src")))
        )
    db.close()
    (ws_dir / "src" / "a.txt").write_text("changed\n")
    doc = json.loads(tb("snapshot", "--json").stdout)
    assert doc["scan"] == {"mode": "full", "reason": "the scan cache is damaged"}
    diff = json.loads(tb("diff", first, doc["id"], "--json").stdout)
    assert [f["path"] for f in diff["files"]] == ["src/a.txt"]
    # The damaged cache was replaced whole: the next snapshot has one again.
    doc = json.loads(tb("snapshot", "--json").stdout)
    assert doc["scan"]["reason"] != "the scan cache is damaged"
    db = sqlite3.connect(store_dir / "meta.db")
    rows = db.execute("SELECT value FROM kv WHERE key LIKE ?", (f"{CACHE_KEY}/%",))
    values = [v for (v,) in rows]
    db.close()
    assert values and b"not marshal" not in values


def test_a_cache_saved_whole_before_shards_is_used_then_replaced(tmp_path: Path) -> None:
    """A store from before shards keeps its stat cache: no unchanged file is read again."""
    root, store = make(tmp_path)
    age(root)
    scan(store, Options())
    folders = stored_cache(store.meta)[1].folders  # type: ignore[union-attr]
    with store.meta.tx():
        store.meta.set_kvs({k: None for k in kv(store)})
        store.meta.set_kv(LEGACY_KEY, marshal.dumps(folders))
    changed = root / "a4" / "b2" / "f1.txt"
    changed.write_text("changed\n")
    past = time.time_ns() - 10 * GRANULARITY_NS
    os.utime(changed, ns=(past, past))
    time.sleep(GRANULARITY_NS / 1e9 + 0.1)  # its ctime too
    result = scan(store, Options())
    assert (result.mode, result.reason) == ("full", "the scan cache is of an older format")
    assert result.hashed_files == 1
    keys = set(kv(store))
    assert LEGACY_KEY not in keys and CACHE_KEY in keys
    again = scan(store, Options())
    assert again.tree == result.tree and again.changed_dirs == 0
    # The folders' detailed rows were kept too: a file changed in another folder is the
    # only one read.
    other = root / "a1" / "b3" / "f0.txt"
    other.write_text("changed too\n")
    os.utime(other, ns=(past, past))
    time.sleep(GRANULARITY_NS / 1e9 + 0.1)
    assert scan(store, Options()).hashed_files == 1


def test_snapshots_taken_at_once_leave_a_cache_the_service_can_vouch_for(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    """Three commands snapshot at once, again and again, while files change under them.

    Each asks the service what changed since the cache's mark and saves its shards only
    over the cache it started from; the cache left must be one scan's, so the next
    service-fed snapshot is exactly what a scan with no cache finds.
    """
    import random
    import subprocess
    import sys

    from takeback.ops import Options
    from takeback.store import FolderStore

    from ._service import full_tree, running_service
    from .conftest import SRC

    fill(ws_dir, tops=6, files=4)
    tb("snapshot")
    rng = random.Random(7)
    env = dict(os.environ, TAKEBACK_STORE=str(store_dir), PYTHONPATH=SRC, TAKEBACK_RELAY="0")
    with running_service(ws_dir, store_dir):
        tb("snapshot")  # the service's first mark
        for _round in range(4):
            procs = [
                subprocess.Popen(
                    [sys.executable, "-m", "takeback", "snapshot", "--json"],
                    cwd=ws_dir,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                for _ in range(3)
            ]
            for _ in range(12):
                d = ws_dir / f"a{rng.randrange(6)}" / f"b{rng.randrange(5)}"
                (d / f"f{rng.randrange(6)}.txt").write_text(f"{rng.random()}\n")
                time.sleep(0.01)
            for p in procs:
                out, err = p.communicate(timeout=60)
                assert p.returncode == 0, err
        doc = json.loads(tb("snapshot", "--json", env={"TAKEBACK_RELAY": "0"}).stdout)
        assert doc["scan"]["mode"] == "service", doc["scan"]
        store = FolderStore.open(str(store_dir), str(ws_dir), create=False)
        try:
            taken = store.meta.snapshot(doc["id"])
            assert taken is not None and taken.tree == full_tree(store, Options())
        finally:
            store.close()


def test_the_cache_rows_of_a_change_are_rewritten_in_place(tmp_path: Path) -> None:
    """A snapshot rewrites the cache rows of the folders it changed: each in the page that
    holds it. Replaced (deleted and inserted anew under a new rowid), each row wrote the
    page it left, a page at the table's end and two pages of its key's index: 183 pages
    of the log for a 10-file snapshot at 100,000 files, against 47 in place."""
    root, store = make(tmp_path)
    age(root)
    scan(store, Options())
    scan(store, Options())  # the rows exist, each with its rowid
    meta = store.meta.conn
    before = {
        "kv": dict(meta.execute("SELECT key, rowid FROM kv")),
        "dircache": dict(meta.execute("SELECT dir, rowid FROM dircache")),
    }
    wal = tmp_path / "store" / "meta.db-wal"
    for i in range(8):
        (root / f"a{i}" / "b2" / "f1.txt").write_text(f"changed {i}\n")
    size = wal.stat().st_size
    again = scan(store, Options())
    frames = (wal.stat().st_size - size) // (4096 + 24)
    assert again.hashed_files == 8
    after = {
        "kv": dict(meta.execute("SELECT key, rowid FROM kv")),
        "dircache": dict(meta.execute("SELECT dir, rowid FROM dircache")),
    }
    for table in ("kv", "dircache"):
        kept = before[table].keys() & after[table].keys()
        assert kept and all(before[table][k] == after[table][k] for k in kept), table
    # 17 folders changed (8 leaves, their 8 parents, the root): 9 pages of the log here,
    # 18 when each row was replaced.
    assert frames <= 13, frames
    store.close()


def _records(n: int) -> dict[str, tuple[object, ...]]:
    """``n`` leaf folders' records under one root, each as a scan would keep it."""
    folders: dict[str, tuple[object, ...]] = {
        "": (b"l", (), (), b"s", (), (), "0" * 64, 0, (), False, ())
    }
    for i in range(n):
        folders[f"d{i // 100}/e{i}"] = (
            b"l" * 16,
            (),
            (),
            b"s" * 16,
            (),
            (),
            f"{i:064x}",
            20,
            (),
            False,
            (),
        )
    return folders


def _rewritten(folders: dict[str, tuple[object, ...]]) -> int:
    """Bytes of cache rows a scan saves when three folders' records changed."""
    from takeback.scan._cache import new_cache

    cache, _rows = new_cache(folders)
    changed = dict(folders)
    touched = ["d1/e150", "d7/e777", "d9/e999"]
    for rel in touched:
        changed[rel] = (*folders[rel][:6], "f" * 64, *folders[rel][7:])
    _cache, rows = cache.derive(changed, touched)
    return sum(len(v) for v in rows.values() if v)


def test_the_cache_rows_a_change_rewrites_do_not_grow_with_the_folders() -> None:
    # With a fixed number of shards, each of a million files' shards held 50 records and
    # a changed folder rewrote them all: the bytes saved at every snapshot grew with the
    # tree. The shards follow the number of folders.
    small, large = _rewritten(_records(5_000)), _rewritten(_records(100_000))
    assert large <= 1.5 * small


def test_a_cache_of_more_shards_reads_back_whole_and_shrinks_without_leftovers() -> None:
    from takeback.scan._cache import SHARDS, load_cache, new_cache

    folders = _records(20_000)
    cache, rows = new_cache(folders)
    assert len(cache.shards or ()) > SHARDS
    saved = {k: v for k, v in rows.items() if v is not None}
    token, back = load_cache(sorted(saved.items()))
    assert back is not None and token == cache.token and back.folders == folders
    # Most folders go: the cache is saved whole in fewer shards, and every shard row of
    # the larger one beyond them is deleted.
    few = {r: f for r, f in folders.items() if r.count("/") == 0 or r.endswith("7")}
    smaller, rows = cache.derive(few)
    assert len(smaller.shards or ()) < len(cache.shards or ())
    for k, v in rows.items():
        if v is None:
            saved.pop(k, None)
        else:
            saved[k] = v
    assert all(int(k.rpartition("/")[2], 16) < len(smaller.shards or ()) for k in saved if "/" in k)
    token, back = load_cache(sorted(saved.items()))
    assert back is not None and back.folders == few


def test_shards_beyond_the_headers_number_are_leftovers_not_damage() -> None:
    # A takeback that knows only 1,024 shards saved a whole cache over one of more: the
    # rows beyond its shards are an earlier cache's, and do not make this one damaged.
    from takeback.scan._cache import load_cache, new_cache, shard_key

    big, big_rows = new_cache(_records(20_000))
    older = {"": _records(0)[""], "d0/e1": _records(2)["d0/e1"]}
    old, old_rows = new_cache(older)
    rows = {k: v for k, v in big_rows.items() if v is not None}
    rows.update({k: v for k, v in old_rows.items() if v is not None})
    assert shard_key(5000) in rows
    token, back = load_cache(sorted(rows.items()))
    assert token == old.token and back is not None and back.folders == older
