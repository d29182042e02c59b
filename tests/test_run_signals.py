"""``takeback run`` and signals: Ctrl-C reaches the command, which cleans up and exits.

The command is a shell script that traps SIGINT, takes its time to clean up (writes a
marker) and then dies of the signal; takeback must wait for it, record 130 in the step
and exit 130. Ctrl-C is sent as a terminal sends it (the whole foreground process group
of a real pseudo-terminal) and as a supervisor sends it (to takeback alone).
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from takeback import Workspace

from .conftest import CLI, SRC

SCRIPT = """\
cleanup() {
    sleep 0.6
    echo cleaned > cleaned.txt
    trap - INT
    kill -INT $$
}
trap cleanup INT
echo ready > ready.txt
while :; do sleep 0.05; done
"""


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert proc.poll() is None, "takeback ended before the command was ready"
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _recorded_exit_code(tb: CLI) -> int | None:
    with Workspace(tb.root, store=tb.store) as ws:
        steps = ws.session(ws.active_session()).steps()
    assert len(steps) == 1
    return steps[0].exit_code


def _env(tb: CLI) -> dict[str, str]:
    return dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)


def test_ctrl_c_on_a_terminal_lets_the_command_clean_up(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT)
    master, slave = os.openpty()

    def own_the_terminal() -> None:
        # A new session whose controlling terminal is the pty: takeback and its child are
        # the foreground process group, as when a person runs the command in a shell.
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "takeback", "run", "--", "sh", str(script)],
            cwd=ws_dir,
            env=_env(tb),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=own_the_terminal,
        )
        os.close(slave)
        _wait_for(ws_dir / "ready.txt", proc)
        os.write(master, termios.tcgetattr(master)[6][termios.VINTR])  # Ctrl-C
        code = proc.wait(timeout=30)
    finally:
        os.close(master)
    assert (ws_dir / "cleaned.txt").read_text() == "cleaned\n"
    assert code == 128 + signal.SIGINT
    assert _recorded_exit_code(tb) == 128 + signal.SIGINT


@pytest.mark.quick
def test_sigint_sent_to_takeback_is_forwarded_and_waited_for(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeback", "run", "--json", "--", "sh", str(script)],
        cwd=ws_dir,
        env=_env(tb),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _wait_for(ws_dir / "ready.txt", proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert (ws_dir / "cleaned.txt").read_text() == "cleaned\n"
    assert b'"exit_code": 130' in out
    assert _recorded_exit_code(tb) == 128 + signal.SIGINT
    # the clean-up happened before the snapshot after the step: it is one of its changes
    assert b'"cleaned.txt"' in out
