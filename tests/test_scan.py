"""Scan layer: the stat cache rehashes only what changed, and never trusts a racy entry."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from takeback.ops import Options, scan
from takeback.ops._snapshot import stored_cache
from takeback.scan import CACHE_KEY, GRANULARITY_NS, load_cache
from takeback.store import FolderStore


def make(tmp_path: Path, n: int = 20) -> tuple[Path, FolderStore]:
    root = tmp_path / "ws"
    for d in range(4):
        (root / f"d{d}").mkdir(parents=True)
        for i in range(n // 4):
            (root / f"d{d}" / f"f{i}.txt").write_text(f"{d} {i}\n")
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    return root, store


def age(root: Path, seconds: float = 10) -> None:
    """Make every entry older than the race window, as if written a while ago.

    mtime can be set back; ctime cannot, so we also wait out the window once.
    """
    past = time.time_ns() - int(seconds * 1e9)
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(dirpath, name), ns=(past, past), follow_symlinks=False)
    time.sleep(GRANULARITY_NS / 1e9 + 0.1)


def test_an_unchanged_tree_rehashes_nothing(tmp_path: Path) -> None:
    root, store = make(tmp_path)
    age(root)
    first = scan(store, Options())
    assert first.hashed_files == 20
    again = scan(store, Options())
    assert again.tree == first.tree
    assert again.hashed_files == 0 and again.changed_dirs == 0


def test_one_changed_file_rehashes_one_file_and_its_folders(tmp_path: Path) -> None:
    root, store = make(tmp_path)
    age(root)
    first = scan(store, Options())
    (root / "d2" / "f1.txt").write_text("changed\n")
    second = scan(store, Options())
    assert second.tree != first.tree
    assert second.hashed_files == 1
    assert second.changed_dirs == 2  # d2 and the root


def test_racy_entries_are_rehashed_next_time(tmp_path: Path) -> None:
    """A file written within the race window is never trusted by the next scan.

    It is changed again with the same size and its mtime put back to the first write's:
    a stat-only cache would miss it; the race rule must not.
    """
    root, store = make(tmp_path)
    age(root)
    f = root / "d1" / "f0.txt"
    f.write_text("AAAA\n")
    st = f.stat()
    first = scan(store, Options())
    f.write_text("BBBB\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = scan(store, Options())
    assert second.tree != first.tree
    # The new content is in the new tree:
    from takeback.ops import lookup, read_entry

    entry = lookup(store.objects.get_tree, second.tree, "d1/f0.txt")
    assert entry is not None and read_entry(store, entry) == b"BBBB\n"


def test_a_hint_lists_only_the_named_folders(tmp_path: Path) -> None:
    root, store = make(tmp_path)
    age(root)
    scan(store, Options())
    (root / "d3" / "f2.txt").write_text("watched change\n")
    scanner, listed = _listing_scanner(root, store)
    # A path named, not its folder: the folder it is in is listed, not made from its
    # last tree as a folder above a change is.
    result = scanner.scan(hint=["d3/f2.txt"])
    assert listed == ["d3"]
    store.objects.flush()
    full = scan(store, Options())
    assert result.tree == full.tree
    assert result.changed_dirs == 2


def _listing_scanner(root: Path, store: FolderStore) -> tuple[Any, list[str]]:
    """A scanner from the store's cache, and the folders it lists, in order."""
    from takeback.scan import Scanner

    meta = store.meta
    scanner = Scanner(
        str(root),
        put=store.objects.put,
        cache=stored_cache(meta)[1],
        dircache_get=meta.get_dircache,
        max_file_bytes=1 << 20,
        get=store.objects.get,
    )
    listed: list[str] = []
    real = scanner._lister.listing

    def spy(rel: str, *args: Any, **kwargs: Any) -> Any:
        listed.append(rel)
        return real(rel, *args, **kwargs)

    scanner._lister.listing = spy  # type: ignore[method-assign]
    return scanner, listed


def test_folders_above_a_change_are_made_from_their_last_trees_as_a_full_scan_makes_them(
    tmp_path: Path,
) -> None:
    """A hinted scan lists only the folders named; those above them are not listed.

    Their trees are their last ones with the changed subfolders' ids, and what their own
    ignore files say still applies below them.
    """

    root = tmp_path / "ws"
    for d in ("a/b/c", "a/b/skip", "a/x", "z"):
        (root / d).mkdir(parents=True)
    (root / ".gitignore").write_text("*.log\n")
    (root / "a" / ".gitignore").write_text("skip/\n")  # in a folder above the change
    (root / "a" / "b" / "c" / "f.txt").write_text("one\n")
    (root / "a" / "b" / "c" / "g.log").write_text("ignored\n")
    (root / "a" / "b" / "skip" / "s.txt").write_text("left out\n")
    (root / "a" / "x" / "y.txt").write_text("y\n")
    (root / "a" / "top.txt").write_text("top\n")
    (root / "z" / "z.txt").write_text("z\n")
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    age(root)
    scan(store, Options())
    (root / "a" / "b" / "c" / "f.txt").write_text("two\n")
    (root / "a" / "b" / "c" / "new.txt").write_text("new\n")
    (root / "a" / "b" / "c" / "new.log").write_text("ignored too\n")
    scanner, listed = _listing_scanner(root, store)
    hinted = scanner.scan(hint=["a/b/c"])
    assert not scanner.not_vouched
    assert listed == ["a/b/c"]
    store.objects.flush()
    full = scan(store, Options())
    assert hinted.tree == full.tree
    assert hinted.changed_dirs == 4  # a/b/c and the three folders above it
    from takeback.ops import lookup

    assert lookup(store.objects.get_tree, hinted.tree, "a/b/c/new.txt") is not None
    assert lookup(store.objects.get_tree, hinted.tree, "a/b/c/new.log") is None
    assert lookup(store.objects.get_tree, hinted.tree, "a/b/skip") is None


def test_folders_above_a_folder_whose_tree_stayed_keep_their_records(tmp_path: Path) -> None:
    root, store = make(tmp_path)
    (root / "d1" / "sub").mkdir()
    (root / "d1" / "sub" / "s.txt").write_text("s\n")
    age(root)
    before = scan(store, Options())
    (root / "d1" / "sub" / "s.txt").write_text("s\n")  # written again, the same bytes
    scanner, listed = _listing_scanner(root, store)
    kept = scanner._cache.folders["d1"]
    hinted = scanner.scan(hint=["d1/sub"])
    assert listed == ["d1/sub"]
    assert hinted.tree == before.tree
    assert scanner.folders["d1"] is kept  # its record as it was, no tree stored again


def test_a_folder_above_a_change_with_a_racy_file_is_listed(tmp_path: Path) -> None:

    root, store = make(tmp_path)
    (root / "d1" / "sub").mkdir()
    (root / "d1" / "sub" / "s.txt").write_text("s\n")
    age(root)
    (root / "d1" / "fresh.txt").write_text("written just now\n")  # racy: not trusted
    scan(store, Options())
    (root / "d1" / "sub" / "s.txt").write_text("t\n")
    scanner, listed = _listing_scanner(root, store)
    hinted = scanner.scan(hint=["d1/sub"])
    store.objects.flush()
    # d1 holds a file whose stat is not trusted: it is listed (and the file read again).
    assert sorted(listed) == ["d1", "d1/sub"]
    assert hinted.tree == scan(store, Options()).tree


def test_a_folder_that_vanishes_or_a_file_that_is_unreadable(tmp_path: Path) -> None:
    root, store = make(tmp_path)
    (root / "d0" / "sock").mkdir()
    result = scan(store, Options())
    assert result.files == 20
    os.mkfifo(root / "fifo")  # not a file, a link or a folder: out of scope
    assert scan(store, Options()).files == 20


def test_rewriting_gits_index_does_not_relist_every_folder(tmp_path: Path) -> None:
    import subprocess

    root, store = make(tmp_path)
    (root / ".gitignore").write_text("*.log\n")
    (root / "d1" / "x.log").write_text("ignored\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    age(root)
    scan(store, Options())
    assert scan(store, Options()).changed_dirs == 0
    subprocess.run(["git", "add", "-f", "d1/x.log"], cwd=root, check=True)  # a new index
    after = scan(store, Options())
    # Only the folder with an ignored entry asked the index, and x.log is now tracked.
    assert after.changed_dirs == 2  # d1 and the root above it
    from takeback.ops import lookup

    assert lookup(store.objects.get_tree, after.tree, "d1/x.log") is not None
    subprocess.run(["git", "rm", "-q", "--cached", "d1/x.log"], cwd=root, check=True)
    again = scan(store, Options())
    assert lookup(store.objects.get_tree, again.tree, "d1/x.log") is None


def test_an_old_cache_format_is_dropped(tmp_path: Path) -> None:
    root, store = make(tmp_path)
    with store.meta.tx():
        store.meta.set_kv("dirs-v0", b"old format")
    scan(store, Options())
    keys = [r[0] for r in store.meta.conn.execute("SELECT key FROM kv")]
    assert CACHE_KEY in keys and "dirs-v0" not in keys
    assert all(k == CACHE_KEY or k.startswith(CACHE_KEY + "/") for k in keys)


def test_a_long_scan_reports_its_progress(tmp_path: Path) -> None:
    from takeback import Workspace

    root = tmp_path / "big"
    root.mkdir()
    for i in range(1200):
        (root / f"f{i}.txt").write_text(f"{i}\n")
    seen: list[int] = []
    with Workspace(root, store=tmp_path / "s") as ws:
        info = ws.snapshot(on_progress=seen.append)
    assert info.files == 1200
    assert seen == [500, 1000]


def test_a_hinted_scan_counts_and_names_what_a_full_scan_does(tmp_path: Path) -> None:
    # A scan that lists a few folders starts from the old cache as a whole: folders gone
    # must leave it, with their files and their too-large files, and new ones count.
    import shutil

    from takeback.scan import Scanner

    root = tmp_path / "ws"
    for d in ("a/b/c", "d", "e/f"):
        (root / d).mkdir(parents=True)
    (root / "a" / "big").write_bytes(b"x" * 300)
    (root / "a" / "b" / "c" / "big").write_bytes(b"y" * 300)
    (root / "a" / "b" / "c" / "small").write_text("s\n")
    (root / "d" / "z").write_bytes(b"z" * 300)
    (root / "e" / "f" / "g").write_text("g\n")
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    cache: dict[str, bytes] = {}
    rows: dict[str, bytes] = {}

    def scanner(use_cache: bool) -> Scanner:
        return Scanner(
            str(root),
            put=store.objects.put,
            cache=load_cache(sorted(cache.items()))[1] if use_cache else None,
            dircache_get=lambda ds: {d: rows[d] for d in ds if d in rows} if use_cache else {},
            max_file_bytes=100,
        )

    def keep(result: object) -> None:
        got = result.cache  # type: ignore[attr-defined]
        for key, value in (got or {}).items():
            if value is None:
                cache.pop(key, None)
            else:
                cache[key] = value
        for d, row in result.cache_rows.items():  # type: ignore[attr-defined]
            if row is None:
                rows.pop(d, None)
            else:
                rows[d] = row

    first = scanner(False).scan()
    assert (first.files, first.skipped_count) == (2, 3)
    keep(first)
    shutil.rmtree(root / "a" / "b")
    (root / "e" / "f" / "big").write_bytes(b"b" * 300)
    (root / "e" / "f" / "h").write_text("h\n")
    (root / "d" / "z").write_text("small now\n")
    hinted = scanner(True).scan(hint=["a", "e/f", "d"])
    full = scanner(False).scan()
    assert hinted.tree == full.tree
    assert (hinted.files, hinted.skipped_count) == (full.files, full.skipped_count) == (3, 2)
    assert sorted(hinted.skipped) == sorted(full.skipped) == ["a/big", "e/f/big"]
    keep(hinted)
    # Its cache, checked folder by folder with nothing named, is the tree as it is.
    checked = scanner(True).scan()
    assert (checked.tree, checked.files, checked.skipped_count) == (full.tree, 3, 2)
    store.close()


def test_a_file_is_read_to_its_end_whatever_its_stat_said(tmp_path: Path) -> None:
    from takeback.scan._read import _read_all

    f = tmp_path / "f"
    f.write_bytes(b"0123456789" * 1000)
    for hint in (10000, 0, 5, 9999, 10001, 50000):
        fd = os.open(f, os.O_RDONLY)
        try:
            assert _read_all(fd, hint) == b"0123456789" * 1000, hint
        finally:
            os.close(fd)
    f.write_bytes(b"")
    fd = os.open(f, os.O_RDONLY)
    try:
        assert _read_all(fd, 100) == b""
    finally:
        os.close(fd)


def test_a_changed_folders_last_tree_is_made_from_the_cache_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delta base of a rebuilt folder's tree is its last tree, made from the scan
    cache (not read back from the store): for every kind of entry the cache describes,
    the bytes made are the stored tree's; a folder with an unreadable entry makes none."""
    import hashlib

    from takeback.scan import _list, _walk
    from takeback.scan._cache import _TREE, _UNREAD
    from takeback.store import _objects

    root, store = make(tmp_path, n=80)  # trees large enough to be stored as deltas
    d0 = root / "d0"
    (d0 / "sub").mkdir()
    (d0 / "sub" / "x").write_text("x\n")
    (d0 / "run.sh").write_text("#!/bin/sh\n")
    (d0 / "run.sh").chmod(0o755)
    (d0 / "empty").write_bytes(b"")
    (d0 / "big").write_bytes(b"b" * 4096)  # over the limit below: named, not read
    os.symlink("f1.txt", d0 / "link")
    opts = Options(max_file_bytes=1024)
    made: list[tuple[str, bytes | None]] = []
    real = _list._last_tree

    def spy(detail: dict[str, Any], old: Any, subdirs: list[tuple[str, int]]) -> bytes | None:
        body = real(detail, old, subdirs)
        made.append((str(old[_TREE]), body))
        if body is not None:
            unread = (*old[:_UNREAD], (("d0/gone", "denied"),), *old[_UNREAD + 1 :])
            assert real(detail, unread, subdirs) is None
        return body

    monkeypatch.setattr(_walk, "_last_tree", spy)
    monkeypatch.setattr(_objects, "_RECENT", {})
    age(root)
    scan(store, opts)
    (d0 / "f1.txt").write_text("changed\n")
    (root / "d1" / "f2.txt").write_text("changed too\n")
    _objects._RECENT.clear()
    store.objects._raw.clear()
    scan(store, opts)
    # d0 and d1 (the root's tree is too small to be stored as a delta), made exactly.
    assert len(made) == 2
    for tree_id, body in made:
        assert body is not None and hashlib.sha256(body).hexdigest() == tree_id


def test_the_listing_this_run_uses() -> None:
    """With TAKEBACK_TEST_NO_NATIVE (one step of .ci/run) the scan lists in Python."""
    from takeback.scan import _list

    from .conftest import NO_NATIVE

    if NO_NATIVE:
        assert vars(_list)["_native_list"] is None
    else:
        assert vars(_list)["_native_list"] is not None
