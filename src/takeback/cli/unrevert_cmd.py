"""CLI layer: ``takeback unrevert [--force] [--dry-run]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._turnops import report

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "put back what the last revert took back"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("--force", action="store_true", help="overwrite files changed since")
    p.add_argument(
        "--dry-run", action="store_true", help="print what it would do, and the conflicts"
    )


def run(ctx: Ctx) -> int:
    """Unrevert and report."""
    session = ctx.workspace().session(ctx.session)
    return report(ctx, session.unrevert(force=ctx.args.force, dry_run=ctx.args.dry_run))
