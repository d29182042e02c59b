"""CLI layer: ``takeback redo [--force | --merge[=markers]] [--dry-run]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._turnops import add_take_back_arguments, merge_option, report

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "bring back what the last undo took back"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    add_take_back_arguments(p)


def run(ctx: Ctx) -> int:
    """Redo and report."""
    session = ctx.workspace().session(ctx.session)
    result = session.redo(
        force=ctx.args.force,
        merge=merge_option(ctx),
        dry_run=ctx.args.dry_run,
        plan=ctx.args.plan,
    )
    return report(ctx, result)
