"""CLI layer: ``takeback touch PATH…``: keep files' states before a file tool writes them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "keep files' states before a file tool writes them (opens a turn if none is open)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="the files a file tool is about to write"
    )
    p.add_argument("--tool-call-id", default=None, help="the tool call that will write")


def run(ctx: Ctx) -> int:
    """Touch each path in the open turn (one is opened if none is)."""
    ws = ctx.workspace()
    # Every path is checked before anything is recorded: a path outside the root
    # refuses the whole command (exit 2) without opening a turn.
    rels = [ws.rel(p, base=ctx.cwd) for p in ctx.args.paths]
    session = ws.session(ctx.recording_session)
    turn = session.ensure_turn()
    kept = []
    for p, rel in zip(ctx.args.paths, rels, strict=True):
        if turn.touch(rel, tool_call_id=ctx.args.tool_call_id):
            kept.append(p)
    if ctx.json:
        ctx.emit_json({"turn": turn.n, "kept": kept})
    return 0
