"""CLI layer: ``takeback store copy FROM TO``: move a workspace's history between stores."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._render import progress

if TYPE_CHECKING:
    from ._app import Ctx

CHECKS_JOURNAL = False  # it reads two stores it names, not the workspace's own
HELP = "copy a workspace's whole history between stores (folder or postgresql://...)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("action", choices=["copy"], help="what to do: copy")
    p.add_argument("source", metavar="FROM", help="the store to copy from (a folder or a URL)")
    p.add_argument("target", metavar="TO", help="the store to copy into (empty, or not there)")


def run(ctx: Ctx) -> int:
    """Copy, verify, and say what moved."""
    from .. import copy_history, find_root

    root = getattr(ctx.args, "root", None) or find_root(ctx.cwd, store=ctx.args.source)
    with progress("Copying objects", not ctx.json) as on_progress:
        result = copy_history(root, ctx.args.source, ctx.args.target, on_progress=on_progress)
    if ctx.json:
        ctx.emit_json(result.to_json())
        return 0
    rows = result.rows
    ctx.out(
        f"Copied {result.objects} objects ({result.bytes} bytes), "
        f"{rows.get('snapshots', 0)} snapshots, {rows.get('sessions', 0)} sessions, "
        f"{rows.get('turns', 0)} turns and {rows.get('ops', 0)} take-backs "
        f"from {result.source} to {result.target}."
    )
    ctx.out(
        f"Verified: all {result.verified} objects read back whole from the target, "
        "and every row's objects are there."
    )
    if result.interrupted:
        article = "an" if result.interrupted[:1] in "aeiou" else "a"
        ctx.warn(
            f"the source holds {article} {result.interrupted} that was interrupted: its "
            "journal was copied too (`takeback status` on either store says how to finish "
            "it or take it back)"
        )
    return 0
