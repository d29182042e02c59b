"""CLI layer: ``takeback redo [--force]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._turnops import report

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "bring back what the last undo took back"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("--force", action="store_true", help="overwrite files changed since")


def run(ctx: Ctx) -> int:
    """Redo and report."""
    return report(ctx, ctx.workspace().session(ctx.session).redo(force=ctx.args.force))
