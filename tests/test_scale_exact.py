"""Exactness at size: a ``git checkout`` that rewrites 50,000 files, seen by the service.

A checkout rewrites tens of thousands of files in a few seconds: the watching service's
queue overflows, folders are replaced under their watches, and a snapshot it feeds must
still be exactly what a scan with no cache finds. Then a rewind puts the 50,000 files
back, and the next service-fed snapshot is again exactly a cache-less scan's, and the
files are byte for byte what they were. In the slow tier (``-m slow``); CI runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from takeback import Workspace

from ._service import full_tree, running_service
from .conftest import CLI

pytestmark = pytest.mark.slow

FILES = 50_000
PER_FOLDER = 25


def _write_tree(root: Path, version: int) -> None:
    for i in range(FILES):
        folder = root / f"pkg{i // PER_FOLDER:04d}"
        if i % PER_FOLDER == 0:
            folder.mkdir(exist_ok=True)
        (folder / f"m{i:05d}.py").write_bytes(b"# module %d version %d\n" % (i, version))


def _git(root: Path, *args: str) -> None:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
        GIT_CONFIG_NOSYSTEM="1",
        HOME=str(root.parent),
    )
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def _state(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, root)] = f.read()
    return out


def _snapshot(tb: CLI) -> dict[str, Any]:
    """A snapshot by the real command: its JSON, and the root tree it recorded."""
    doc: dict[str, Any] = json.loads(tb("snapshot", "--json").stdout)
    with Workspace(tb.root, store=tb.store) as ws:
        doc["tree"] = ws.resolve(doc["id"]).snapshot.tree
    return doc


def _fed_or_told(doc: dict[str, Any]) -> None:
    """The service fed the snapshot, or said why it could not (50,000 changes at once
    may overflow the kernel's event queue: then a full scan, which is exact too)."""
    scan = doc["scan"]
    assert scan["mode"] == "service" or scan["reason"] == "the inotify event queue overflowed", scan


def _cacheless(tb: CLI) -> str:
    """The root tree a scan with no cache finds now."""
    with Workspace(tb.root, store=tb.store) as ws:
        return full_tree(ws.open_store())


def test_a_checkout_of_50000_files_and_a_rewind_back_are_exact(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    _write_tree(ws_dir, 1)
    _git(ws_dir, "init", "-q", "-b", "main")
    _git(ws_dir, "add", "-A")
    _git(ws_dir, "commit", "-q", "-m", "one")
    _git(ws_dir, "checkout", "-q", "-b", "other")
    _write_tree(ws_dir, 2)
    _git(ws_dir, "commit", "-q", "-a", "-m", "two")
    _git(ws_dir, "checkout", "-q", "main")
    before_files = _state(ws_dir)
    assert len(before_files) == FILES

    tb("snapshot")  # the first snapshot: a full scan, and the cache the service uses
    with running_service(ws_dir, store_dir):
        before = _snapshot(tb)
        _git(ws_dir, "checkout", "-q", "other")  # rewrites every one of the 50,000
        after = _snapshot(tb)
        _fed_or_told(after)
        assert after["tree"] == _cacheless(tb)
        assert after["tree"] != before["tree"]

        tb("rewind", "--to", before["id"])
        assert _state(ws_dir) == before_files
        back = _snapshot(tb)
        _fed_or_told(back)
        assert back["tree"] == _cacheless(tb)
        # And the service answers again once the storm is over.
        (ws_dir / "pkg0000" / "m00000.py").write_bytes(b"# edited\n")
        last = _snapshot(tb)
        assert last["scan"] == {"mode": "service", "reason": "1 folder(s) changed"}
        assert last["tree"] == _cacheless(tb)
        assert back["tree"] == before["tree"]
