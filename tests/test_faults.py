"""Faults: a full disk, a file that vanishes mid-scan, an unreadable file.

A full store disk is made real with a small tmpfs where this machine lets us mount one;
the faults that cannot be made real on demand (a full disk under the workspace at one
exact file, a file deleted between the listing and the read) are injected at the one
system call they hit, around the real call.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from takeback import Workspace
from takeback.cli import main
from takeback.errors import RestoreError, ScanError, StoreError
from takeback.scan import _list


def test_a_full_disk_under_the_store_fails_cleanly_and_the_store_still_opens(
    tmp_path: Path,
) -> None:
    mnt = tmp_path / "small"
    mnt.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("this machine does not let tests mount a small filesystem")
    try:
        root = tmp_path / "ws"
        root.mkdir()
        (root / "small.txt").write_text("fits\n")
        with Workspace(root, store=mnt / "store") as ws:
            first = ws.snapshot()
        (root / "noise.bin").write_bytes(os.urandom(2 << 20))  # does not compress
        with Workspace(root, store=mnt / "store") as ws:
            with pytest.raises(StoreError, match="full"):
                ws.snapshot()
        with Workspace(root, store=mnt / "store") as ws:
            assert [s.id for s in ws.log()] == [first.id]
            (root / "noise.bin").unlink()
            (root / "small.txt").write_text("changed\n")
            ws.rewind(first.id)
        assert (root / "small.txt").read_text() == "fits\n"
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_full_disk_during_a_rewind_reports_and_can_be_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    for name in ("a", "b", "c"):
        (root / f"{name}.txt").write_text(f"{name} v1\n")
    store = tmp_path / "store"
    with Workspace(root, store=store) as ws:
        first = ws.snapshot()
    for name in ("a", "b", "c"):
        (root / f"{name}.txt").write_text(f"{name} v2\n")

    from takeback._fs import SafeRoot

    real_write = SafeRoot.write_file
    calls = {"n": 0}

    def full_after_one(self: SafeRoot, rel: str, data: bytes, mode: int) -> None:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self, rel, data, mode)

    monkeypatch.setattr(SafeRoot, "write_file", full_after_one)
    code = main(["rewind", "--root", str(root), "--store", str(store), "--to", first.id[:8]])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 1
    assert "restored: a.txt" in err and "not restored: b.txt" in err
    assert "put it all back with: takeback rewind --to" in err
    assert not any(p.name.startswith(".takeback-tmp") for p in root.iterdir())
    pre = err.split("takeback rewind --to ")[1].split()[0]
    assert main(["rewind", "--root", str(root), "--store", str(store), "--to", pre]) == 0
    assert [(root / f"{n}.txt").read_text() for n in "abc"] == ["a v2\n", "b v2\n", "c v2\n"]


def test_a_file_that_vanishes_mid_scan_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "stays.txt").write_text("s\n")
    (root / "goes.txt").write_text("g\n")

    real_open = os.open

    def delete_then_open(path: str, flags: int, *args: object) -> int:
        if path.endswith("goes.txt"):
            os.unlink(path)  # another process deletes it between the listing and the read
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", delete_then_open)
    with Workspace(root, store=tmp_path / "store") as ws:
        info = ws.snapshot()
    assert info.files == 1


def test_an_unreadable_file_is_one_clear_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An unreadable file once failed the whole snapshot (exit 2): it is skipped and named
    # now (tests/test_unreadable.py makes it real), and only an unreadable root fails.
    root = tmp_path / "ws"
    root.mkdir()
    (root / "secret.txt").write_text("s\n")
    (root / "other.txt").write_text("o\n")

    real_open = os.open

    def denied(path: str, flags: int, *args: object) -> int:
        if path.endswith("secret.txt"):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", denied)
    code = main(["snapshot", "--root", str(root), "--store", str(tmp_path / "store")])
    err = capsys.readouterr().err
    assert code == 0
    assert err.strip() == (
        "takeback: warning: 1 path(s) unreadable, not kept: secret.txt (permission denied)"
    )
    info = Workspace(root, store=tmp_path / "store").snapshot()
    assert (info.files, info.unreadable, info.unreadable_count) == (
        1,
        (("secret.txt", "permission denied"),),
        1,
    )

    real_scandir = os.scandir

    def root_denied(path: str) -> object:
        if os.fspath(path) == str(root):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_scandir(path)

    def root_open_denied(path: str, flags: int, *args: object) -> int:
        if os.fspath(path) == str(root):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    real_native = vars(_list)["_native_list"]

    def root_native_denied(path: str, stats: bool = False) -> object:
        # The C listing opens the folder itself: it fails there as the real one would.
        if os.fspath(path) == str(root):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        assert real_native is not None
        return real_native(path, stats=stats)

    # The root cannot be listed, whether by name (scandir), through a handle (open), or by
    # the C module that lists folders.
    monkeypatch.setattr(os, "scandir", root_denied)
    monkeypatch.setattr(os, "open", root_open_denied)
    if real_native is not None:
        monkeypatch.setattr(_list, "_native_list", root_native_denied)
    with pytest.raises(ScanError, match="cannot read the workspace root"):
        Workspace(root, store=tmp_path / "store").snapshot()


def test_restore_error_carries_what_happened() -> None:
    e = RestoreError("x", restored=["a"], failed=["b"], undo_id="abc")
    assert (e.exit_code, e.restored, e.failed, e.undo_id) == (1, ["a"], ["b"], "abc")
