"""Special files where the scan reads by name, and a hook that must give up in time.

A FIFO named ``.gitignore``, ``.takebackignore``, ``.git/info/exclude`` or ``.git/index``
once made ``takeback snapshot`` and the Claude Code hook wait forever for a writer. Each
case is made real (``os.mkfifo``) and run as the real command with a timeout of its own,
so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import SRC

#: Far above what these tiny snapshots take, far below "forever".
LIMIT = 30


def run(
    args: list[str], ws: Path, store: Path, *, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run the real command; a hang fails the test (TimeoutExpired) after LIMIT seconds."""
    full = dict(os.environ, TAKEBACK_STORE=str(store), PYTHONPATH=SRC)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "takeback", *args],
        cwd=ws,
        env=full,
        input=stdin,
        capture_output=True,
        timeout=LIMIT,
    )


def prompt(ws: Path) -> bytes:
    return json.dumps(
        {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": str(ws), "prompt": "go"}
    ).encode()


def snapshots(ws: Path, store: Path) -> list[dict[str, object]]:
    proc = run(["log", "--all", "--json"], ws, store)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


FIFOS = [".gitignore", ".takebackignore", "sub/.gitignore", "sub/.takebackignore"]


def _tree_with_fifo(ws: Path, where: str) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    os.mkfifo(ws / where)


@pytest.mark.parametrize("where", FIFOS)
def test_a_fifo_ignore_file_does_not_block_a_snapshot(
    ws_dir: Path, store_dir: Path, where: str
) -> None:
    _tree_with_fifo(ws_dir, where)
    proc = run(["snapshot", "--json"], ws_dir, store_dir)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files"] == 2  # the FIFO is neither read nor kept
    # Status and a single path's scope (touch) read the same files.
    assert run(["status"], ws_dir, store_dir).returncode == 0
    assert run(["touch", "sub/a.txt"], ws_dir, store_dir).returncode == 0


@pytest.mark.parametrize("where", FIFOS)
def test_a_fifo_ignore_file_does_not_block_the_hook(
    ws_dir: Path, store_dir: Path, where: str
) -> None:
    _tree_with_fifo(ws_dir, where)
    proc = run(["hook", "claude-code"], ws_dir, store_dir, stdin=prompt(ws_dir))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert snapshots(ws_dir, store_dir)  # the session was recorded
    assert not (store_dir / "hook.log").exists()


@pytest.mark.parametrize("where", ["info/exclude", "index"])
def test_a_fifo_in_the_git_folder_does_not_block_a_snapshot(
    ws_dir: Path, store_dir: Path, where: str
) -> None:
    subprocess.run(["git", "init", "-q", str(ws_dir)], check=True)
    (ws_dir / ".gitignore").write_text("*.log\n")  # an ignored entry makes the scan ask the index
    (ws_dir / "x.log").write_text("log\n")
    (ws_dir / "a.txt").write_text("a\n")
    target = ws_dir / ".git" / where
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    proc = run(["snapshot", "--json"], ws_dir, store_dir)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files"] == 2  # .gitignore and a.txt
    assert run(["touch", "x.log"], ws_dir, store_dir).returncode == 0


def test_a_fifo_named_dot_git_does_not_block_a_snapshot(ws_dir: Path, store_dir: Path) -> None:
    os.mkfifo(ws_dir / ".git")
    (ws_dir / "a.txt").write_text("a\n")
    proc = run(["snapshot", "--json"], ws_dir, store_dir)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files"] == 1


def test_a_symlinked_gitignore_is_not_followed(
    ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    # git (2.32 and later) reads no .gitignore through a symlink in the work tree.
    outside = tmp_path / "rules"
    outside.write_text("a.txt\n")
    (ws_dir / ".gitignore").symlink_to(outside)
    (ws_dir / "a.txt").write_text("a\n")
    proc = run(["snapshot", "--json"], ws_dir, store_dir)
    assert json.loads(proc.stdout)["files"] == 2  # the link itself and a.txt


def test_the_hook_gives_up_in_time_and_fails_open(ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    assert run(["snapshot"], ws_dir, store_dir).returncode == 0
    # Another process holds the store's exclusive lock and never lets go (a stuck rewind):
    # the hook's snapshot would wait for it forever.
    fd = os.open(store_dir / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        proc = run(
            ["hook", "claude-code"],
            ws_dir,
            store_dir,
            stdin=prompt(ws_dir),
            env={"TAKEBACK_HOOK_TIMEOUT": "1"},
        )
        took = time.monotonic() - started
    finally:
        os.close(fd)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert took < 10
    lines = (store_dir / "hook.log").read_text().splitlines()
    assert len(lines) == 1
    assert "UserPromptSubmit" in lines[0] and "gave up after 1 s" in lines[0]


def test_the_hook_bound_is_configurable(ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    # A bound that is not a number is logged and the default is used: the call still works.
    proc = run(
        ["hook", "claude-code"],
        ws_dir,
        store_dir,
        stdin=prompt(ws_dir),
        env={"TAKEBACK_HOOK_TIMEOUT": "soon"},
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert snapshots(ws_dir, store_dir)
    assert "TAKEBACK_HOOK_TIMEOUT" in (store_dir / "hook.log").read_text()
    # 0 turns the bound off.
    proc = run(
        ["hook", "claude-code"],
        ws_dir,
        store_dir,
        stdin=prompt(ws_dir).replace(b'"go"', b'"again"'),
        env={"TAKEBACK_HOOK_TIMEOUT": "0"},
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def test_a_first_full_scan_gets_the_longer_bound(ws_dir: Path, store_dir: Path) -> None:
    from takeback.integrations.claude_code._call import HookCall
    from takeback.integrations.claude_code._deadline import FIRST_SCAN_TIMEOUT, Deadline
    from takeback.integrations.claude_code._hook import run as run_hook

    class Recording(Deadline):
        asked: list[float]

        def extend(self, seconds: float) -> None:
            self.asked.append(seconds)

    (ws_dir / "a.txt").write_text("a\n")
    env = {"TAKEBACK_STORE": str(store_dir)}
    asked = []
    for text in ("first", "second"):
        deadline = Recording(30, HookCall(), env)
        deadline.asked = []
        raw = prompt(ws_dir).replace(b'"go"', f'"{text}"'.encode())
        assert run_hook(raw, HookCall(), env, deadline=deadline) is not None
        asked.append(deadline.asked)
    # Only the call that reads every file (nothing scanned here yet) may run longer.
    assert asked == [[FIRST_SCAN_TIMEOUT], []]
