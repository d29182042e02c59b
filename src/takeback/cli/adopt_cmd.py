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
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="say which history would be attached, and how alike the folders are; change nothing",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="adopt it even when this folder does not look like the recorded one",
    )


def run(ctx: Ctx) -> int:
    """Re-home the store to this folder and say where it is now."""
    ws = ctx.workspace()
    path = ws.adopt(ctx.args.store, force=ctx.args.force, dry_run=ctx.args.dry_run)
    like = ws.last_likeness
    if ctx.json:
        doc: dict[str, object] = {"root": ws.root, "store": path, "dry_run": ctx.args.dry_run}
        if like is not None:
            doc.update(matched=like.matched, compared=like.compared, alike=like.alike)
        ctx.emit_json(doc)
        return 0
    words = f" ({like.describe()})" if like is not None else ""
    if ctx.args.dry_run:
        ctx.out(f"Would adopt {quote_path(path)} for {quote_path(ws.root)}{words}.")
        return 0
    ctx.out(f"Adopted: {quote_path(ws.root)} now has its history ({quote_path(path)}){words}.")
    return 0
