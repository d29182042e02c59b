"""CLI layer: ``takeback status``: what changed since the latest snapshot."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._render import quote_path

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "show what changed since the latest snapshot (M/A/D lines)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments (none)."""


def run(ctx: Ctx) -> int:
    """Print the M/A/D lines."""
    ws = ctx.workspace()
    files = ws.status()
    if ctx.json:
        ctx.emit_json(
            {
                "changes": [
                    {"path": f.path, "status": f.status, "added": f.added, "removed": f.removed}
                    for f in files
                ],
                "scan": ws.last_scan,
            }
        )
        return 0
    for f in files:
        ctx.out(f"{f.status} {quote_path(f.path)}")
    return 0
