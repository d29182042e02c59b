"""CLI layer: ``takeback turn begin [-m LABEL]`` and ``takeback turn end`` (for hooks)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "open or close a turn (one reply of the agent)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "action",
        choices=["begin", "end"],
        help="begin: open a turn (one reply); end: close it and make its change list",
    )
    p.add_argument("-m", "--message", default="", help="the turn's label (begin)")


def run(ctx: Ctx) -> int:
    """Begin or end a turn."""
    session = ctx.workspace().session(ctx.recording_session)
    if ctx.args.action == "begin":
        turn = session.turn(ctx.args.message)
        if ctx.json:
            ctx.emit_json({"turn": turn.n, "session": session.name})
        else:
            ctx.out(f"turn {turn.n} begun")
        return 0
    current = session.current_turn()
    if current is None:
        if ctx.json:
            ctx.emit_json({"turn": None, "changes": []})
        else:
            ctx.out("no open turn")
        return 0
    changes = current.end()
    if ctx.json:
        ctx.emit_json({"turn": current.n, "changes": [c.to_json() for c in changes]})
    else:
        ctx.out(f"turn {current.n} ended: {len(changes)} file(s) changed")
    return 0
