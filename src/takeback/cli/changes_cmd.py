"""CLI layer: ``takeback changes [--turn N]``: a turn's change list."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._app import number
from ._render import quote_path

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "list the files a turn changed (default: the last turn)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("--turn", type=number, default=None, metavar="N")


def run(ctx: Ctx) -> int:
    """Print the summary line (``3 files changed +24 -7``) and a line per file."""
    turn = ctx.workspace().session(ctx.session).ended_turn(ctx.args.turn)
    changes = turn.changes
    added = sum(c.added for c in changes)
    removed = sum(c.removed for c in changes)
    if ctx.json:
        ctx.emit_json(turn.to_json())
        return 0
    n = len(changes)
    ctx.out(f"{n} file{'s' if n != 1 else ''} changed +{added} -{removed}")
    for c in changes:
        note = "" if c.undoable else "  (cannot be undone: not kept, over the size limit)"
        if c.approximate:
            note += "  (line counts approximate: an upper bound)"
        if c.unconfirmed:
            note += (
                "  (unconfirmed: a step whose end was never seen changed it; undo needs --force)"
            )
        ctx.out(f"  {c.status:<8} +{c.added:<4} -{c.removed:<4} {quote_path(c.path)}{note}")
    return 0
