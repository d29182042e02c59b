"""CLI layer: ``takeback purge --session S | --all``: remove history for good."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .gc_cmd import summary

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "remove a session's history for good (--session S, or --all)"
AUTO_GC = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments (``--session`` is the common option)."""
    p.add_argument("--all", action="store_true", help="every session, and every snapshot")
    p.add_argument("--dry-run", action="store_true", help="only say what would be removed")


def run(ctx: Ctx) -> int:
    """Purge the session (or everything) and say what went."""
    from ..errors import UsageError

    named = getattr(ctx.args, "session", None)
    if ctx.args.all == (named is not None):
        raise UsageError("purge takes --session S or --all (one of them)")
    ws = ctx.workspace()
    r = ws.purge(named, everything=ctx.args.all, dry_run=ctx.args.dry_run)
    if ctx.json:
        ctx.emit_json(r.to_json())
        return 0
    if not (r.sessions or r.snapshots or r.objects):
        ctx.out("Nothing to purge.")
        return 0
    ctx.out(summary(r, "Would remove" if r.dry_run else "Removed"))
    return 0
