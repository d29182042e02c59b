"""CLI layer: ``takeback gc [--dry-run] [--keep-turns N] [--keep-days N]``.

``TAKEBACK_GC_PAUSE`` (seconds, for tests only): gc names each of its steps on stderr and
waits that long before it, so that a crash test can kill it inside any of them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING

from ._app import days, number
from ._render import size

if TYPE_CHECKING:
    from .. import GcResult
    from ._app import Ctx

HELP = "remove what the retention policy no longer keeps"
#: gc itself does not start another gc
AUTO_GC = False
PAUSE_ENV = "TAKEBACK_GC_PAUSE"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    p.add_argument(
        "--keep-turns", type=number, default=None, help="keep the newest N turns of each session"
    )
    p.add_argument(
        "--keep-days", type=days, default=None, help="keep everything from the last N days"
    )
    p.add_argument("--auto", action="store_true", help=argparse.SUPPRESS)


def summary(r: GcResult, verb: str = "Removed") -> str:
    """One line for people: what went (or would go)."""
    parts = []
    for count, word in (
        (len(r.sessions), "session"),
        (r.turns, "turn"),
        (r.snapshots, "snapshot"),
        (r.objects, "object"),
    ):
        if count:
            parts.append(f"{count:,} {word}{'s' if count != 1 else ''}")
    if not parts:
        return "Nothing to remove."
    return f"{verb} {', '.join(parts)} ({size(r.freed)} of stored data)."


def run(ctx: Ctx) -> int:
    """Run gc and say what it freed."""
    ws = ctx.workspace()
    raw = os.environ.get(PAUSE_ENV)
    wait = float(raw) if raw else 0.0

    def pause(step: str) -> None:
        if step == "wait":
            # One gc at a time: a person who typed `takeback gc` sees why it is quiet.
            print(
                "takeback: another gc of this store is running: waiting for it to end",
                file=sys.stderr,
                flush=True,
            )
        if wait:
            print(f"takeback: gc: {step}", file=sys.stderr, flush=True)
            time.sleep(wait)

    r = ws.gc(
        keep_turns=ctx.args.keep_turns,
        keep_days=ctx.args.keep_days,
        dry_run=ctx.args.dry_run,
        pause=pause,
    )
    if ctx.json:
        ctx.emit_json(r.to_json())
        return 0
    ctx.out(summary(r, "Would remove" if r.dry_run else "Removed"))
    if r.dry_run:
        ctx.out(f"The store takes {size(r.size_before)}.")
    else:
        ctx.out(f"The store takes {size(r.size_after)} (it took {size(r.size_before)}).")
    return 0
