"""Scan layer: a folder listed by the native module gives the keys and stats the Python
listing gives, so a scan decides the same whichever lists a folder.

The check pass lists every folder of the tree to compare its keys with the cache; the
walk that follows lists the folders that differ, with their files' stats, and saves
their keys for the next check. Keys that differed between the two listings would make
every full scan rebuild a folder (when they differ always) or, worse, keep one that
changed (were they equal for two different folders); the second cannot be made on
purpose, the first is checked here on every kind of entry a folder can hold.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takeback.ops import Options, scan
from takeback.scan import _check, _list
from takeback.scan._ignore import IgnoreRules
from takeback.scan._list import Lister
from takeback.store import FolderStore

from .conftest import SRC, examples, without_file_powers, write
from .test_scan import age


def _lister(root: Path) -> Lister:
    lister = Lister(str(root), max_file_bytes=1 << 30, exclude_env=True, exclude=[])
    lister.root_key()  # the index's signature, as a scan sets it
    return lister


def _folders(root: Path) -> Iterator[str]:
    for dirpath, dirs, _files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        yield os.path.relpath(dirpath, root) if dirpath != str(root) else ""


def _listings(root: Path) -> dict[str, tuple[object, ...]]:
    """Each folder's keys and decisions, listed as the check pass and as the walk list it."""
    lister = _lister(root)
    rules = IgnoreRules.for_root(str(root), exclude_env=True)
    key = lister.root_key()
    out: dict[str, tuple[object, ...]] = {}
    for rel in _folders(root):
        for keep in (False, True):
            got = lister.listing(rel, rules, key, rel.startswith("excluded"), None, keep=keep)
            out[f"{rel}:{keep}"] = (
                got.listing_key,
                got.stat_key,
                got.skip,
                got.partial,
                got.uses_index,
                got.subdirs,
                [(name, _list._stat_fields(st)) for name, st in got.kept],
            )
    return out


@pytest.fixture
def varied(tmp_path: Path) -> Path:
    """A folder with every kind of entry a scan meets."""
    root = tmp_path / "ws"
    write(root, "a.txt", "text\n")
    write(root, "script.sh", "#!/bin/sh\n", mode=0o755)
    write(root, "empty", b"")
    write(root, "sub/deeper/file.py", "x = 1\n")
    write(root, "sub/spaced name é.md", "unicode\n")
    (root / "closed").mkdir(mode=0o700)
    (root / "only-empty").mkdir()
    os.symlink("a.txt", root / "link")
    os.symlink("nowhere", root / "dangling")
    os.symlink("sub", root / "to-folder")
    os.mkfifo(root / "pipe")
    (root / os.fsdecode(b"bad-\xff-name.txt")).write_bytes(b"not utf-8 named\n")
    write(root, ".gitignore", "*.log\nbuild/\n")
    write(root, "debug.log", "ignored\n")
    write(root, "build/out.o", "ignored folder\n")
    write(root, ".git/HEAD", "ref: refs/heads/main\n")
    write(root, "excluded/kept.txt", "in a folder listed as excluded\n")
    os.utime(root / "a.txt", ns=(0, -1_500_000_000))  # before 1970: a negative mtime
    return root


def test_the_native_module_is_built_here() -> None:
    """The package asks for it, and this machine has a compiler: without it every full
    scan would silently run its check pass in Python, at about twice the cost."""
    from importlib.util import find_spec

    from .conftest import NO_NATIVE

    if NO_NATIVE:
        pytest.skip("this run leaves the native module out on purpose")
    assert find_spec("takeback.scan._listing") is not None, "not built: pip install -e ."


def test_native_and_python_listings_give_the_same_keys(varied: Path) -> None:
    got = _listings(varied)
    folders = sorted({k.rpartition(":")[0] for k in got})
    assert "" in folders and "sub/deeper" in folders
    for rel in folders:
        # The walk's listing also gives the files' stats; the check pass's does not.
        assert got[f"{rel}:False"][:-1] == got[f"{rel}:True"][:-1], rel
        assert got[f"{rel}:False"][-1] == []
    kept = got[":True"][-1]
    assert isinstance(kept, list)
    assert {name for name, _fields in kept} == {
        "a.txt",
        "script.sh",
        "empty",
        "link",
        "dangling",
        "to-folder",
        os.fsdecode(b"bad-\xff-name.txt"),
        ".gitignore",
    }
    skip = got[":False"][2]
    assert isinstance(skip, tuple)
    assert set(skip) == {".git", "debug.log", "build"}  # what the root leaves out


def test_without_the_native_module_the_keys_are_the_same(
    varied: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    native = _listings(varied)
    monkeypatch.setattr(_list, "_native_list", None)
    assert _listings(varied) == native


def test_a_change_the_native_check_pass_sees(varied: Path, tmp_path: Path) -> None:
    """Same size, same mtime, another inode: only the stat key can tell, and a full scan
    (whose check pass is native) must find it."""
    age(varied)  # nothing racy: the scan trusts every stat it cached
    store = FolderStore.open(str(tmp_path / "store"), str(varied), create=True)
    try:
        first = scan(store, Options())
        st = os.lstat(varied / "sub" / "deeper" / "file.py")
        (varied / "sub" / "deeper" / "file.py").unlink()
        write(varied, "sub/deeper/file.py", "x = 2\n")
        os.utime(varied / "sub" / "deeper" / "file.py", ns=(st.st_atime_ns, st.st_mtime_ns))
        second = scan(store, Options())
        assert second.tree != first.tree
        assert second.hashed_files == 1
    finally:
        store.close()


def test_a_folder_the_native_module_cannot_stat_in_is_named_as_before(tmp_path: Path) -> None:
    """A folder readable but not searchable: its entries are listed, none can be stat'ed.
    The native module hands it back, and the Python listing names why."""
    prefix = without_file_powers()  # as root, every entry can be stat'ed
    root = tmp_path / "ws"
    write(root, "ok.txt", "fine\n")
    write(root, "locked/inside.txt", "cannot be stat'ed\n")
    code = (
        "import sys; from takeback.scan import _list; "
        "from takeback.scan._ignore import IgnoreRules; "
        "sc = _list.Lister(sys.argv[1], max_file_bytes=1 << 30, exclude_env=True, "
        "exclude=[]); sc.root_key(); "
        "assert _list._native_list(sys.argv[1] + '/locked') is None; "
        "rules = IgnoreRules.for_root(sys.argv[1], exclude_env=True)\n"
        "try:\n"
        "    sc.listing('locked', rules, sc.root_key(), False, None, keep=False)\n"
        "except _list._Unreadable as e:\n"
        "    print(e.reason)\n"
    )
    os.chmod(root / "locked", 0o644)  # read, not search
    os.chmod(root, 0o755)
    os.chmod(tmp_path, 0o755)
    try:
        proc = subprocess.run(
            [*prefix, sys.executable, "-c", code, str(root)],
            env=dict(os.environ, PYTHONPATH=SRC),
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        os.chmod(root / "locked", 0o755)
    assert proc.returncode == 0, proc.stderr
    assert "permission denied" in proc.stdout.lower()


def test_a_time_past_2262_is_kept_by_both_listings(tmp_path: Path) -> None:
    """A nanosecond time that does not fit in 64 bits (a file system allows it): the native
    module hands the folder back, and the Python listing writes the fields out whole."""
    root = tmp_path / "ws"
    write(root, "future.txt", "from far ahead\n")
    write(root, "now.txt", "today\n")
    os.utime(root / "future.txt", ns=(10**19, 10**19))
    assert os.lstat(root / "future.txt").st_mtime_ns == 10**19
    assert vars(_list)["_native_list"](str(root)) is None
    got = _listings(root)
    assert got[":False"][:-1] == got[":True"][:-1]
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    try:
        first = scan(store, Options())
        assert first.files == 2
        os.utime(root / "future.txt", ns=(10**19, 10**19 + 1))
        second = scan(store, Options())
        assert second.changed_dirs == 1  # the new mtime was seen
    finally:
        store.close()


def test_a_process_with_threads_shares_the_check_pass_over_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server process has threads of its own and must not fork: its full scans check
    the tree on threads instead (the native listing runs without the GIL), and find
    what a scan without threads finds."""
    import threading

    root = tmp_path / "ws"
    for d in range(6):
        for i in range(5):
            write(root, f"top{d}/sub/f{i}.txt", f"{d} {i}\n")
    age(root)
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    seen: set[str] = set()
    real_check = _check.Checker._check

    def check(self: _check.Checker, *args: object) -> None:
        seen.add(threading.current_thread().name)
        real_check(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_check.Checker, "_check", check)
    busy = threading.Event()
    other = threading.Thread(target=busy.wait, daemon=True)
    other.start()
    try:
        first = scan(store, Options())
        write(root, "top1/sub/f2.txt", "changed\n")
        write(root, "top4/sub/new.txt", "new\n")
        second = scan(store, Options())
    finally:
        busy.set()
        other.join()
        store.close()
    assert any(name.startswith("takeback-check-") for name in seen), seen
    assert second.tree != first.tree
    assert second.hashed_files == 2
    fresh = FolderStore.open(str(tmp_path / "fresh"), str(root), create=True)
    try:
        assert scan(fresh, Options()).tree == second.tree  # what a first scan finds
    finally:
        fresh.close()


_NAME = st.one_of(
    st.text(alphabet="abcXYZ019._- é", min_size=1, max_size=12),
    st.binary(min_size=1, max_size=8).map(lambda b: os.fsdecode(b.replace(b"/", b"_"))),
).filter(lambda n: n not in (".", "..") and "\0" not in n and "/" not in n)
_ENTRY = st.tuples(
    _NAME,
    st.sampled_from(["file", "exec", "folder", "link", "fifo", "ignored.log"]),
    st.integers(min_value=-(2**62), max_value=10**19),  # ns: before 1970, past 2262
    st.binary(max_size=40),
)


@settings(
    max_examples=examples(80),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entries=st.lists(_ENTRY, max_size=25))
def test_any_folder_gets_the_same_keys_from_both_listings(
    tmp_path: Path, entries: list[tuple[str, str, int, bytes]]
) -> None:
    """Random folders of random entries (names that are not UTF-8, times before 1970 and
    far ahead, folders, symlinks, FIFOs, ignored files): the native and the Python
    listing agree on every key, decision and stat."""
    root = Path(tempfile.mkdtemp(dir=tmp_path))  # a new folder for every example
    write(root, ".gitignore", "*.log\n")
    for name, kind, mtime, data in entries:
        path = root / (name + ".log" if kind == "ignored.log" else name)
        if os.path.lexists(path):
            continue
        if kind == "folder":
            path.mkdir()
            (path / "inner.txt").write_bytes(data)
        elif kind == "link":
            os.symlink(os.fsdecode(data.replace(b"\0", b"_")) or "target", path)
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            path.write_bytes(data)
            if kind == "exec":
                path.chmod(0o755)
        if kind != "link":
            os.utime(path, ns=(mtime, mtime))
    native = _listings(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_list, "_native_list", None)
        python = _listings(root)
    assert native == python
    for rel in {k.rpartition(":")[0] for k in native}:
        assert native[f"{rel}:False"][:-1] == native[f"{rel}:True"][:-1], rel
