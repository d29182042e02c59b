"""CLI layer: ``takeback adopt [STORE]``: a moved or renamed workspace takes its history."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._render import quote_path

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "give a moved or renamed workspace its history back (its old store)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "store",
        nargs="?",
        default=None,
        metavar="STORE",
        help="the old store (default: the store of the folder this one was, if found)",
    )


def run(ctx: Ctx) -> int:
    """Re-home the store to this folder and say where it is now."""
    ws = ctx.workspace()
    path = ws.adopt(ctx.args.store)
    if ctx.json:
        ctx.emit_json({"root": ws.root, "store": path})
        return 0
    ctx.out(f"Adopted: {quote_path(ws.root)} now has its history ({quote_path(path)}).")
    return 0
