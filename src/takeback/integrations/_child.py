"""Integrations layer: running a command as a child that owns the terminal's signals.

``takeback run`` and ``takeback watch`` both start a command and record what it did.
A person's Ctrl-C (or a supervisor's SIGTERM) is meant for that command: it must reach
the child, and takeback must wait for the child to finish its own clean-up before it
records the step and exits with the child's status. :func:`forward_signals` is the one
place that does that; :func:`exit_status` turns a return code into a shell's status.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

#: signals passed on to the child (SIGINT and SIGQUIT only when they cannot have come
#: from the terminal, which sends them to the child itself)
FORWARDED = ("SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def exit_status(returncode: int) -> int:
    """Return a child's status as a shell reports it: 128+N when signal N killed it."""
    return returncode if returncode >= 0 else 128 - returncode


def _terminal_foreground() -> bool:
    """Return whether this process is in a terminal's foreground.

    If it is, the terminal sends its Ctrl-C and Ctrl-backslash to the child as well.
    """
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


class Forwarder:
    """Passes the signals this process gets on to one child (see :func:`forward_signals`).

    A signal that arrives before the child exists is kept and sent as soon as it starts,
    so a SIGTERM in that moment is not lost.
    """

    def __init__(self) -> None:
        self.from_terminal = _terminal_foreground()
        self.proc: subprocess.Popen[bytes] | None = None
        self._early: list[int] = []

    def handle(self, signum: int, _frame: FrameType | None = None) -> None:
        """Forward one signal (the signal handler)."""
        if self.from_terminal and signum in (signal.SIGINT, signal.SIGQUIT):
            return  # the terminal sent it to the child too; twice would be two Ctrl-Cs
        if self.proc is None:
            self._early.append(signum)
            return
        try:
            self.proc.send_signal(signum)
        except OSError:
            pass

    def start(
        self, cmd: Sequence[str], *, cwd: str, stdout: int | None = None
    ) -> subprocess.Popen[bytes]:
        """Start the child (stdio inherited) and forward to it from now on.

        Args:
            cmd: the command line.
            cwd: its folder.
            stdout: a descriptor for its stdout instead of ours (``run --json`` gives it
                stderr, so that stdout carries the one JSON document).

        Raises:
            FileNotFoundError: no such command.
            PermissionError: the command cannot be run.
        """
        self.proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=stdout)
        for signum in self._early:
            self.handle(signum)
        self._early.clear()
        return self.proc


@contextmanager
def forward_signals() -> Iterator[Forwarder]:
    """Forward the signals this process gets to the child started in the block.

    The handlers are in place before the child starts and stay until the block ends, so
    a Ctrl-C never interrupts takeback while the child cleans up: the caller waits for
    the child, records its status and returns it. Outside the main thread signals stay
    as they are.
    """
    fwd = Forwarder()
    numbers = [getattr(signal, name) for name in FORWARDED if hasattr(signal, name)]
    old: dict[int, Any] = {}
    try:
        for n in numbers:
            old[n] = signal.signal(n, fwd.handle)
    except ValueError:
        pass  # not the main thread: signals stay as they are
    try:
        yield fwd
    finally:
        for n, h in old.items():
            signal.signal(n, h)
