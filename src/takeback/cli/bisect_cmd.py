"""CLI layer: ``takeback bisect [--good REF] [--bad REF] [--by turn|step] -- CMD [ARG…]``.

Finds the first turn (or step) after which a command fails, running it in scratch
copies of the workspace as it was at each point tried (never in the workspace itself,
never changing its history), as ``git bisect run`` does over commits: exit 0 good, 125
skip, any other bad.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING

from ._render import flush_out

if TYPE_CHECKING:
    from .. import BisectRun
    from ._app import Ctx

HELP = "find the first turn (or step) after which a command fails"
AFTER_DASHDASH = "cmd"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "--good",
        default="start",
        metavar="REF",
        help="a point where the command passes (default: start, the session's baseline)",
    )
    p.add_argument(
        "--bad",
        default=None,
        metavar="REF",
        help="a point where it fails (default: the workspace now)",
    )
    p.add_argument(
        "--by",
        choices=["turn", "step"],
        default="turn",
        help="search turn ends (default) or step ends",
    )
    p.add_argument(
        "cmd", nargs="*", metavar="-- CMD [ARG…]", help="the test, after --: exit 0 good, 125 skip"
    )
    p.epilog = (
        "examples:\n"
        "  takeback bisect -- pytest -q tests/test_login.py\n"
        "  takeback bisect --good turn:3 --by step -- npm test"
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter


def _where(run: BisectRun) -> str:
    p = run.point
    head = f"turn {p.turn}" if p.step is None else f"step {p.step} (turn {p.turn})"
    label = f" {shlex.quote(p.label)[:60]}" if p.label else ""
    return f"{head}{label}"


def run(ctx: Ctx) -> int:
    """Search, print each run and the first bad point; exit 0 found, 1 none, 2 bad input."""
    import os

    from ..errors import UsageError

    cmd = list(ctx.args.cmd)
    if not cmd:
        raise UsageError("nothing to run: takeback bisect -- CMD [ARG…]")
    ws = ctx.workspace()
    rel = os.path.relpath(ctx.cwd, ws.root)
    cwd = "" if rel == "." or rel.startswith("..") else rel

    def on_run(r: BisectRun) -> None:
        if not ctx.json:
            print(f"{_where(r)}: {r.verdict} (exit {r.exit_code})", file=sys.stderr)

    flush_out()
    result = ws.bisect(
        cmd,
        good=ctx.args.good,
        bad=ctx.args.bad,
        by=ctx.args.by,
        session=ctx.session,
        env=dict(os.environ),
        cwd=cwd,
        on_run=on_run,
    )
    if ctx.json:
        ctx.emit_json(result.to_json())
        return 0 if result.first_bad is not None else 1
    first = result.first_bad
    if first is not None:
        what = f"turn: {first.turn}" if first.step is None else f"step: {first.step}"
        label = f" ({first.label})" if first.label else ""
        ctx.out(f"First bad {what}{label}")
        if first.turn is not None:
            ctx.out(
                f"Take it back with: takeback undo --turn {first.turn} --merge "
                f"--session {shlex.quote(first.session)}"
            )
        return 0
    if result.undecided:
        names = ", ".join(str(p.turn if p.step is None else p.step) for p in result.undecided)
        ctx.out(f"Undecided: the first bad {result.by} is one of {names} (the rest were skipped)")
        return 1
    if result.points == 0:
        ctx.out(f"No {result.by} lies between the good and the bad point.")
    else:
        ctx.out(
            f"No bad {result.by} found: the command passed after every one of the "
            f"{result.points}; what fails came after the last (or it does not fail)."
        )
    return 1
