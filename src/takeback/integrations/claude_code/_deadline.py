"""Integrations layer: what one ``takeback hook`` process was given, and its time bound.

Loaded by the relay too (a hook call the watching service runs keeps its bound in the
caller's process), so it imports nothing of the library until the bound expires.
Agent-neutral: every agent's hook call runs under one.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ._call import HookCall
    from ._payload import Payload

#: How long one hook call may run before it gives up (``TAKEBACK_HOOK_TIMEOUT``, seconds;
#: 0 turns the bound off). Far above what a call takes on 100,000 files (under a second,
#: unless it must read every file), far below "forever".
DEFAULT_TIMEOUT = 30.0
#: The bound of a call that takes the workspace's first full snapshot (nothing scanned
#: there yet, so every file is read: 8-14 s on 100,000 files, minutes on millions). Giving
#: up would throw that work away and make every later call start it again, so it may run
#: as long as Claude Code itself lets a command hook run by default.
FIRST_SCAN_TIMEOUT = 600.0
TIMEOUT_ENV = "TAKEBACK_HOOK_TIMEOUT"


def _signals() -> Any:
    """The signal functions and numbers the bound uses, from the C module under ``signal``.

    ``signal`` itself wraps them in enums, which cost a hook call's start-up 2 ms; the
    bound needs none of what it adds (its names and values are the same).
    """
    import _signal  # type: ignore[import-not-found]  # the stubs name only ``signal``

    return _signal


class Deadline:
    """A wall-clock bound on one hook call (``SIGALRM``, so only in the main thread).

    On expiry, whatever the call is doing (waiting for a lock, a hung file system), one
    line goes to ``hook.log`` and the process exits 0 at once, with nothing on stdout or
    stderr: Claude Code waits for the hook, and a recorder must never hold the agent up.
    What the call had written is safe to abandon at any point: the store writes objects
    before anything names them, and a step begun but not finished is finished later.

    Args:
        seconds: the bound (0 or less: none).
        call: the call's options (where to log when no workspace was made yet).
        env: the environment (``TAKEBACK_STORE``, ``CLAUDE_PROJECT_DIR``).
        problem: a line to log about the bound itself (a value that is not a number).
    """

    def __init__(
        self, seconds: float, call: HookCall, env: Mapping[str, str], *, problem: str | None = None
    ) -> None:
        self.seconds = seconds
        self.problem = problem
        self.payload: Payload | None = None
        self.log_dir: str | None = None
        self._call = call
        self._env = env
        self._started = 0.0
        self._fired = False
        self._saved: Any = None
        self._log: Any = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], call: HookCall) -> Deadline:
        """Return the bound ``TAKEBACK_HOOK_TIMEOUT`` asks for (default 30 s)."""
        raw = env.get(TIMEOUT_ENV, "").strip()
        if not raw:
            return cls(DEFAULT_TIMEOUT, call, env)
        try:
            seconds = float(raw)
        except ValueError:
            seconds = float("nan")
        if seconds != seconds or seconds in (float("inf"), float("-inf")):
            return cls(
                DEFAULT_TIMEOUT,
                call,
                env,
                problem=(
                    f"{TIMEOUT_ENV}={raw!r} is not a number of seconds; using {DEFAULT_TIMEOUT:g} s"
                ),
            )
        return cls(seconds, call, env)

    def start(self) -> None:
        """Arm the bound (nothing happens when it is off or signals are out of reach)."""
        signal = _signals()
        if self.seconds <= 0 or not hasattr(signal, "setitimer"):
            return
        try:
            self._saved = signal.signal(signal.SIGALRM, self._expire)
        except ValueError:  # not the main thread: no bound rather than no hook
            return
        from . import _log  # loaded now: its expiry must not import (it may interrupt one)

        self._log = _log
        self._started = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def extend(self, seconds: float) -> None:
        """Let the call run ``seconds`` from its start in all, when that is longer."""
        signal = _signals()
        if self._started == 0.0 or seconds <= self.seconds:
            return
        self.seconds = seconds
        left = self._started + seconds - time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))

    def stop(self) -> None:
        """Disarm the bound and put back the handler it replaced."""
        signal = _signals()
        if self._started == 0.0:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._saved)
        self._started = 0.0

    def _expire(self, _signum: int, _frame: object) -> None:
        signal = _signals()
        if self._fired:
            os._exit(0)  # logging itself hung: leave without it
        self._fired = True
        try:
            signal.setitimer(signal.ITIMER_REAL, 5)
            log = self._log
            where = self.log_dir or log.fallback_log_dir(
                self._call,
                self._call.store or self._env.get("TAKEBACK_STORE") or None,
                self.payload,
                self._env,
            )
            log.append_log(
                where,
                log.log_line(
                    self.payload,
                    (
                        f"gave up after {self.seconds:g} s ({TIMEOUT_ENV}); this call was not "
                        "recorded in full"
                    ),
                ),
            )
        finally:
            os._exit(0)
