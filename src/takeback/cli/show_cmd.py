"""CLI layer: ``takeback show REF:PATH``: the bytes of a file as it was."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._render import write_bytes

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "print a file as it was at a ref (REF:PATH)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "spec", metavar="REF:PATH", help="a ref and a path: start:src/app.py, turn:3:README.md"
    )


def run(ctx: Ctx) -> int:
    """Write the bytes to stdout."""
    from ..errors import UsageError

    ref, sep, path = ctx.args.spec.partition(":")
    if ref == "turn" and sep:
        num, sep, path = path.partition(":")
        ref = f"turn:{num}"
    if not sep or not path:
        raise UsageError(f"expected REF:PATH, got {ctx.args.spec!r}")
    ws = ctx.workspace()
    rel = path if not path.startswith("/") else ws.rel(path)
    data = ws.show(ref, rel, session=ctx.session)
    if ctx.json:
        ctx.emit_json(
            {
                "path": rel,
                "size": len(data),
                "content": data.decode("utf-8", "surrogateescape")
                .encode("utf-8", "replace")
                .decode("utf-8"),
            }
        )
        return 0
    write_bytes(data)
    return 0
