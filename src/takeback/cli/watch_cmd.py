"""CLI layer: ``takeback watch [-m LABEL] [--settle MS] -- CMD [ARG…]``.

Runs an agent that has no hooks as a child (its terminal untouched) and takes a step
each time file activity settles; the child's exit status is the command's. The run is
a session of its own (``watch-<command>-<n>``) unless ``--session`` or
``$TAKEBACK_SESSION`` names one. The summary
goes to stderr once the child has exited (stdout is the child's), or with ``--json``,
one document on stdout.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING

from ._render import flush_out

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "run an agent that has no hooks; take a step each time file activity settles"
AFTER_DASHDASH = "cmd"


def _settle(text: str) -> int:
    try:
        ms = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of milliseconds: {text!r}") from None
    if ms < 10:
        raise argparse.ArgumentTypeError("--settle must be at least 10 ms")
    return ms


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("-m", "--message", default=None, help="a label for the run (its turn)")
    p.add_argument(
        "--settle",
        type=_settle,
        default=1000,
        metavar="MS",
        help="how long files must stay quiet to end a step (default 1000)",
    )
    p.add_argument("cmd", nargs="*", metavar="-- CMD [ARG…]", help="the agent's command, after --")


def run(ctx: Ctx) -> int:
    """Run the child, record it, and return its status."""
    from ..errors import UsageError
    from ..integrations._watch import run_watched, watch_session

    cmd = list(ctx.args.cmd)
    if not cmd:
        raise UsageError("nothing to run: takeback watch -- CMD [ARG…]")
    ws = ctx.workspace()
    label = ctx.args.message or shlex.join(cmd)
    # Not the session that recorded last (another agent's conversation): a run of its own.
    named = getattr(ctx.args, "session", None) or os.environ.get("TAKEBACK_SESSION") or None
    session = named or watch_session(ws, cmd)
    flush_out()
    from ..integrations._service import ensure

    # Its steps' snapshots then list only what changed (TAKEBACK_SERVICE=0: not started).
    ws.open_store(create=True)
    ensure(ws.root, ws.store_path, os.environ)
    result = run_watched(
        ws,
        cmd,
        cwd=ctx.cwd,
        session=session,
        label=label,
        settle_ms=ctx.args.settle,
        warn=ctx.warn,
    )
    if ctx.json:
        ctx.emit_json(result.to_json())
        return result.exit_code
    first, last = result.steps[0].n, result.steps[-1].n
    n = len(result.changes)
    print(
        f"takeback: recorded turn {result.turn} of session {result.session!r}: "
        f"steps {first}-{last}, {n} file{'s' if n != 1 else ''} changed "
        f"(rewind to a step with: takeback rewind --to N; take it all back with: "
        f"takeback undo{'' if named else f' --session {shlex.quote(result.session)}'})",
        file=sys.stderr,
    )
    if result.problems or result.unreadable:
        print(
            f"takeback: {len(result.problems)} problem(s) and {len(result.unreadable)} "
            "unreadable path(s) were skipped (see above)",
            file=sys.stderr,
        )
    return result.exit_code
