"""Ops layer: finding the turn (or step) after which a command first fails (bisect).

The points are the states a session recorded, in order: the end of each turn (or of each
step, ``by="step"``). Between a good point (default: the session's baseline) and a bad
one (default: the workspace now), a binary search runs the command in a scratch copy of
the workspace at each point it tries, materialized from the store in a folder of its
own outside the workspace and removed afterwards. The workspace and the history are
never written, and neither is the store.

As ``git bisect run``: exit 0 is good, 125 cannot be tested (skip), any other is bad. A
skipped point is replaced by the untried point nearest the middle; when only skipped
points are left between the last good and the first bad one, the answer is a range.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import RefError, UsageError
from ..model import DIR, FILE, LINK
from ..store import Store
from ._refs import resolve
from ._snapshot import Recording

By = Literal["turn", "step"]
Verdict = Literal["good", "bad", "skip"]
#: The exit code that says "this point cannot be tested".
SKIP = 125


@dataclass(frozen=True)
class BisectPoint:
    """One state a session recorded: the end of a turn or of a step."""

    session: str
    turn: int | None
    step: int | None
    id: str
    label: str

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form."""
        return {
            "session": self.session,
            "turn": self.turn,
            "step": self.step,
            "id": self.id,
            "label": self.label,
        }


@dataclass(frozen=True)
class BisectRun:
    """One run of the command at one point."""

    point: BisectPoint
    exit_code: int
    verdict: Verdict
    setup_ms: int
    run_ms: int

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form."""
        return {
            **self.point.to_json(),
            "exit_code": self.exit_code,
            "verdict": self.verdict,
            "setup_ms": self.setup_ms,
            "run_ms": self.run_ms,
        }


@dataclass(frozen=True)
class BisectResult:
    """What a bisect found.

    Attributes:
        first_bad: the first point after which the command fails; None when none of
            the recorded points does (what fails came after the last one), or when
            skipped points leave it undecided (``undecided`` names them).
        runs: each point tried, in the order tried.
        points: how many points lay between good and bad.
        undecided: with skips, the points among which the first bad one lies.
        by: ``turn`` or ``step``.
    """

    first_bad: BisectPoint | None
    runs: tuple[BisectRun, ...]
    points: int
    undecided: tuple[BisectPoint, ...] = ()
    by: By = "turn"

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``bisect --json``)."""
        return {
            "first_bad": None if self.first_bad is None else self.first_bad.to_json(),
            "runs": [r.to_json() for r in self.runs],
            "points": self.points,
            "undecided": [p.to_json() for p in self.undecided],
            "by": self.by,
        }


def _points(store: Store, session: str, by: By) -> list[tuple[tuple[int, int], BisectPoint]]:
    """Every recorded end of a turn (or step), with its place: (n, 1); its start is (n, 0)."""
    meta = store.meta
    out: list[tuple[tuple[int, int], BisectPoint]] = []
    if by == "turn":
        rows = meta.turn_rows(session)
        last_step: dict[int, str] = {}
        for st in meta.steps(session):
            if st.turn is not None and st.after is not None:
                last_step[st.turn] = st.after
        for i, row in enumerate(rows):
            # Where the turn ended: its own snapshot, else its last step's, else the
            # state the next turn began from (a person's edits between may be in it).
            end = row.after or last_step.get(row.n)
            if end is None and i + 1 < len(rows):
                end = rows[i + 1].before
            if end is not None:
                out.append(((row.n, 1), BisectPoint(session, row.n, None, end, row.label)))
    else:
        for st in meta.steps(session):
            if st.after is not None:
                out.append(((st.n, 1), BisectPoint(session, st.turn, st.n, st.after, st.label)))
    return out


def _place(store: Store, session: str, by: By, snapshot_id: str) -> tuple[int, int] | None:
    """Where a snapshot lies among the points: at a turn's (step's) start or end."""
    meta = store.meta
    rows: Sequence[Any] = meta.turn_rows(session) if by == "turn" else meta.steps(session)
    for row in rows:
        if row.after == snapshot_id:
            return (row.n, 1)
        if row.before == snapshot_id:
            return (row.n, 0)
    if by == "step":
        # A turn's start or end among steps: before its first step, after its last.
        steps = [st for st in rows if st.turn is not None]
        for turn in meta.turn_rows(session):
            mine = [st.n for st in steps if st.turn == turn.n]
            if mine and turn.before == snapshot_id:
                return (min(mine), 0)
            if mine and turn.after == snapshot_id:
                return (max(mine), 1)
    return None


def bisect(
    rec: Recording,
    session: str,
    command: Sequence[str],
    *,
    good: str = "start",
    bad: str | None = None,
    by: By = "turn",
    env: Mapping[str, str] | None = None,
    cwd: str = "",
    on_run: Callable[[BisectRun], None] | None = None,
    scratch: str | None = None,
) -> BisectResult:
    """Find the first point between ``good`` and ``bad`` after which ``command`` fails.

    Args:
        rec: the open store and options.
        session: the session whose turns (or steps) are the points.
        command: the command line, run at each point tried.
        good: a ref the command passes at (default: the session's baseline).
        bad: a ref it fails at (None: the workspace now).
        by: ``turn`` (each turn's end) or ``step`` (each step's end).
        env: the command's environment (None: this process's).
        cwd: the folder, relative to the root, to run the command in (as the caller
            stood in the workspace).
        on_run: called after each run.
        scratch: where the scratch copies are made (default: the system's temp folder).

    Raises:
        RefError: a ref that names no snapshot, or one that is not a point of the
            session (a turn's or step's start or end).
        UsageError: no command, good not before bad, or nothing between them.
    """
    if not command:
        raise UsageError("bisect needs a command to run at each point (after --)")
    store = rec.store
    points = _points(store, session, by)
    good_id = resolve(store, good, session).snapshot.id
    good_at = (0, 0) if good == "start" else _place(store, session, by, good_id)
    if good_at is None:
        raise RefError(
            f"{good!r} is not the start or end of a {by} of session {session!r}", ref=good
        )
    # The bad end is taken as bad, as git bisect takes it: it is not run (and "now",
    # the default, needs no scan).
    bad_at: tuple[int, int] = (1 << 62, 0)
    if bad is not None:
        bad_id = resolve(store, bad, session).snapshot.id
        place = _place(store, session, by, bad_id)
        if place is None:
            raise RefError(
                f"{bad!r} is not the start or end of a {by} of session {session!r}", ref=bad
            )
        bad_at = place
    if not good_at < bad_at:
        raise UsageError(f"the good point ({good}) must come before the bad one ({bad or 'now'})")
    between = [p for at, p in points if good_at < at < bad_at]
    runs: list[BisectRun] = []
    verdicts: dict[int, Verdict] = {}
    lo, hi = -1, len(between)  # lo: last known good, hi: first known bad
    parent = scratch or tempfile.gettempdir()
    while hi - lo > 1:
        mid = _next(lo, hi, verdicts)
        if mid is None:
            break
        run = _run_at(store, between[mid], command, env, cwd, parent)
        runs.append(run)
        verdicts[mid] = run.verdict
        if on_run is not None:
            on_run(run)
        if run.verdict == "good":
            lo = mid
        elif run.verdict == "bad":
            hi = mid
    if hi - lo > 1:
        undecided = tuple(between[lo + 1 : hi + 1])
        return BisectResult(None, tuple(runs), len(between), undecided, by)
    first = between[hi] if hi < len(between) else None
    return BisectResult(first, tuple(runs), len(between), (), by)


def _next(lo: int, hi: int, verdicts: dict[int, Verdict]) -> int | None:
    """The untried point nearest the middle of (lo, hi); None when only skipped ones are left."""
    mid = (lo + hi) // 2
    for d in range(hi - lo):
        for i in (mid - d, mid + d):
            if lo < i < hi and i not in verdicts:
                return i
    return None


def _run_at(
    store: Store,
    point: BisectPoint,
    command: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str,
    parent: str,
) -> BisectRun:
    t0 = time.monotonic()
    snap = store.meta.snapshot(point.id)
    if snap is None:
        raise RefError(f"snapshot {point.id} is not in the store", ref=point.id)
    where = tempfile.mkdtemp(prefix="takeback-bisect-", dir=parent)
    try:
        materialize(store, snap.tree, where)
        t1 = time.monotonic()
        here = (
            os.path.join(where, cwd) if cwd and os.path.isdir(os.path.join(where, cwd)) else where
        )
        run_env = None if env is None else {**env, "TAKEBACK_BISECT_POINT": point.id}
        try:
            code = subprocess.run(list(command), cwd=here, env=run_env, check=False).returncode
        except OSError:
            code = 127  # not found, not executable: bad, as a shell would say
        t2 = time.monotonic()
    finally:
        shutil.rmtree(where, ignore_errors=True)
    verdict: Verdict = "good" if code == 0 else "skip" if code == SKIP else "bad"
    return BisectRun(point, code, verdict, int((t1 - t0) * 1000), int((t2 - t1) * 1000))


def materialize(store: Store, tree: str, dest: str) -> int:
    """Write a recorded tree into the empty folder ``dest``; return how many files were not kept.

    Folders get their modes last (a read-only folder is filled first). Files over the
    size limit were never kept, and are left out.
    """
    missing = 0
    modes: list[tuple[str, int]] = []
    umask = os.umask(0)
    os.umask(umask)
    stack = [(tree, dest)]
    while stack:
        oid, folder = stack.pop()
        for name, entry in store.objects.get_tree(oid).items():
            path = os.path.join(folder, name)
            if entry.kind == DIR:
                os.mkdir(path, 0o700)
                modes.append((path, entry.mode))
                stack.append((entry.oid, path))
            elif entry.kind == FILE:
                mode = stat.S_IMODE(entry.mode) or 0o644
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
                try:
                    data = memoryview(store.objects.get(entry.oid))
                    while data:
                        data = data[os.write(fd, data) :]
                    if mode & umask:
                        os.fchmod(fd, mode)  # the bits the umask took from the open
                finally:
                    os.close(fd)
            elif entry.kind == LINK:
                os.symlink(os.fsdecode(store.objects.get(entry.oid)), path)
            else:
                missing += 1
    for path, mode in reversed(modes):
        os.chmod(path, stat.S_IMODE(mode) or 0o755)
    return missing
