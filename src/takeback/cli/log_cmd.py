"""CLI layer: ``takeback log``: sessions, turns, steps and snapshots, newest first."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ._app import number
from ._render import sid, when

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "show the history, newest first"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("-n", "--limit", type=number, default=None, help="show at most N snapshots")
    p.add_argument("--all", action="store_true", help="every session, not just the current")


def run(ctx: Ctx) -> int:
    """Print the snapshots."""
    ws = ctx.workspace()
    session = None if ctx.args.all else ctx.session
    snaps = ws.log(session, limit=ctx.args.limit)
    if ctx.json:
        # The spec makes this one a bare list of snapshot objects (no schema wrapper).
        print(json.dumps([s.to_json() for s in snaps], indent=2, sort_keys=True))
        return 0
    agents = ws.session_agents()
    for s in snaps:
        where = []
        if s.session:
            agent = agents.get(s.session)
            where.append(f"session {s.session}" + (f" ({agent})" if agent else ""))
        if s.turn is not None:
            where.append(f"turn {s.turn}")
        if s.step is not None:
            where.append(f"step {s.step}")
        label = f"  {s.message}" if s.message else ""
        ctx.out(f"{sid(s.id)}  {when(s.created_at)}  {s.kind:<11} {', '.join(where)}{label}")
    return 0
