"""CLI layer: ``takeback revert --to-turn N [--force] [--dry-run]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._app import number
from ._turnops import report

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "take back every turn after N at once"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("--to-turn", type=number, required=True, metavar="N")
    p.add_argument("--force", action="store_true", help="overwrite files changed since")
    p.add_argument(
        "--dry-run", action="store_true", help="print what it would do, and the conflicts"
    )


def run(ctx: Ctx) -> int:
    """Revert and report."""
    session = ctx.workspace().session(ctx.session)
    result = session.revert(
        to_turn=ctx.args.to_turn, force=ctx.args.force, dry_run=ctx.args.dry_run
    )
    return report(ctx, result)
