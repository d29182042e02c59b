"""CLI layer: small renderers shared by commands (ids, times, paths, progress)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .._types import short
from ..ops import quote_path as quote_path  # one quoting, the diff's and the lists'

#: A plan's groups, in the order shown: each letter's effect (``PlanItem.effect``'s words).
_EFFECT_ORDER = ("restore", "remove", "recreate")
_DONE = {"restore": "restored", "remove": "removed", "recreate": "recreated"}


def plan_lines(rows: Sequence[tuple[str, str]], *, would: bool, indent: str = "") -> list[str]:
    """A plan's lines grouped under a header saying what happens to them.

    The letters keep their meaning (what changed since the target: ``M``, ``A`` created
    since, ``D`` deleted since); the header says what the restore does about it, so that
    ``D examples/README`` is read under ``would recreate:``, never as "will delete".

    Args:
        rows: (effect, line) per path, in the order to show within a group.
        would: a plan not yet done (``would recreate:``); else what was done
            (``recreated:``).
        indent: put before each header.
    """
    out: list[str] = []
    for effect in _EFFECT_ORDER:
        lines = [line for e, line in rows if e == effect]
        if lines:
            out.append(f"{indent}{'would ' + effect if would else _DONE[effect]}:")
            out.extend(lines)
    return out


def sid(oid: str | None) -> str:
    """Return an id as people see it."""
    return short(oid) if oid else "-"


def size(n: int) -> str:
    """Return a byte count for people (``1.5 MB``; powers of 1000, as ``du --si``)."""
    value = float(n)
    for unit in ("bytes", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{n:,} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def when(ts: float) -> str:
    """Return a local timestamp for people."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def flush_out() -> None:
    """Flush stdout (a process started without one, ``>&-``, drops its output, as print does)."""
    if sys.stdout is not None:
        sys.stdout.flush()


def write_bytes(data: bytes) -> None:
    """Write bytes to stdout (a patch, a file as it was), all of them or an error.

    A write cut short (the reader went away, and SIGPIPE, which Python ignores,
    interrupted it) returns a short count instead of raising: writing the rest then
    raises BrokenPipeError, which ``cli.main`` turns into a quiet exit. A process started
    without stdout drops them.
    """
    if sys.stdout is None:
        return
    sys.stdout.flush()
    out = sys.stdout.buffer
    view = memoryview(data)
    while view:
        view = view[out.write(view) :]
    out.flush()


@contextmanager
def progress(label: str, enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """Yield a progress callback drawing a rich bar on a terminal, or None when piped."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task: Any = None

        def update(done: int, total: int) -> None:
            nonlocal task
            if task is None:
                task = bar.add_task(label, total=total)
            bar.update(task, completed=done)

        yield update


@contextmanager
def read_progress(label: str, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    """Show a progress bar on a terminal while a snapshot reads files.

    The number of files to read is not known ahead (the walk lists folders while the
    files already found are read), so the bar pulses and the count of files read, the
    rate and the time so far go beside it. Nothing is drawn before the scan reports its
    first few hundred files read: an unchanged snapshot reads none and shows nothing.

    Yields a callback taking that count, or None when piped (nothing is drawn then).
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )

    started = time.monotonic()
    shown: list[tuple[Progress, TaskID]] = []

    def update(files: int) -> None:
        if not shown:  # drawn from the first report on: a snapshot that reads little shows none
            bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:,} files read"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            bar.start()
            shown.append((bar, bar.add_task(label, total=None, rate="")))
        bar, task = shown[0]
        spent = time.monotonic() - started
        rate = f"{files / spent:,.0f}/s" if spent > 0 else ""
        bar.update(task, completed=files, rate=rate)

    try:
        yield update
    finally:
        if shown:
            shown[0][0].stop()
