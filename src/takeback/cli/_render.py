"""CLI layer: small renderers shared by commands (ids, times, paths, progress)."""

from __future__ import annotations

import os
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


def write_bytes(data: bytes) -> None:
    """Write bytes to stdout (a patch, a file as it was), all of them or an error.

    A write cut short (the reader went away, and SIGPIPE, which Python ignores,
    interrupted it) returns a short count instead of raising: writing the rest then
    raises BrokenPipeError, which ``cli.main`` turns into a quiet exit.
    """
    sys.stdout.flush()
    out = sys.stdout.buffer
    view = memoryview(data)
    while view:
        view = view[out.write(view):]
    out.flush()


_ESCAPES = {0x07: "\\a", 0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0B: "\\v",
            0x0C: "\\f", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\"}


def quote_path(path: str) -> str:
    r"""Return a path as people read it in one-line-per-path output, quoted as git does.

    A name with a control character, a double quote, a backslash or any byte from 0x80 up
    (non-ASCII, or not UTF-8 at all) is C-quoted inside double quotes, as git prints it
    with ``core.quotePath``: ``\n``, ``\t``, ``\"``, ``\\`` and three-digit octal
    escapes for the other bytes, so each path stays on its line and its bytes can be
    told apart. Other names are printed as they are. ``--json`` keeps names unquoted.
    """
    raw = os.fsencode(path)
    if all(0x20 <= b < 0x7F and b not in (0x22, 0x5C) for b in raw):
        return path
    out = []
    for b in raw:
        if b in _ESCAPES:
            out.append(_ESCAPES[b])
        elif b < 0x20 or b >= 0x7F:
            out.append(f"\\{b:03o}")
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


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
