"""A full disk, for real: the store on a small tmpfs that a filler file fills.

A snapshot that cannot be written fails cleanly (the command runs, the hook exits 0
with nothing on stdout, a ``snapshot.failed`` event says why), the store stays sound,
and gc still runs, and gives room back to the file system. Mounting needs root (or
CAP_SYS_ADMIN); without it the test is skipped. The mount lives in tmp_path and is
taken down after the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import takeback

from .conftest import CLI, write


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)
        if os.path.ismount(disk):
            subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(bytes(1 << 16))
                f.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_fails_snapshots_cleanly_and_gc_still_makes_room(
    small_disk: Path, ws_dir: Path
) -> None:
    store = small_disk / "store"
    tb = CLI(ws_dir, store)
    for i in range(20):
        write(ws_dir, f"f{i}.txt", os.urandom(2000).hex())
    tb("snapshot")
    tb("gc")  # the first gc writes the room the store keeps for the next ones
    assert (store / "reserve").stat().st_size == 4 << 20
    for _ in range(6):  # each run rewrites one 400 kB file: old versions are garbage
        tb("run", "--", "sh", "-c", "head -c 400000 /dev/urandom > r.bin")
    _fill(small_disk)

    # A command runs all the same; its snapshots fail and say so.
    r = tb("run", "--", "sh", "-c", "head -c 300000 /dev/urandom > big.bin")
    assert "snapshot failed, the command runs anyway" in r.stderr
    assert (ws_dir / "big.bin").stat().st_size == 300000
    # The hook fails open: exit 0, nothing on stdout.
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "s1",
        "prompt": "go on",
        "cwd": str(ws_dir),
    }
    h = tb("hook", "claude-code", input=json.dumps(payload).encode())
    assert h.stdout == ""
    # The library says it with an event.
    seen: list[dict[str, object]] = []
    with takeback.Workspace(ws_dir, store=store) as ws:
        ws.on_event(seen.append)
        with ws.session().turn("on a full disk") as turn:
            turn.touch("f1.txt")
            write(ws_dir, "f1.txt", "changed on a full disk\n")
        assert any(e["event"] == "snapshot.failed" for e in seen), seen
    # The store is sound, and still readable on the full disk.
    assert tb("fsck", "--read-data").stdout.startswith("The store is sound")

    # gc runs on the full disk and gives room back to the file system.
    free_before = shutil.disk_usage(small_disk).free
    g = json.loads(tb("gc", "--keep-turns", "1", "--keep-days", "0", "--json").stdout)
    assert g["removed"]["objects"] > 0 and g["size_after"] < g["size_before"]
    assert shutil.disk_usage(small_disk).free > free_before + 500_000
    assert tb("fsck", "--read-data").stdout.startswith("The store is sound")
    # Recording works again.
    tb("run", "--", "sh", "-c", "echo again > again.txt")
    last = json.loads(tb("log", "--json").stdout)[0]["id"]
    assert tb("show", f"{last}:again.txt").stdout == "again\n"
    assert tb("fsck", "--read-data").returncode == 0
