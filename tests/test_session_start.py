"""Claude Code's SessionStart: the first snapshot starts in the background, and prompts wait.

End to end, with the real ``takeback hook claude-code`` command on a real folder: the
SessionStart call returns at once while a detached process takes the baseline; the
first prompt waits for that process instead of reading every file a second time.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from takeback.store import FolderStore

from .conftest import CLI, SRC

SESSION = "sess-1"


def _fill(ws: Path, folders: int = 12, files: int = 25) -> int:
    for d in range(folders):
        sub = ws / f"pkg{d}" / "mod"
        sub.mkdir(parents=True)
        for i in range(files):
            (sub / f"f{i}.py").write_text(f"# {d}/{i}\n" + "x = 1\n" * (i + 1))
    return folders * files


def _payload(ws: Path, **p: Any) -> bytes:
    return json.dumps({"session_id": SESSION, "cwd": str(ws), **p}).encode()


def _lock_held(store: Path) -> bool:
    fd = os.open(store / "claude-code" / "baseline.lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _waits_for_lock(store: Path, pid: int) -> bool:
    """Return whether process ``pid`` is blocked on the baseline lock (``/proc/locks``)."""
    st = os.stat(store / "claude-code" / "baseline.lock")
    file = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with open("/proc/locks") as locks:
        return any(
            line.split()[1] == "->" and line.split()[5:7] == [str(pid), file] for line in locks
        )


def _snapshots(tb: CLI) -> list[dict[str, Any]]:
    doc = json.loads(tb("log", "--all", "--json").stdout)
    return list(doc["snapshots"] if isinstance(doc, dict) else doc)


@pytest.mark.quick
def test_the_first_prompt_waits_for_the_baseline_begun_at_session_start(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    n = _fill(ws_dir)
    debug = {"TAKEBACK_HOOK_DEBUG": "1"}
    # An empty store whose lock this test holds: the background snapshot cannot finish
    # until the test lets it, so what happens meanwhile is certain.
    store = FolderStore.open(str(store_dir), os.path.realpath(ws_dir), create=True)
    try:
        with store.lock(exclusive=True):
            t0 = time.monotonic()
            tb(
                "hook",
                "claude-code",
                input=_payload(ws_dir, hook_event_name="SessionStart", source="startup"),
                env=debug,
            )
            returned = time.monotonic() - t0
            # The hook is back (its output pipes closed) while the baseline is under way.
            assert _lock_held(store_dir)
            assert returned < 30
            payload = store_dir.parent / "prompt.json"
            payload.write_bytes(_payload(ws_dir, hook_event_name="UserPromptSubmit", prompt="go"))
            with payload.open("rb") as stdin:
                prompt = subprocess.Popen(
                    [sys.executable, "-m", "takeback", "hook", "claude-code"],
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=ws_dir,
                    env={
                        **os.environ,
                        "TAKEBACK_STORE": str(store_dir),
                        "PYTHONPATH": SRC,
                        **debug,
                    },
                )
            # The prompt waits for the baseline: it blocks on the baseline's lock (a
            # fixed pause could end before a slow machine's prompt got there).
            deadline = time.monotonic() + 60
            while not _waits_for_lock(store_dir, prompt.pid):
                assert prompt.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
    finally:
        store.close()
    out, err = prompt.communicate(timeout=120)
    assert (prompt.returncode, out, err) == (0, b"", b"")
    deadline = time.monotonic() + 60
    while _lock_held(store_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _lock_held(store_dir)  # the background process is done and gone

    snaps = _snapshots(tb)
    baselines = [s for s in snaps if s["kind"] == "baseline"]
    # One baseline, the background one: the prompt did not read every file again.
    assert len(baselines) == 1 and baselines[0]["session"] == SESSION
    log = (store_dir / "hook.log").read_text()
    assert "SessionStart session=sess-1: ok" in log and "baseline started" in log
    assert "baseline " in log and " taken" in log
    assert "turn 1 begun (after the baseline taken in the background)" in log
    files = json.loads(tb("snapshot", "--json").stdout)["files"]
    assert files == n


def test_a_recorded_workspace_starts_nothing_at_session_start(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    _fill(ws_dir, folders=2, files=3)
    tb("snapshot")
    before = _snapshots(tb)
    tb(
        "hook",
        "claude-code",
        input=_payload(ws_dir, hook_event_name="SessionStart", source="resume"),
        env={"TAKEBACK_HOOK_DEBUG": "1"},
    )
    assert not (store_dir / "claude-code" / "baseline.lock").exists()
    log = (store_dir / "hook.log").read_text()
    assert "session start (resume): nothing to start" in log
    assert _snapshots(tb) == before  # its baseline is the first prompt's business


def test_hooks_install_puts_in_session_start(tb: CLI, ws_dir: Path) -> None:
    tb("hooks", "install", "claude-code", "--command", "takeback hook claude-code")
    settings = json.loads((ws_dir / ".claude" / "settings.json").read_text())
    assert settings["hooks"]["SessionStart"] == [
        {"hooks": [{"type": "command", "command": "takeback hook claude-code"}]}
    ]
