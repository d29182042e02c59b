"""CLI layer: ``takeback fsck [--read-data]``: exit 0 when the store is sound, 2 when not."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._render import progress

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "check the store (--read-data: every object's hash too); exit 2 when damaged"
AUTO_GC = False
#: fsck reports a journal left behind as a problem of its own
CHECKS_JOURNAL = False
DAMAGED = 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("--read-data", action="store_true", help="read every object, check its hash")


def run(ctx: Ctx) -> int:
    """Check the store; a line per problem."""
    ws = ctx.workspace()
    with progress("Reading objects", not ctx.json) as on_progress:
        r = ws.fsck(read_data=ctx.args.read_data, on_progress=on_progress)
    code = 0 if r.clean else DAMAGED
    if ctx.json:
        ctx.emit_json(r.to_json())
        return code
    for line in r.problems:
        ctx.out(line)
    what = f"{r.snapshots:,} snapshots, {r.objects:,} objects"
    if ctx.args.read_data:
        what += f" ({r.read:,} read)"
    if r.clean:
        ctx.out(f"The store is sound: {what}.")
    else:
        ctx.out(f"{len(r.problems)} problem(s) in {what}.")
    return code
