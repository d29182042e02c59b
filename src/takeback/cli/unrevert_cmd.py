"""CLI layer: ``takeback unrevert [--force]``."""

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


def run(ctx: Ctx) -> int:
    """Unrevert and report."""
    return report(ctx, ctx.workspace().session(ctx.session).unrevert(force=ctx.args.force))
