"""Scan layer: files read by a pool give the same trees and objects as one thread.

A first snapshot reads, hashes and compresses every file on a pool (forked processes, or
threads where it may not fork); the trees,
the counts and every object read back must be what a walk on one thread stores, for
files, symlinks, files over the size limit, changed files stored as deltas, and files
that change or vanish between the listing and the read.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from takeback.model import DIR, FILE, LARGE
from takeback.ops import lookup, read_entry
from takeback.ops._snapshot import stored_cache
from takeback.scan import Scanner, ScanResult
from takeback.store import FolderStore


def _tree(root: Path) -> None:
    for d in range(6):
        sub = root / f"d{d}" / "deep"
        sub.mkdir(parents=True)
        for i in range(45):  # more than one chunk of the pool per folder
            (root / f"d{d}" / f"f{i}.txt").write_bytes(f"{d} {i}\n".encode() * (i * 40 + 1))
        (sub / "leaf.txt").write_text(f"leaf {d}\n")
    (root / "same-a.txt").write_text("twins\n")
    (root / "same-b.txt").write_text("twins\n")
    (root / "big.bin").write_bytes(b"x" * 70000)
    (root / "empty.txt").write_bytes(b"")
    os.symlink("d0/f1.txt", root / "link")
    os.symlink("nowhere", root / "dangling")


def _scan(root: Path, store: FolderStore, workers: int, **kw: object) -> ScanResult:
    meta = store.meta
    scanner = Scanner(
        str(root),
        put=store.objects.put,
        cache=stored_cache(meta)[1],
        dircache_get=meta.get_dircache,
        max_file_bytes=65536,
        pack=store.objects.pack,
        put_packed=store.objects.put_packed,
        workers=workers,
        **kw,  # type: ignore[arg-type]
    )
    result = scanner.scan()
    store.objects.flush()
    if result.cache is not None:
        with meta.tx():
            meta.set_kvs(result.cache)
            meta.put_dircache(result.cache_rows)
    return result


def _contents(store: FolderStore, tree: str, prefix: str = "") -> dict[str, tuple[str, int, bytes]]:
    out: dict[str, tuple[str, int, bytes]] = {}
    for name, e in store.objects.get_tree(tree).items():
        path = prefix + name
        if e.kind == DIR:
            out.update(_contents(store, e.oid, path + "/"))
        elif e.kind == LARGE:
            out[path] = (e.kind, e.mode, b"")
        else:
            out[path] = (e.kind, e.mode, store.objects.get(e.oid))
    return out


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, FolderStore, FolderStore]:
    root = tmp_path / "ws"
    root.mkdir()
    _tree(root)
    one = FolderStore.open(str(tmp_path / "one"), str(root), create=True)
    pool = FolderStore.open(str(tmp_path / "pool"), str(root), create=True)
    return root, one, pool


@pytest.mark.parametrize("forks", [0, 1], ids=["threads", "processes"])
def test_the_pool_stores_what_one_thread_stores(
    stores: tuple[Path, FolderStore, FolderStore], forks: int
) -> None:
    # A first snapshot reads in forked processes when it may fork, else on threads.
    root, one, pool = stores
    a = _scan(root, one, 0)
    b = _scan(root, pool, 3, forks=forks)
    assert b.tree == a.tree
    assert (b.files, b.skipped, b.hashed_files) == (a.files, a.skipped, a.hashed_files)
    assert b.skipped == ["big.bin"]
    assert _contents(pool, b.tree) == _contents(one, a.tree)
    entry = lookup(pool.objects.get_tree, b.tree, "d3/f44.txt")
    assert entry is not None and entry.kind == FILE
    assert read_entry(pool, entry) == (root / "d3" / "f44.txt").read_bytes()


def test_changed_files_are_stored_as_deltas_by_either_way(
    stores: tuple[Path, FolderStore, FolderStore],
) -> None:
    root, one, pool = stores
    _scan(root, one, 0)
    _scan(root, pool, 3)
    for d in range(6):
        p = root / f"d{d}" / "f30.txt"
        p.write_bytes(p.read_bytes() + b"one more line\n")
    (root / "d1" / "f2.txt").unlink()
    (root / "d2" / "new.txt").write_text("new\n")
    a = _scan(root, one, 0)
    b = _scan(root, pool, 3)
    assert b.tree == a.tree and b.hashed_files == a.hashed_files
    assert _contents(pool, b.tree) == _contents(one, a.tree)
    # The edited files went in as deltas against their earlier versions, on both sides.
    for store in (one, pool):
        (deltas,) = store.objects.conn.execute(
            "SELECT count(*) FROM objects WHERE kind='blob' AND base IS NOT NULL"
        ).fetchone()
        assert deltas == 6


def _pool_scanner(root: Path, store: FolderStore) -> Scanner:
    """A scanner reading on a pool of two (processes where it may fork)."""
    return Scanner(
        str(root),
        put=store.objects.put,
        cache=stored_cache(store.meta)[1],
        dircache_get=store.meta.get_dircache,
        max_file_bytes=65536,
        pack=store.objects.pack,
        put_packed=store.objects.put_packed,
        workers=2,
    )


def test_a_file_that_vanishes_before_its_read_is_left_out(
    stores: tuple[Path, FolderStore, FolderStore],
) -> None:
    root, _one, pool = stores
    scanner = _pool_scanner(root, pool)
    # Listed, then gone before the pool reads it: as a walk on one thread leaves it.
    real_load = scanner._reader._load

    def load(rel: str, st: os.stat_result) -> object:
        if rel == "d4/f7.txt":
            os.unlink(root / rel)
        return real_load(rel, st)

    scanner._reader._load = load  # type: ignore[assignment,method-assign]
    result = scanner.scan()
    pool.objects.flush()
    assert lookup(pool.objects.get_tree, result.tree, "d4/f7.txt") is None
    assert lookup(pool.objects.get_tree, result.tree, "d4/f8.txt") is not None


def test_batches_written_behind_the_walk_are_all_committed(
    stores: tuple[Path, FolderStore, FolderStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small batches, so that many go through the writer thread while the walk goes on."""
    from takeback.ops import Options, scan
    from takeback.store import _objects

    root, one, pool = stores
    a = _scan(root, one, 0)
    monkeypatch.setattr(_objects, "_BATCH_BYTES", 2048)
    b = scan(pool, Options(max_file_bytes=65536))
    assert b.tree == a.tree
    (count,) = pool.objects.conn.execute("SELECT count(*) FROM objects").fetchone()
    (expected,) = one.objects.conn.execute("SELECT count(*) FROM objects").fetchone()
    assert count == expected
    # Committed, not only pending: a fresh connection reads every object back.
    pool.close()
    again = FolderStore.open(pool.path, pool.root, create=False)
    assert _contents(again, b.tree) == _contents(one, a.tree)
    again.close()
    # Edits go through the writer as deltas, with their bases from the earlier batches.
    for d in range(6):
        p = root / f"d{d}" / "f40.txt"
        p.write_bytes(p.read_bytes() + b"edited\n")
    third = FolderStore.open(pool.path, pool.root, create=False)
    c = scan(third, Options(max_file_bytes=65536))
    assert _contents(third, c.tree)["d5/f40.txt"][2].endswith(b"edited\n")
    third.close()


def test_a_reader_process_that_dies_fails_the_scan_and_leaves_none_behind(
    stores: tuple[Path, FolderStore, FolderStore],
) -> None:
    from takeback.errors import ScanError

    root, _one, pool = stores
    scanner = _pool_scanner(root, pool)
    real = scanner._reader._load_sent
    parent = os.getpid()
    seen: list[int] = []

    def load_sent(chunk: list[tuple[str, str, tuple[int, ...], bool]]) -> list[object]:
        if os.getpid() != parent and any(rel == "d3/f9.txt" for _n, rel, _s, _d in chunk):
            os._exit(3)  # a reader process dies (killed, out of memory) half way
        return real(chunk)

    scanner._reader._load_sent = load_sent  # type: ignore[method-assign]
    before = _children()
    with pytest.raises(ScanError, match="reader process"):
        scanner.scan(hint=None)
    assert _children() == before == seen


def _children() -> list[int]:
    """The processes this one started that are still there (zombies too)."""
    me = str(os.getpid())
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[1].decode() == me:
                found.append(int(pid))
    return sorted(found)
