"""CLI layer: ``takeback mcp``: an MCP server over stdio with takeback's operations as tools.

The MCP SDK is imported here, inside the command, and nowhere else: it takes about a
second, and the hook entry point must start fast. Nothing is printed: stdout is the
protocol.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._app import Ctx

HELP = (
    "serve the Model Context Protocol over stdio: checkpoint, history, changes, diff, "
    "undo_file, undo_turn, redo, rewind"
)
CHECKS_JOURNAL = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments (none besides the common ones)."""


def run(ctx: Ctx) -> int:
    """Serve until the client closes stdin."""
    from ..errors import UsageError

    try:
        from ..integrations._mcp_server import ServerConfig, serve
    except ImportError as e:
        if e.name is None or not e.name.startswith("mcp"):
            raise
        raise UsageError(
            "the MCP server needs the mcp extra, which is not installed: "
            "pip install 'takeback[mcp]'"
        ) from None

    session = getattr(ctx.args, "session", None) or os.environ.get("TAKEBACK_SESSION") or None
    serve(
        ServerConfig(
            root=ctx.root, store=ctx.store, session=session, max_file_bytes=ctx.max_file_bytes
        )
    )
    return 0
