"""Integrations layer: ``takeback watch``: records an agent that has no hooks.

The agent runs as a child with the terminal as it is (stdio inherited). The whole run is
one turn of the session, cut into command steps: a snapshot is taken before the child
starts, and each time file activity in the workspace settles (no change for ``settle``
milliseconds) the current step is finished (a snapshot after it, what it changed joins
the turn) and the next begins; when the child exits, the last step is finished. So step
N is the state at the N-th quiet point (step 1 the start), ``takeback undo`` takes back
the whole run, and the run's exit status is the child's.

The watcher only says *when* to take a step; *what* changed is what the snapshots find,
under the same scope rules as every snapshot. Activity that changed nothing in scope
(an ignored build folder) makes no step.

Once the child runs, nothing takeback does may end the watch before the child does: a
quiet point that fails (the store locked, a full disk, the root unreadable or gone) is
reported and skipped, and the next quiet point (or the child's exit) tries again. Paths
a snapshot could not read are named once each.

A run is its own session unless one is named: :func:`watch_session` names it
``watch-<command>-<n>``, so an undo of an agent's conversation never takes back another
agent's run.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._child import exit_status, forward_signals

if TYPE_CHECKING:
    from .. import Change, Step, Workspace

DEFAULT_SETTLE_MS = 1000
#: ``1``: ``takeback watch`` polls the tree's stats instead of asking inotify.
POLL_ENV = "TAKEBACK_WATCH_POLL"


@dataclass
class WatchResult:
    """What a watched run did."""

    exit_code: int
    session: str
    turn: int
    steps: list[Step] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    watching: bool = True
    #: what went wrong and was skipped (a quiet point, a snapshot), one line each
    problems: list[str] = field(default_factory=list)
    #: paths the snapshots could not read, with why, each once
    unreadable: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``--json``)."""
        return {
            "exit_code": self.exit_code,
            "session": self.session,
            "turn": self.turn,
            "watching": self.watching,
            "steps": [
                {
                    "step": s.n,
                    "label": s.label,
                    "before": s.before.id if s.before else None,
                    "after": s.after.id if s.after else None,
                    "changes": [{"path": p, "change": c} for p, c in s.changed],
                }
                for s in self.steps
            ],
            "changes": [c.to_json() for c in self.changes],
            "problems": list(self.problems),
            "unreadable": [{"path": p, "reason": why} for p, why in self.unreadable],
        }


class Activity:
    """Knows when files under a folder last changed (the service's watcher, in a thread).

    The same inotify watcher the watching service keeps (:class:`takeback.Watcher`)
    says which folders changed since its last mark; any change to the tree (not git's
    own folder, not the store) is activity. Where inotify is not to be had, the tree's
    stats are polled instead.

    Args:
        root: the folder to watch.
        ignored: folders whose changes are not activity (the store).
        settle_ms: the quiet time that ends a burst of activity.
    """

    def __init__(self, root: str, ignored: Sequence[str], settle_ms: int) -> None:
        self.root = root
        self._ignored = tuple(p.rstrip(os.sep) for p in ignored)
        self._step_s = max(10, min(50, settle_ms // 4)) / 1000
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._last: float | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="takeback-watch", daemon=True)
        self._watcher: Any = None

    def _loop(self) -> None:
        try:
            if self._watcher is None:
                self._poll()
                return
            import select

            w = self._watcher
            token = w.mark(None).token
            while not self._stop.is_set():
                ready, _, _ = select.select([w.fileno()], [], [], self._step_s)
                if not ready:
                    continue
                got = w.mark(token)
                token = got.token
                if got.dirs is None or got.dirs:
                    with self._lock:
                        self._last = time.monotonic()
        except BaseException as e:  # noqa: BLE001 - reported by start(); the run goes on
            self.error = e

    def _poll(self) -> None:
        """Without inotify: compare the tree's stats every step."""
        seen = self._signature()
        while not self._stop.wait(self._step_s):
            now = self._signature()
            if now != seen:
                seen = now
                with self._lock:
                    self._last = time.monotonic()

    def _signature(self) -> int:
        """A digest of every folder's and file's name, size and times under the root."""
        acc = 0
        stack = [self.root]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    for d in it:
                        if d.name == ".git" or d.path in self._ignored:
                            continue
                        try:
                            st = d.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        acc ^= hash((d.path, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
                        if d.is_dir(follow_symlinks=False):
                            stack.append(d.path)
            except OSError:
                continue
        return acc

    def start(self, timeout: float = 5.0, *, poll: bool | None = None) -> bool:
        """Start watching; return whether watching works (False: no steps until exit).

        ``poll`` (default: ``TAKEBACK_WATCH_POLL=1`` in the environment) compares the
        tree's stats instead of asking inotify: for file systems whose changes make no
        events here (network mounts, a VM's shared folder).
        """
        if poll is None:
            poll = os.environ.get(POLL_ENV, "").strip() in ("1", "on", "yes", "true")
        try:
            if poll:
                raise ImportError("polling asked for")
            from ..scan._watcher import Watcher
        except ImportError:  # no inotify here: the tree is polled
            self._watcher = None
        else:
            try:
                self._watcher = Watcher(self.root, exclude=self._ignored)
                self._watcher.start()
            except OSError as e:
                self.error = e
                return False
        self._thread.start()
        return self.error is None

    def settled(self, quiet_s: float) -> bool:
        """Return True, once per burst, when there was activity and then none for quiet_s."""
        with self._lock:
            if self._last is None or time.monotonic() - self._last < quiet_s:
                return False
            self._last = None
            return True

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        if self._watcher is not None:
            self._watcher.close()


def watch_session(ws: Workspace, cmd: Sequence[str]) -> str:
    """Return a new session's name for a watched run: ``watch-<command>-<n>``.

    ``<command>`` is the program's file name (characters other than letters, digits,
    ``.``, ``_`` and ``-`` become ``-``); ``<n>`` is one more than the highest number
    such a session of the workspace has, so runs of one agent are numbered in order.
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(cmd[0]) if cmd else "").strip("-")
    prefix = f"watch-{name or 'agent'}-"
    taken = [0]
    if ws.has_store():
        for info in ws.sessions():
            tail = info.name[len(prefix) :] if info.name.startswith(prefix) else ""
            if tail.isdigit():
                taken.append(int(tail))
    return f"{prefix}{max(taken) + 1}"


def _reason(e: BaseException) -> str:
    message = getattr(e, "message", None)
    return f"{type(e).__name__}: {message if isinstance(message, str) else e}"


def _changed_since(ws: Workspace, step: Step, session: str) -> bool:
    if step.before is None:
        return True
    return bool(ws.diff(step.before.id, None, session=session, patch=False).files)


def run_watched(
    ws: Workspace,
    cmd: Sequence[str],
    *,
    cwd: str,
    session: str,
    label: str,
    settle_ms: int = DEFAULT_SETTLE_MS,
    warn: Callable[[str], None] = lambda _m: None,
) -> WatchResult:
    """Run ``cmd`` as a child and record it as one turn, a step per burst of activity.

    Args:
        ws: the workspace.
        cmd: the command and its arguments.
        cwd: the folder the child starts in.
        session: the session's name.
        label: the turn's label (each step's is ``label #N``).
        settle_ms: how long files must stay quiet to end a step.
        warn: called with a line for people when something goes wrong (a snapshot).

    Returns:
        The child's status (128+N for signal N; 127 not found, 126 not runnable), the
        steps and the turn's change list.

    """
    problems: list[str] = []
    unreadable: dict[str, str] = {}

    def problem(text: str) -> None:
        problems.append(text)
        warn(text)

    def on_event(ev: dict[str, Any]) -> None:
        if ev.get("event") == "snapshot.failed":
            problem(f"snapshot failed, the agent runs on: {ev.get('reason')}")

    def note(done: Step) -> None:
        for snap in (done.before, done.after):
            for path, why in snap.unreadable if snap is not None else ():
                if path not in unreadable:
                    unreadable[path] = why
                    warn(f"cannot read {path} ({why}): not recorded")

    ws.on_event(on_event)
    s = ws.session(session)
    activity = Activity(ws.root, [ws.store_path], settle_ms)
    watching = False
    steps: list[Step] = []
    code = 127
    try:
        watching = activity.start()
        if not watching:
            warn(
                f"cannot watch {ws.root} ({activity.error or 'no events'}); "
                "only the snapshots at the start and the end will be taken"
            )
        turn = s.turn(label)
        step = turn.command(f"{label} #1").begin()
        note(step)
        with forward_signals() as fwd:
            try:
                proc = fwd.start(cmd, cwd=cwd)
            except FileNotFoundError:
                warn(f"{cmd[0]}: command not found")
            except PermissionError:
                warn(f"{cmd[0]}: permission denied")
                code = 126
            else:
                told_stopped = not watching
                while True:
                    try:
                        proc.wait(timeout=0.05)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    if activity.error is not None and not told_stopped:
                        told_stopped = True
                        problem(
                            f"watching stopped ({_reason(activity.error)}); the rest of "
                            "the run is recorded when the agent exits"
                        )
                    if not activity.settled(settle_ms / 1000):
                        continue
                    try:
                        if not _changed_since(ws, step, s.name):
                            continue
                        # The next step begins before this one finishes: a write that
                        # lands between the two snapshots is then in this step's changes
                        # (and the turn's), instead of in neither.
                        nxt = turn.command(f"{label} #{len(steps) + 2}").begin()
                        try:
                            step.finish()
                        finally:
                            note(step)
                            steps.append(step)
                            step = nxt
                    except Exception as e:  # noqa: BLE001 - the agent runs on, watched
                        problem(
                            f"quiet point skipped ({_reason(e)}); the agent runs on, and "
                            "the next quiet point tries again"
                        )
                code = exit_status(proc.returncode)
    finally:
        activity.stop()
    # The child has exited: its status is the run's, whatever recording it does.
    changes: list[Change] = []
    try:
        step.finish(exit_code=code)
    except Exception as e:  # noqa: BLE001 - the child's status is returned either way
        problem(f"the last step could not be finished ({_reason(e)})")
    note(step)
    steps.append(step)
    try:
        changes = turn.end()
    except Exception as e:  # noqa: BLE001 - as above
        problem(f"the run's turn could not be ended ({_reason(e)})")
    return WatchResult(
        code, s.name, turn.n, steps, changes, watching, problems, list(unreadable.items())
    )
