"""CLI layer: ``takeback changes [--turn N]``: a turn's change list."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "list the files a turn changed (default: the last turn)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("--turn", type=int, default=None, metavar="N")


def run(ctx: Ctx) -> int:
    """Print the summary line (``3 files changed +24 -7``) and a line per file."""
    session = ctx.workspace().session(ctx.session)
    changes = session.changes(ctx.args.turn)
    n_turn = ctx.args.turn
    if n_turn is None:
        # session.changes found an ended turn, so there is one.
        n_turn = [t.n for t in session.turns() if t.state != "open"][-1]
    added = sum(c.added for c in changes)
    removed = sum(c.removed for c in changes)
    if ctx.json:
        ctx.emit_json({"session": session.name, "turn": n_turn, "files": len(changes),
                       "added": added, "removed": removed,
                       "changes": [c.to_json() for c in changes]})
        return 0
    n = len(changes)
    ctx.out(f"{n} file{'s' if n != 1 else ''} changed +{added} -{removed}")
    for c in changes:
        note = "" if c.undoable else "  (cannot be undone: not kept, over the size limit)"
        ctx.out(f"  {c.status:<8} +{c.added:<4} -{c.removed:<4} {c.path}{note}")
    return 0
