"""CLI layer: ``takeback undo [--turn N] [--file PATH] [--force | --merge] [--dry-run]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._app import number
from ._turnops import add_take_back_arguments, merge_option, report

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "take back the last turn (or turn N, or one file of it)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("--turn", type=number, default=None, metavar="N")
    p.add_argument("--file", default=None, metavar="PATH")
    add_take_back_arguments(p)


def run(ctx: Ctx) -> int:
    """Undo and report."""
    ws = ctx.workspace()
    file = ws.rel(ctx.args.file, base=ctx.cwd, follow=False) if ctx.args.file else None
    session = ws.session(ctx.session)
    if file is not None and ctx.args.turn is None:
        # One file, back to before the session first changed it (the library's one-file
        # undo, the same as MCP undo_file); with --turn, that turn's change of it.
        result = session.undo_file(
            file,
            force=ctx.args.force,
            merge=merge_option(ctx),
            dry_run=ctx.args.dry_run,
            plan=ctx.args.plan,
        )
        return report(ctx, result)
    open_turn = session.current_turn() if ctx.args.dry_run and ctx.args.turn is None else None
    if open_turn is not None:
        ctx.warn(
            f"turn {open_turn.n} is still open: undo would end it and take it back; "
            "this dry run plans from the turns that ended"
        )
    result = session.undo(
        turn=ctx.args.turn,
        file=file,
        force=ctx.args.force,
        merge=merge_option(ctx),
        dry_run=ctx.args.dry_run,
        plan=ctx.args.plan,
    )
    return report(ctx, result)
