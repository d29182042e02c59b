"""CLI layer: ``takeback changes [--turn N] [--hunks]``: a turn's change list, or its hunks."""

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
    p.add_argument(
        "--turn", type=number, default=None, metavar="N", help="the turn (default: last)"
    )
    p.add_argument(
        "--hunks",
        action="store_true",
        help="list the turn's changes hunk by hunk, each with the id undo --hunk takes",
    )


def run(ctx: Ctx) -> int:
    """Print the summary line (``3 files changed +24 -7``) and a line per file."""
    if ctx.args.hunks:
        return _hunks(ctx)
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


def _hunks(ctx: Ctx) -> int:
    """Print each hunk: its id, its line ranges and counts, then its lines."""
    import sys

    session = ctx.workspace().session(ctx.session)
    turn = session.ended_turn(ctx.args.turn)
    hunks = session.hunks(turn.n)
    if ctx.json:
        ctx.emit_json(
            {"session": session.name, "turn": turn.n, "hunks": [h.to_json() for h in hunks]}
        )
        return 0
    ctx.out(f"turn {turn.n} of session {session.name!r}: {len(hunks)} hunk(s)")
    for h in hunks:
        ctx.out(f"{quote_path(h.path)}#{h.k}  +{h.added} -{h.removed}")
        sys.stdout.flush()
        sys.stdout.buffer.write(h.patch)
        sys.stdout.buffer.flush()
    return 0
