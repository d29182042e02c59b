"""CLI layer: ``takeback touch PATH…``: keep files' states before a file tool writes them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "keep files' states before a file tool writes them (opens a turn if none is open)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--tool-call-id", default=None, help="the tool call that will write")


def run(ctx: Ctx) -> int:
    """Touch each path in the open turn."""
    ws = ctx.workspace()
    session = ws.session(ctx.session)
    turn = session.current_turn() or session.turn()
    kept = []
    for p in ctx.args.paths:
        if turn.touch(ws.rel(p, base=ctx.cwd), tool_call_id=ctx.args.tool_call_id):
            kept.append(p)
    if ctx.json:
        ctx.emit_json({"turn": turn.n, "kept": kept})
    return 0
