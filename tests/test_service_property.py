"""Property: whatever the file system does, a snapshot the service feeds is a full scan's.

Random operations, the ones that once blinded the service among them (hard links and
writes through them, exchanges of folders, the root replaced, mounts and unmounts where
this process may mount, a queue overflow), run against one running service; after every
batch, the snapshot it feeds must have the tree, the file count and the counts of a scan
with no cache at all.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takeback._service_client import ask_service
from takeback.ops import Options, scan
from takeback.store import FolderStore, Store

from ._service import can_mount, full_scan, running_service
from .test_service import KINDS as BASIC_KINDS
from .test_service import _apply, _dirs, _files

pytestmark = pytest.mark.slow

KINDS = (
    *BASIC_KINDS,
    "hardlink",
    "write-linked",
    "exchange",
    "replace-root",
    "mount",
    "umount",
    "overflow",
)
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_n = itertools.count()


class World:
    """One workspace with its store and running service, shared by every example."""

    def __init__(self, base: Path, can_mount: bool) -> None:
        self.root = base / "ws"
        self.outside = base / "outside"
        self.store_dir = base / "store"
        self.can_mount = can_mount
        self.mounts: list[Path] = []
        self.root.mkdir()
        self.outside.mkdir()
        for d in ("", "d0", "d1", "d1/s", "d2"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
            for i in range(2):
                (self.root / d / f"f{i}").write_bytes(f"{d} {i}\n".encode())
        self.store: Store = FolderStore.open(str(self.store_dir), str(self.root), create=True)

    def busy(self, path: Path) -> bool:
        """Whether a mount lies at or below ``path`` (it cannot be moved or removed)."""
        return any(m == path or path in m.parents for m in self.mounts)

    def unmount_all(self) -> None:
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(m)], check=False, capture_output=True)
        self.mounts.clear()

    def apply(self, kind: str, seed: int, data: bytes) -> None:
        try:
            self._apply(kind, seed, data)
        except OSError as e:
            # A move across a mount's edge, or of a folder a mount is on: the file
            # system refused it (what it did before refusing stays, and is scanned).
            if e.errno not in (errno.EXDEV, errno.EBUSY):
                raise

    def _apply(self, kind: str, seed: int, data: bytes) -> None:
        n = next(_n)
        root = self.root
        dirs = [d for d in _dirs(root) if not self.busy(d)]
        files = [f for f in _files(root) if not any(m in f.parents for m in self.mounts)]
        if kind in BASIC_KINDS:
            if any(self.busy(d) for d in _dirs(root) if d != root) and kind in (
                "rename-dir",
                "move-out",
                "delete",
                "deep",
            ):
                return  # what would move or remove a mount point
            _apply(root, self.outside, kind, seed, data, n)
        elif kind == "hardlink" and files and len(dirs) > 1:
            src = files[seed % len(files)]
            os.link(src, dirs[(seed // 3) % len(dirs)] / f"ln{n}")
        elif kind == "write-linked":
            linked = [f for f in files if f.stat().st_nlink > 1]
            if linked:
                with open(linked[seed % len(linked)], "ab") as f:
                    f.write(data + b"\n")
        elif kind == "exchange":
            cands = [d for d in dirs if d != root]
            if len(cands) >= 2:
                a = cands[seed % len(cands)]
                b = cands[(seed // 5) % len(cands)]
                if a != b and a not in b.parents and b not in a.parents:
                    libc = ctypes.CDLL(None, use_errno=True)
                    libc.renameat2(
                        _AT_FDCWD,
                        os.fsencode(a),
                        _AT_FDCWD,
                        os.fsencode(b),
                        ctypes.c_uint(_RENAME_EXCHANGE),
                    )
        elif kind == "replace-root" and not self.mounts:
            away = self.outside / f"old-root{n}"
            root.rename(away)
            root.mkdir()
            for child in list(away.iterdir())[: 1 + seed % 3]:
                child.rename(root / child.name)
        elif kind == "mount" and self.can_mount and len(self.mounts) < 2:
            cands = [d for d in dirs if d != root]
            if cands:
                target = cands[seed % len(cands)]
                subprocess.run(["mount", "-t", "tmpfs", "none", str(target)], check=True)
                self.mounts.append(target)
                (target / f"on{n}").write_bytes(data)
        elif kind == "umount" and self.mounts:
            target = self.mounts.pop(seed % len(self.mounts))
            subprocess.run(["umount", str(target)], check=True)
        elif kind == "overflow":
            ask_service(str(self.store_dir), {"op": "fault", "kind": "overflow"})


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path, can_mount(tmp_path))
    try:
        with running_service(w.root, w.store_dir, faults=True):
            assert scan(w.store, Options()).mode == "full"
            yield w
    finally:
        w.unmount_all()
        w.store.close()
        shutil.rmtree(w.outside, ignore_errors=True)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(KINDS), st.integers(0, 10**6), st.binary(max_size=8)),
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_every_snapshot_the_service_feeds_is_a_full_scans(
    world: World, batches: list[list[tuple[str, int, bytes]]]
) -> None:
    for batch in batches:
        for kind, seed, data in batch:
            world.apply(kind, seed, data)
        got = scan(world.store, Options())
        full = full_scan(world.store)
        assert got.tree == full.tree, (batch, got.mode, got.reason)
        assert (got.files, got.skipped_count, got.unreadable_count) == (
            full.files,
            full.skipped_count,
            full.unreadable_count,
        ), batch
