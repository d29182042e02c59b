"""Base layer: the one safe writer refuses to leave the root or follow a symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from takeback._fs import SafeRoot, atomic_write, to_rel
from takeback.errors import PathError


@pytest.mark.parametrize(
    "rel", ["", "/etc/passwd", "../x", "a/../../x", "a//b", ".git/config", "sub/.git/HEAD", "./a"]
)
def test_unsafe_paths_are_refused(tmp_path: Path, rel: str) -> None:
    with pytest.raises(PathError):
        SafeRoot(str(tmp_path)).write_file(rel, b"x", 0o644)


def test_never_writes_through_a_symlinked_folder(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(PathError, match="symlink"):
        SafeRoot(str(root)).write_file("link/f.txt", b"x", 0o644)
    assert list(outside.iterdir()) == []


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "victim.txt"
    root.mkdir()
    outside.write_text("keep")
    (root / "f").symlink_to(outside)
    SafeRoot(str(root)).write_file("f", b"new", 0o640)
    assert outside.read_text() == "keep"
    assert not (root / "f").is_symlink() and (root / "f").read_bytes() == b"new"
    assert (root / "f").stat().st_mode & 0o777 == 0o640


def test_to_rel_refuses_outside_paths(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    assert to_rel(str(root), "sub/x") == "sub/x"
    assert to_rel(str(root), str(root / "sub" / "x")) == "sub/x"
    assert to_rel(str(root), "x", base=str(root / "sub")) == "sub/x"
    with pytest.raises(PathError):
        to_rel(str(root), str(tmp_path / "elsewhere"))
    with pytest.raises(PathError):
        to_rel(str(root), "../x")


def test_atomic_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    target = folder / "f.json"
    atomic_write(str(target), b"{}")
    atomic_write(str(target), b"[]")
    assert target.read_bytes() == b"[]"
    assert os.listdir(folder) == ["f.json"]


def test_atomic_write_can_keep_the_mode_of_the_file_it_replaces(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    target = folder / "settings.json"
    old = os.umask(0o077)
    try:
        atomic_write(str(target), b"{}", mode=0o644, keep_mode=True)
        assert stat.S_IMODE(target.stat().st_mode) == 0o644  # exactly, not less the umask
        target.chmod(0o640)
        atomic_write(str(target), b"[]", mode=0o644, keep_mode=True)
        assert stat.S_IMODE(target.stat().st_mode) == 0o640
        atomic_write(str(target), b"[1]")  # without it: a new file of ``mode`` less the umask
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
    finally:
        os.umask(old)
    assert target.read_bytes() == b"[1]"
    assert os.listdir(folder) == ["settings.json"]
