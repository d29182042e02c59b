"""Property: random file operations split into steps; rewinding to any step is byte-exact.

Each example builds a workspace through a random sequence of operations (write, append,
delete, rename, chmod, symlink, mkdir, rmdir, ignored-file writes), taking a snapshot at
random points. Then it rewinds to every snapshot in a random order and checks the folder is
exactly what it was (bytes, permission bits, links, empty folders), and that ignored files
were left as they were just before the rewind.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takeback import Workspace

pytestmark = pytest.mark.slow

NAMES = ["a", "b", "d/e", "g/h/i", "d/link"]
DIRS = ["d", "g/h", "empty"]
CONTENT = st.binary(max_size=64) | st.sampled_from([b"", b"line\n", b"\0\1\2", b"x" * 300])

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), CONTENT),
    st.tuples(st.just("append"), st.sampled_from(NAMES), CONTENT),
    st.tuples(st.just("delete"), st.sampled_from(NAMES + DIRS), st.just(b"")),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES).map(str.encode)),
    st.tuples(
        st.just("chmod"),
        st.sampled_from(NAMES + DIRS),
        st.sampled_from([b"600", b"644", b"755", b"700"]),
    ),
    st.tuples(
        st.just("symlink"),
        st.sampled_from(NAMES),
        st.sampled_from([b"a", b"d", b"missing", b"../outside", b"/etc"]),
    ),
    st.tuples(st.just("mkdir"), st.sampled_from(DIRS), st.just(b"")),
    st.tuples(st.just("ignored"), st.sampled_from(["x.log", "d/y.log"]), CONTENT),
    st.tuples(st.just("snapshot"), st.just(""), st.just(b"")),
    st.tuples(st.just("snapshot"), st.just(""), st.just(b"")),
)


def remove(p: Path) -> None:
    if p.is_symlink() or p.is_file():
        p.unlink()
    elif p.is_dir():
        shutil.rmtree(p)


def ensure_parent(root: Path, rel: str) -> Path:
    p = root / rel
    parent = p.parent
    # A file or link where a folder is needed is replaced, as an agent's tool would.
    cur = root
    for part in Path(rel).parent.parts:
        cur = cur / part
        if cur.is_symlink() or (cur.exists() and not cur.is_dir()):
            cur.unlink()
    parent.mkdir(parents=True, exist_ok=True)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    return p


def apply(root: Path, kind: str, rel: str, arg: bytes) -> None:
    if kind in ("write", "ignored"):
        p = ensure_parent(root, rel)
        if p.is_symlink():
            p.unlink()
        p.write_bytes(arg)
    elif kind == "append":
        p = ensure_parent(root, rel)
        if p.is_symlink():
            p.unlink()
        with open(p, "ab") as f:
            f.write(arg)
    elif kind == "delete":
        remove(root / rel)
    elif kind == "rename":
        src, dst = root / rel, arg.decode()
        if (src.is_file() or src.is_symlink()) and rel != dst:
            target = ensure_parent(root, dst)
            if target.is_symlink() or target.exists():
                remove(target)
            if src.exists() or src.is_symlink():
                os.rename(src, target)
    elif kind == "chmod":
        p = root / rel
        if p.exists() and not p.is_symlink():
            p.chmod(int(arg.decode(), 8) | (0o700 if p.is_dir() else 0o600))
    elif kind == "symlink":
        p = ensure_parent(root, rel)
        if p.is_symlink() or p.exists():
            remove(p)
        p.symlink_to(arg.decode())
    elif kind == "mkdir":
        p = root / rel
        cur = root
        for part in Path(rel).parts:
            cur = cur / part
            if cur.is_symlink() or (cur.exists() and not cur.is_dir()):
                cur.unlink()
        p.mkdir(parents=True, exist_ok=True)


def state(root: Path, *, ignored: bool) -> dict[str, tuple[str, int, bytes]]:
    out: dict[str, tuple[str, int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if rel == ".gitignore":
                continue
            if rel.endswith(".log") != ignored:
                if not (ignored and p.is_dir() and not p.is_symlink()):
                    continue
            st_ = p.lstat()
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("l", 0, os.readlink(p).encode())
            elif stat.S_ISDIR(st_.st_mode):
                if not ignored:
                    out[rel] = ("d", stat.S_IMODE(st_.st_mode), b"")
            else:
                out[rel] = ("f", stat.S_IMODE(st_.st_mode), p.read_bytes())
    return out


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(op, min_size=1, max_size=25), order=st.randoms(use_true_random=False))
def test_rewind_to_every_snapshot_is_exact(
    tmp_path: Path, ops: list[tuple[str, str, bytes]], order: object
) -> None:
    import random

    assert isinstance(order, random.Random)
    base = Path(os.environ["HOME"]).parent / f"case-{order.random()}"
    root = base / "ws"
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("*.log\n")
    try:
        with Workspace(root, store=base / "store") as ws:
            session = ws.session("s")
            taken = [(session.baseline, state(root, ignored=False))]
            for kind, rel, arg in ops:
                if kind == "snapshot":
                    info = ws.snapshot(session="s")
                    taken.append((info.id, state(root, ignored=False)))
                else:
                    apply(root, kind, rel, arg)
            info = ws.snapshot(session="s")
            taken.append((info.id, state(root, ignored=False)))
            order.shuffle(taken)
            for sid, expected in taken:
                ignored_before = state(root, ignored=True)
                result = ws.rewind(sid, session="s")
                got = state(root, ignored=False)
                # A folder the target lacks stays when ignored files live in it (they are
                # never deleted), and the rewind names it.
                for kept in result.kept_dirs:
                    assert any(k.startswith(kept + "/") for k in ignored_before)
                    got = {
                        k: v
                        for k, v in got.items()
                        if not (k == kept or k.startswith(kept + "/")) or k in expected
                    }
                assert got == expected
                assert state(root, ignored=True) == ignored_before
    finally:
        shutil.rmtree(base, ignore_errors=True)
