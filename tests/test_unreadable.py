"""Paths a snapshot cannot read: skipped and named, never deleted or written over.

One file or folder without read permission, or one path longer than PATH_MAX, once made
every snapshot fail, which with the hooks turned recording off for a whole session. Both
are made real: a path of 5,000 bytes built level by level through folder handles, and
``chmod 000``. The permission cases run the real command without the right to bypass
file permissions (as root, with ``CAP_DAC_OVERRIDE`` and ``CAP_DAC_READ_SEARCH`` dropped
by ``setpriv``, since root reads a ``chmod 000`` file), so the kernel refuses for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from .conftest import SRC, without_file_powers

LIMIT = 60


def run(
    args: list[str], ws: Path, store: Path, *, stdin: bytes = b"", check: int | None = 0
) -> subprocess.CompletedProcess[str]:
    """Run the real command as a user who cannot read what ``chmod 000`` closes."""
    prefix = without_file_powers()
    env = dict(os.environ, TAKEBACK_STORE=str(store), PYTHONPATH=SRC)
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "takeback", *args],
        cwd=ws,
        env=env,
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=LIMIT,
    )
    if check is not None:
        assert proc.returncode == check, proc.stdout + proc.stderr
    return proc


def snap(ws: Path, store: Path) -> dict[str, object]:
    return dict(json.loads(run(["snapshot", "--json"], ws, store).stdout))


@pytest.fixture
def closed(ws_dir: Path) -> Iterator[None]:
    """Nothing to set up; open every chmod-000 entry again so tmp_path can be removed."""
    yield None
    for dirpath, dirnames, _files in os.walk(ws_dir):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)


def test_an_unreadable_file_is_skipped_and_named(ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    (ws_dir / "secret.txt").write_text("s\n")
    (ws_dir / "secret.txt").chmod(0)
    got = snap(ws_dir, store_dir)
    assert got["files"] == 1
    assert got["unreadable"] == [{"path": "secret.txt", "reason": "permission denied"}]
    assert got["unreadable_count"] == 1
    # The size limit's list means what it meant.
    assert (got["skipped"], got["skipped_count"]) == ([], 0)
    text = run(["snapshot"], ws_dir, store_dir)
    assert "1 path(s) unreadable, not kept: secret.txt (permission denied)" in text.stderr
    log = json.loads(run(["log", "--json"], ws_dir, store_dir).stdout)
    assert log[0]["unreadable"] == [{"path": "secret.txt", "reason": "permission denied"}]


def test_an_unreadable_folder_is_skipped_and_named(
    ws_dir: Path, store_dir: Path, closed: None
) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    (ws_dir / "private").mkdir()
    (ws_dir / "private" / "p.txt").write_text("p\n")
    (ws_dir / "private").chmod(0)
    got = snap(ws_dir, store_dir)
    assert got["files"] == 1
    assert got["unreadable"] == [{"path": "private", "reason": "permission denied"}]
    # Unchanged, the next snapshot (from the scan's cache) names it again.
    again = snap(ws_dir, store_dir)
    assert again["unreadable"] == got["unreadable"]


def test_a_rewind_never_writes_over_or_removes_an_unreadable_file(
    ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "a.txt").write_text("a1\n")
    (ws_dir / "secret.txt").write_text("s1\n")
    first = snap(ws_dir, store_dir)["id"]
    (ws_dir / "secret.txt").write_text("s2 - a person's work\n")
    (ws_dir / "secret.txt").chmod(0)
    (ws_dir / "a.txt").write_text("a2\n")
    (ws_dir / "new-secret.txt").write_text("n\n")
    (ws_dir / "new-secret.txt").chmod(0)
    out = run(["rewind", "--to", str(first)[:12], "--json"], ws_dir, store_dir)
    doc = json.loads(out.stdout)
    assert (ws_dir / "a.txt").read_text() == "a1\n"
    # Present in the target and unreadable now: not written over. Absent from the
    # target: not removed.
    assert (ws_dir / "secret.txt").read_text() == "s2 - a person's work\n"
    assert (ws_dir / "secret.txt").stat().st_mode & 0o777 == 0
    assert (ws_dir / "new-secret.txt").read_text() == "n\n"
    assert doc["left"]["secret.txt"] == "unreadable, never read"
    assert doc["left"]["new-secret.txt"] == "unreadable, never read"
    assert {p["path"] for p in doc["plan"]} == {"a.txt"}


def test_a_rewind_never_opens_or_empties_an_unreadable_folder(
    ws_dir: Path, store_dir: Path, closed: None
) -> None:
    (ws_dir / "box").mkdir()
    (ws_dir / "box" / "old.txt").write_text("o\n")
    first = snap(ws_dir, store_dir)["id"]
    (ws_dir / "box" / "old.txt").unlink()
    (ws_dir / "box" / "mine.txt").write_text("m\n")
    (ws_dir / "box").chmod(0)
    (ws_dir / "empty").mkdir(mode=0)  # made after the target, and empty: still not removed
    (ws_dir / "empty").chmod(0)
    run(["rewind", "--to", str(first)[:12]], ws_dir, store_dir)
    assert (ws_dir / "box").stat().st_mode & 0o777 == 0
    assert (ws_dir / "empty").is_dir()
    (ws_dir / "box").chmod(0o755)
    assert sorted(p.name for p in (ws_dir / "box").iterdir()) == ["mine.txt"]


def test_a_readable_file_is_left_where_the_target_could_not_read_it(
    ws_dir: Path, store_dir: Path, closed: None
) -> None:
    (ws_dir / "box").mkdir()
    (ws_dir / "box" / "b.txt").write_text("b\n")
    (ws_dir / "box").chmod(0)
    target = snap(ws_dir, store_dir)["id"]
    (ws_dir / "box").chmod(0o755)
    (ws_dir / "box" / "b.txt").write_text("b2\n")
    (ws_dir / "box" / "c.txt").write_text("c\n")
    run(["rewind", "--to", str(target)[:12]], ws_dir, store_dir)
    # What the target never read is not taken to be absent: nothing in box/ is removed.
    assert sorted(p.name for p in (ws_dir / "box").iterdir()) == ["b.txt", "c.txt"]
    assert (ws_dir / "box" / "b.txt").read_text() == "b2\n"


def test_the_hook_goes_on_recording_past_an_unreadable_file(ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    (ws_dir / "secret.txt").write_text("s\n")
    (ws_dir / "secret.txt").chmod(0)
    payload = json.dumps(
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "s1",
            "cwd": str(ws_dir),
            "prompt": "go",
        }
    ).encode()
    proc = run(["hook", "claude-code"], ws_dir, store_dir, stdin=payload)
    assert (proc.stdout, proc.stderr) == ("", "")
    assert json.loads(run(["log", "--all", "--json"], ws_dir, store_dir).stdout)
    assert not (store_dir / "hook.log").exists()


# -- a path longer than PATH_MAX ---------------------------------------------------------

LONG_NAME = "d" * 200
LEVELS = 25  # 25 * 201 bytes: past Linux's PATH_MAX of 4,096 wherever the root is


def _deep(ws: Path) -> list[str]:
    """Make ws/deep/<200 bytes>/... 25 levels down, and a file at the bottom."""
    names = ["deep", *[LONG_NAME] * LEVELS]
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        wfd = os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(wfd, b"deep\n")
        os.close(wfd)
    finally:
        os.close(fd)
    return names


def _read_bottom(ws: Path, names: list[str]) -> bytes:
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        rfd = os.open("bottom.txt", os.O_RDONLY, dir_fd=fd)
        try:
            return os.read(rfd, 100)
        finally:
            os.close(rfd)
    finally:
        os.close(fd)


def test_a_path_longer_than_path_max_is_skipped_and_kept(ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a1\n")
    first = snap(ws_dir, store_dir)["id"]
    names = _deep(ws_dir)
    (ws_dir / "a.txt").write_text("a2\n")
    got = snap(ws_dir, store_dir)
    assert got["files"] == 1
    assert got["unreadable_count"] == 1
    [entry] = cast(list[dict[str, str]], got["unreadable"])
    assert entry["reason"] == "path too long"
    assert entry["path"].startswith("deep/" + LONG_NAME + "/")
    assert len(os.fsencode(os.path.join(ws_dir, entry["path"]))) >= 4096
    # A rewind to before the deep folders existed removes none of them.
    run(["rewind", "--to", str(first)[:12]], ws_dir, store_dir)
    assert (ws_dir / "a.txt").read_text() == "a1\n"
    assert _read_bottom(ws_dir, names) == b"deep\n"
