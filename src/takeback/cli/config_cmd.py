"""CLI layer: ``takeback config [--keep-turns N] [--keep-days N] [--auto-gc on|off]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._app import days, number
from ._render import when

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "show or set the retention policy gc applies"
AUTO_GC = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "--keep-turns", type=number, default=None, help="keep the newest N turns of each session"
    )
    p.add_argument(
        "--keep-days", type=days, default=None, help="keep everything from the last N days"
    )
    p.add_argument(
        "--auto-gc", choices=["on", "off"], default=None, help="run gc by itself once a day"
    )


def run(ctx: Ctx) -> int:
    """Set what is given, then show the policy."""
    ws = ctx.workspace()
    a = ctx.args
    if a.keep_turns is not None or a.keep_days is not None or a.auto_gc is not None:
        policy = ws.set_policy(
            keep_turns=a.keep_turns,
            keep_days=a.keep_days,
            auto=None if a.auto_gc is None else a.auto_gc == "on",
        )
    else:
        policy = ws.policy()
    last = ws.last_gc()
    if ctx.json:
        ctx.emit_json({**policy.to_json(), "last_gc": last})
        return 0
    ctx.out(f"keep-turns {policy.keep_turns}")
    ctx.out(f"keep-days {policy.keep_days:g}")
    ctx.out(f"auto-gc {'on' if policy.auto else 'off'}")
    ctx.out(f"last gc {when(last) if last else 'never'}")
    return 0
