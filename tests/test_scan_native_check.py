"""Scan layer: the check pass in C (``check_tree``) finds exactly the folders the check
pass in Python finds, and a full scan built on it is what a first scan records.

The C module checks a whole subtree without Python: it lists each folder, makes its two
digests (its own BLAKE2b) and compares them with the folder's cache record, and hands a
folder back to Python whenever it cannot decide alone (ignore files of its own, a listing
that changed, no record). A digest made differently, or a folder it decided that it
should have handed back, would make a full scan miss a change: each case is made here,
on real folders with a real git index, and the two passes compared.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takeback.ops import Options, scan
from takeback.ops._snapshot import stored_cache
from takeback.scan import _check, _list
from takeback.scan._cache import _PARTIAL
from takeback.scan._ignore import IgnoreRules
from takeback.store import FolderStore

from .conftest import NO_NATIVE, examples, write
from .test_scan import age

pytestmark = pytest.mark.skipif(NO_NATIVE, reason="this run leaves the native module out")


def _native() -> object:
    from takeback.scan import _listing

    return _listing


@settings(max_examples=examples(200), deadline=None)
@given(parts=st.lists(st.binary(max_size=300), max_size=6))
def test_the_native_digest_is_the_scans(parts: list[bytes]) -> None:
    """BLAKE2b written for the C module against hashlib's, across block boundaries."""
    digest = _native().digest  # type: ignore[attr-defined]
    assert digest(*parts) == _list._digest(*parts)
    joined = b"".join(p + b"\0" for p in parts)
    assert digest(*parts) == hashlib.blake2b(joined, digest_size=16).digest()


def _git(root: Path, *args: str) -> None:
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=str(root.parent))
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


#: Folders of the tree every example starts from; ``vendor`` is ignored by the root's
#: rules, and git tracks one file in it (the folder is walked with only that file kept).
_FOLDERS = ["src", "src/lib", "src/lib/deep", "docs", "vendor", "vendor/pkg", "logs"]
_ROOT_RULES = "*.log\nvendor/\n"


def _tree(root: Path) -> None:
    write(root, ".gitignore", _ROOT_RULES)
    for i, folder in enumerate(_FOLDERS):
        write(root, f"{folder}/f{i}.txt", f"file {i}\n")
        write(root, f"{folder}/g{i}.log", f"ignored {i}\n")
    write(root, "src/lib/.gitignore", "*.tmp\n")  # rules of its own, below the root
    write(root, "src/lib/deep/x.tmp", "ignored by src/lib's rules\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "add", "-f", "vendor/pkg/f5.txt")


#: What a step of an example does, at a folder of ``_FOLDERS`` (or the root, "").
_OPS = [
    "edit",  # same file, new bytes and size
    "touch",  # same bytes, a new mtime
    "chmod",  # a new mode
    "add-file",
    "add-ignored",  # a file the rules leave out: the listing changes, the stats kept do not
    "remove-file",
    "add-folder",
    "remove-folder",
    "add-rules",  # an ignore file of its own
    "git-add",  # the index changes: folders that consulted it decide again
    "replace",  # same size and mtime, another inode
]


def _apply(root: Path, op: str, folder: str, n: int) -> None:
    base = root / folder if folder else root
    if not base.is_dir():
        return
    files = sorted(p for p in base.iterdir() if p.is_file() and p.name != ".gitignore")
    if op == "edit" and files:
        files[n % len(files)].write_bytes(b"edited %d\n" % n * (n % 3 + 1))
    elif op == "touch" and files:
        os.utime(files[n % len(files)], ns=(10**18 + n, 10**18 + n))
    elif op == "chmod" and files:
        files[n % len(files)].chmod(0o700 if n % 2 else 0o640)
    elif op == "add-file":
        write(base, f"new{n}.txt", f"new {n}\n")
    elif op == "add-ignored":
        write(base, f"new{n}.log", f"ignored {n}\n")
    elif op == "remove-file" and files:
        files[n % len(files)].unlink()
    elif op == "add-folder":
        write(base, f"made{n}/inner.txt", f"inner {n}\n")
    elif op == "remove-folder":
        subs = sorted(p for p in base.iterdir() if p.is_dir() and p.name != ".git")
        if subs:
            import shutil

            shutil.rmtree(subs[n % len(subs)])
    elif op == "add-rules":
        write(base, ".takebackignore", "*.txt\n" if n % 2 else "made*/\n")
    elif op == "git-add":
        _git(root, "add", "-f", "--", str(base.relative_to(root) / "g*.log") if folder else ".")
    elif op == "replace" and files:
        st_ = files[n % len(files)].lstat()
        data = files[n % len(files)].read_bytes()
        files[n % len(files)].unlink()
        files[n % len(files)].write_bytes(data[::-1] if len(data) > 1 else data)
        os.utime(files[n % len(files)], ns=(st_.st_atime_ns, st_.st_mtime_ns))


_STEP = st.tuples(st.sampled_from(_OPS), st.sampled_from(["", *_FOLDERS]), st.integers(0, 50))


@settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_STEP, min_size=1, max_size=6))
def test_the_native_check_finds_what_the_python_check_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list[tuple[str, str, int]]
) -> None:
    """Random changes to a tree with nested rules, an ignored folder git tracks a file in
    and a real index: the C check and the Python check name the same folders, and the
    scan equals a first scan of the same tree."""
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    root = work / "ws"
    _tree(root)
    age(root)
    found: list[tuple[set[str], set[str]]] = []
    real = _check.Checker.dirty_dirs

    def both(self: _check.Checker, rules: object, key: bytes) -> list[str]:
        native = real(self, rules, key)  # type: ignore[arg-type]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_check, "_native_check", None)
            python = real(self, rules, key)  # type: ignore[arg-type]
        found.append((set(native), set(python)))
        return native

    monkeypatch.setattr(_check.Checker, "dirty_dirs", both)
    store = FolderStore.open(str(work / "store"), str(root), create=True)
    try:
        scan(store, Options(), use_service=False)
        for op, folder, n in steps:
            _apply(root, op, folder, n)
        result = scan(store, Options(), use_service=False)
    finally:
        store.close()
    assert found, "the second scan ran no check pass"
    native, python = found[-1]
    assert native == python
    monkeypatch.setattr(_check.Checker, "dirty_dirs", real)
    fresh = FolderStore.open(str(work / "fresh"), str(root), create=True)
    try:
        assert scan(fresh, Options(), use_service=False).tree == result.tree
    finally:
        fresh.close()


def test_each_case_the_native_check_hands_back(tmp_path: Path) -> None:
    """The folders it cannot decide alone come back to Python, with the excluded flag
    they are checked under; what it decided is the same as the Python check's."""
    root = tmp_path / "ws"
    _tree(root)
    age(root)
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    try:
        scan(store, Options(), use_service=False)
        _token, cache = stored_cache(store.meta)
    finally:
        store.close()
    assert cache is not None
    old = cache.folders
    opts = Options()  # what the scan above ran with: part of every key
    lister = _list.Lister(
        str(root), max_file_bytes=opts.max_file_bytes, exclude_env=opts.exclude_env, exclude=[]
    )
    rules = IgnoreRules.for_root(str(root), exclude_env=opts.exclude_env)
    # The key in force below the root (its .gitignore joined the rules), as the check
    # pass takes it from the root's listing.
    key = lister.listing("", rules, lister.root_key(), False, old[""], keep=False).key
    check = _native().check_tree  # type: ignore[attr-defined]
    fields = _check._CHECKED_FIELDS
    top = old[""]
    dirty: list[str] = []
    # src/lib has rules of its own: handed back, its parent decided here.
    assert check(str(root), "src", key, False, old, lister.index_sig, dirty, fields) == [
        ("src/lib", False)
    ]
    assert dirty == []
    # vendor/ is ignored, with a tracked file below: checked, its subfolder as excluded.
    assert "vendor" in top[_PARTIAL]
    dirty = []
    assert check(str(root), "vendor", key, True, old, lister.index_sig, dirty, fields) == []
    assert dirty == []
    # A new folder has no record; a changed listing is decided again in Python.
    write(root, "docs/new/a.txt", "new\n")
    dirty = []
    assert check(str(root), "docs", key, False, old, lister.index_sig, dirty, fields) == [
        ("docs", False)
    ]
    # Only a stat differs: named dirty here, nothing handed back.
    os.utime(root / "src" / "f0.txt", ns=(10**18, 10**18))
    dirty = []
    assert check(str(root), "src", key, False, old, lister.index_sig, dirty, fields) == [
        ("src/lib", False)
    ]
    assert dirty == ["src"]
    # A folder gone: handed back (Python says it is gone).
    dirty = []
    import shutil

    shutil.rmtree(root / "logs")
    assert check(str(root), "logs", key, False, old, lister.index_sig, dirty, fields) == [
        ("logs", False)
    ]
