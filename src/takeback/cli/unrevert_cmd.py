"""CLI layer: ``takeback unrevert [--force | --merge[=markers]] [--dry-run]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._turnops import add_take_back_arguments, merge_option, report

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "put back what the last revert took back"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    add_take_back_arguments(p)


def run(ctx: Ctx) -> int:
    """Unrevert and report."""
    session = ctx.workspace().session(ctx.session)
    result = session.unrevert(
        force=ctx.args.force, merge=merge_option(ctx), dry_run=ctx.args.dry_run, plan=ctx.args.plan
    )
    return report(ctx, result)
