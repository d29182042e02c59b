"""``takeback watch``: an agent without hooks, run as a child of the real command.

The child writes, pauses, writes, pauses, deletes and exits 3: the steps must match the
pauses, a rewind to each must give the exact state, and the exit status must be 3.
Signals sent to ``takeback watch`` reach the child.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import CLI, SRC, files_state, without_file_powers

CHILD = """\
import os, sys, time
pause = float(sys.argv[1])
open("a.txt", "w").write("A\\n")
os.makedirs("sub", exist_ok=True)
open("sub/b.txt", "w").write("B\\n")
time.sleep(pause)
open("c.txt", "w").write("C\\n")
open("a.txt", "a").write("more\\n")
time.sleep(pause)
os.remove("a.txt")
sys.exit(3)
"""


def test_steps_match_the_pauses_and_rewind_is_exact(tb: CLI, ws_dir: Path, tmp_path: Path) -> None:
    (ws_dir / "keep.txt").write_text("keep\n")
    (ws_dir / ".gitignore").write_text("ignored/\n")
    script = tmp_path / "agent.py"
    script.write_text(CHILD)
    s0 = files_state(ws_dir)
    proc = tb(
        "watch",
        "--settle",
        "250",
        "--json",
        "-m",
        "agent run",
        "--",
        sys.executable,
        str(script),
        "1.0",
        check=3,
    )
    result = json.loads(proc.stdout)
    assert result["exit_code"] == 3 and result["watching"] is True
    steps = result["steps"]
    assert [sorted((c["path"], c["change"]) for c in s["changes"]) for s in steps] == [
        [("a.txt", "created"), ("sub/b.txt", "created")],
        [("a.txt", "updated"), ("c.txt", "created")],
        [("a.txt", "deleted")],
    ]
    assert [s["label"] for s in steps] == ["agent run #1", "agent run #2", "agent run #3"]
    assert {c["path"]: c["status"] for c in result["changes"]} == {
        "sub": "created",
        "sub/b.txt": "created",
        "c.txt": "created",
    }  # a.txt came and went
    assert "recorded turn" not in proc.stderr  # --json: the summary is the document

    final = files_state(ws_dir)
    s1 = dict(s0, **{"a.txt": ("f", b"A\n"), "sub": ("d", b""), "sub/b.txt": ("f", b"B\n")})
    s2 = dict(s1, **{"a.txt": ("f", b"A\nmore\n"), "c.txt": ("f", b"C\n")})
    assert final == {k: v for k, v in s2.items() if k != "a.txt"}
    for ref, want in [
        ("1", s0),
        ("2", s1),
        ("3", s2),
        (steps[-1]["after"], final),
        ("start", s0),
        (steps[0]["before"], s0),
    ]:
        tb("rewind", "--to", ref)
        assert files_state(ws_dir) == want, ref

    tb("rewind", "--to", steps[-1]["after"])
    out = tb("undo").stdout  # the whole run was one turn
    assert out.startswith("Undid turn 1 of session ") and files_state(ws_dir) == s0


def test_quiet_activity_out_of_scope_makes_no_step(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / ".gitignore").write_text("build/\n")
    code = (
        "import os, time; os.makedirs('build'); open('build/x','w').write('x'); "
        "time.sleep(0.8); open('out.txt','w').write('o')"
    )
    proc = tb("watch", "--settle", "150", "--json", "--", sys.executable, "-c", code)
    steps = json.loads(proc.stdout)["steps"]
    assert [[c["path"] for c in s["changes"]] for s in steps] == [["out.txt"]]


def test_signals_pass_through_and_the_summary_goes_to_stderr(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    code = (
        "import signal, sys, time\n"
        "def bye(n, f):\n"
        "    open('got-%d.txt' % n, 'w').write('bye')\n"
        "    sys.exit(7)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "open('ready.txt', 'w').write('ready')\n"
        "time.sleep(30)\n"
    )
    env = dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeback", "watch", "--", sys.executable, "-c", code],
        cwd=ws_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (ws_dir / "ready.txt").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 7
    assert out == ""
    assert "recorded turn 1" in err
    assert (ws_dir / f"got-{signal.SIGTERM.value}.txt").exists()
    log = json.loads(tb("log", "--json").stdout)
    assert [s["kind"] for s in log][:2] == ["step-after", "step"]


def test_a_child_killed_by_a_signal_and_a_missing_command(tb: CLI, ws_dir: Path) -> None:
    code = "import os, signal; open('x','w').write('x'); os.kill(os.getpid(), signal.SIGKILL)"
    tb("watch", "--", sys.executable, "-c", code, check=128 + signal.SIGKILL)
    assert (ws_dir / "x").exists()
    proc = tb("watch", "--", "no-such-command-here", check=127)
    assert "command not found" in proc.stderr
    proc = tb("watch", check=2)
    assert "nothing to run" in proc.stderr


@pytest.mark.quick
def test_a_watched_run_is_its_own_session(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    base = {"session_id": "claude-1", "cwd": str(ws_dir)}
    for p in (
        {"hook_event_name": "UserPromptSubmit", "prompt": "edit a"},
        {
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_use_id": "t1",
            "tool_input": {"file_path": "a.txt"},
        },
    ):
        tb("hook", "claude-code", input=json.dumps({**base, **p}).encode())
    (ws_dir / "a.txt").write_text("claude\n")
    tb("hook", "claude-code", input=json.dumps({**base, "hook_event_name": "Stop"}).encode())

    code = "open('other.txt', 'w').write('other agent\\n')"
    result = json.loads(tb("watch", "--json", "--", sys.executable, "-c", code).stdout)
    assert result["session"] != "claude-1" and result["session"].startswith("watch-")
    again = json.loads(tb("watch", "--json", "--", sys.executable, "-c", "pass").stdout)
    assert again["session"] not in ("claude-1", result["session"])

    # Claude's undo takes back Claude's turn and nothing of the other agent's run.
    tb("undo", "--session", "claude-1")
    assert (ws_dir / "a.txt").read_text() == "a\n"
    assert (ws_dir / "other.txt").read_text() == "other agent\n"
    tb("undo", "--session", result["session"])
    assert not (ws_dir / "other.txt").exists()

    # --session and $TAKEBACK_SESSION still name the session.
    named = tb("watch", "--json", "--session", "mine", "--", sys.executable, "-c", "pass")
    assert json.loads(named.stdout)["session"] == "mine"
    env = {"TAKEBACK_SESSION": "from-env"}
    by_env = tb("watch", "--json", "--", sys.executable, "-c", "pass", env=env)
    assert json.loads(by_env.stdout)["session"] == "from-env"


QUIET_FAILS = """\
import os, sys, time
root, pause = os.getcwd(), float(sys.argv[1])
open("a.txt", "w").write("A\\n")
os.makedirs("closed")
open("closed/x.txt", "w").write("x\\n")
os.chmod("closed", 0)
time.sleep(pause)  # a quiet point with a folder nobody may read
open("b.txt", "w").write("B\\n")
os.chmod(root, 0)
time.sleep(pause)  # a quiet point where the workspace itself cannot be read
os.chmod(root, 0o755)
open(os.path.join(root, "c.txt"), "w").write("C\\n")
time.sleep(pause)  # the next quiet point works again
sys.exit(5)
"""


def test_a_quiet_point_that_fails_does_not_end_the_watch(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    prefix = without_file_powers()
    script = tmp_path / "agent.py"
    script.write_text(QUIET_FAILS)
    store_dir.mkdir()
    env = dict(os.environ, TAKEBACK_STORE=str(store_dir), PYTHONPATH=SRC)
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "takeback", "watch", "--settle", "300", "--json"]
        + ["--", sys.executable, str(script), "1.2"],
        cwd=ws_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    (ws_dir / "closed").chmod(0o755)
    ws_dir.chmod(0o755)
    assert proc.returncode == 5, proc.stderr
    result = json.loads(proc.stdout)
    assert result["exit_code"] == 5
    assert {u["path"] for u in result["unreadable"]} == {"closed"}
    assert result["problems"], result
    assert "closed" in proc.stderr and "quiet point" in proc.stderr
    done = sorted(c["path"] for s in result["steps"] for c in s["changes"])
    assert done == ["a.txt", "b.txt", "c.txt", "closed"]  # the folder is kept, not its file
    assert {c["path"] for c in result["changes"]} == {"a.txt", "b.txt", "c.txt", "closed"}
    # b.txt, written before the failed quiet point, is in the step after it
    assert [c["path"] for c in result["steps"][1]["changes"]] == ["b.txt", "c.txt"]
    assert (ws_dir / "c.txt").exists()


@pytest.mark.parametrize("poll", [False, True])
def test_activity_is_seen_by_the_watcher_and_by_polling(tmp_path: Path, poll: bool) -> None:
    from takeback.integrations._watch import Activity

    root = tmp_path / "tree"
    (root / "a" / "b").mkdir(parents=True)
    store = tmp_path / "tree" / "store-inside"
    store.mkdir()
    act = Activity(str(root), [str(store)], settle_ms=100)
    assert act.start(poll=poll)
    try:
        time.sleep(0.2)
        assert not act.settled(0.05)  # nothing happened
        (store / "x").write_text("the store's own writes are not activity\n")
        time.sleep(0.3)
        assert not act.settled(0.05)
        (root / "a" / "b" / "f.txt").write_text("activity\n")
        deadline = time.monotonic() + 5
        while not act.settled(0.1) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert time.monotonic() < deadline, "the write was never seen as activity"
        assert not act.settled(0.1)  # once per burst
    finally:
        act.stop()
