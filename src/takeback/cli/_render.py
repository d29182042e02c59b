"""CLI layer: small renderers shared by commands (ids, times, progress)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .._types import short


def sid(oid: str | None) -> str:
    """Return an id as people see it."""
    return short(oid) if oid else "-"


def when(ts: float) -> str:
    """Return a local timestamp for people."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


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
def spinner(label: str, enabled: bool) -> Iterator[Callable[[int], None] | None]:
    """Show a spinner on a terminal while long work runs, with a count of files read.

    Yields a callback taking that count, or None when piped (nothing is drawn then).
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console

    with Console(stderr=True).status(label) as status:

        def update(files: int) -> None:
            status.update(f"{label} {files:,} files read")

        yield update
