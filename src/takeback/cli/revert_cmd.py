"""CLI layer: ``takeback revert --to-turn N [--force | --merge[=markers]] [--dry-run]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._app import number
from ._turnops import add_take_back_arguments, merge_option, report

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "take back every turn after N at once"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "--to-turn",
        type=number,
        required=True,
        metavar="N",
        help="keep turns up to N; take back every one after it",
    )
    add_take_back_arguments(p)


def run(ctx: Ctx) -> int:
    """Revert and report."""
    session = ctx.workspace().session(ctx.session)
    result = session.revert(
        to_turn=ctx.args.to_turn,
        force=ctx.args.force,
        merge=merge_option(ctx),
        dry_run=ctx.args.dry_run,
        plan=ctx.args.plan,
    )
    return report(ctx, result)
