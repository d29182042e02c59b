"""CLI layer: ``takeback ui [--port N] [--no-open]``: the history as a local web page.

Serves the page on 127.0.0.1 (with a random token in its address) until Ctrl-C, and
opens it in the browser unless ``--no-open`` (through a private redirect file, so the
token is never on the browser's command line); the address is printed either way
(``--json``: ``url``, ``host``, ``port``, ``token``).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ._render import flush_out

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "show the history in a local web page, and take any part of it back from there"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("--port", type=int, default=0, help="the port (default: any free one)")
    p.add_argument("--no-open", action="store_true", help="do not open a browser")


def run(ctx: Ctx) -> int:
    """Serve the page until interrupted."""
    from .. import Workspace, errors
    from ..integrations._ui_api import UiConfig
    from ..integrations._ui_open import PageOpener
    from ..integrations._ui_server import UiServer

    port = ctx.args.port
    if not 0 <= port <= 65535:
        raise errors.UsageError(f"bad port: {port}")
    Workspace(ctx.root, store=ctx.store)  # a bad root fails here, before serving
    # Nothing of this process may hold the store open while it serves: each request
    # opens it afresh, and SQLite's file locks are the process's, not the connection's
    # (closing any descriptor of the file drops them all), so a connection kept open
    # here could lose its locks to a request and read a log another process removed.
    ctx.close()
    session = getattr(ctx.args, "session", None) or os.environ.get("TAKEBACK_SESSION") or None
    config = UiConfig(
        root=ctx.root, store=ctx.store, session=session, max_file_bytes=ctx.max_file_bytes
    )
    try:
        server = UiServer(config, port=port)
    except OSError as e:
        raise errors.UsageError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from e
    if ctx.json:
        ctx.emit_json(
            {"url": server.url, "host": "127.0.0.1", "port": server.port, "token": server.token}
        )
    else:
        ctx.out(f"takeback ui: {server.url}")
        ctx.out("Press Ctrl-C to stop.")
    flush_out()
    opener = PageOpener(server.url)
    try:
        if not ctx.args.no_open and not opener.open():
            ctx.warn("no browser could be opened: open the address above")
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        opener.close()
    return 0
