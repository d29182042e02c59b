"""CLI layer: ``takeback du``: the store's size, per session, and what gc would free."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._render import size

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "the store's size, per session, and what gc would free"
AUTO_GC = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments (none of its own)."""


def run(ctx: Ctx) -> int:
    """Measure the store."""
    r = ctx.workspace().du()
    if ctx.json:
        ctx.emit_json(r.to_json())
        return 0
    # A database store's size is its rows' bytes, not blocks on this machine's disk.
    where = "of rows" if r.path.startswith(("postgresql://", "postgres://")) else "on disk"
    ctx.out(f"{r.path}: {size(r.disk)} {where}")
    ctx.out("  " + ", ".join(f"{name} {size(n)}" for name, n in r.files.items()))
    ctx.out(f"{r.objects:,} objects, {size(r.stored)} stored (compressed)")
    if r.sessions:
        width = max(len(s.name) for s in r.sessions)
        ctx.out(f"{'session':<{width}}  snapshots  turns  reached     only")
        for s in r.sessions:
            ctx.out(
                f"{s.name:<{width}}  {s.snapshots:>9,}  {s.turns:>5,}  "
                f"{size(s.reached):>9}  {size(s.only):>7}"
            )
    p = r.policy
    ctx.out(
        f"gc would free {size(r.gc_freed)} ({r.gc_objects:,} objects, {r.gc_snapshots:,} "
        f"snapshots, {r.gc_turns:,} turns) keeping the newest {p.keep_turns} turns of each "
        f"session and the last {p.keep_days:g} days"
    )
    return 0
