"""CLI layer: ``takeback run [-m LABEL] -- CMD [ARG…]``: a command as one step.

The command's output and exit status pass through untouched; a snapshot that fails only
prints a warning. Signals meant for the command (a Ctrl-C, a supervisor's SIGTERM) reach
it, and takeback waits for it to finish its own clean-up: the step records the status it
really ended with (128+N when signal N killed it), and so does the exit code.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ._render import flush_out

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "run a command as one step: snapshots before and after"
AFTER_DASHDASH = "cmd"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("-m", "--message", default=None, help="a label for the step")
    p.add_argument("cmd", nargs="*", metavar="-- CMD [ARG…]", help="the command, after --")
    p.epilog = (
        "examples:\n"
        "  takeback run -- npm run format\n"
        "  takeback run -m 'regenerate the client' -- make gen"
    )


def run(ctx: Ctx) -> int:
    """Run the command between two snapshots and return its status."""
    import shlex

    from ..errors import UsageError
    from ..integrations._child import exit_status, forward_signals

    cmd = list(ctx.args.cmd)
    if not cmd:
        raise UsageError("nothing to run: takeback run -- CMD [ARG…]")
    ws = ctx.workspace()

    def on_event(ev: dict[str, Any]) -> None:
        if ev.get("event") == "snapshot.failed":
            ctx.warn(f"snapshot failed, the command runs anyway: {ev.get('reason')}")

    ws.on_event(on_event)
    label = ctx.args.message or shlex.join(cmd)
    step = ws.session(ctx.recording_session).command(label).begin()
    code = 127
    try:
        flush_out()
        with forward_signals() as fwd:
            # With --json, stdout carries the one JSON document: the command's own
            # output goes to stderr.
            proc = fwd.start(cmd, cwd=ctx.cwd, stdout=sys.stderr.fileno() if ctx.json else None)
            code = exit_status(proc.wait())
    except FileNotFoundError:
        print(f"takeback: {cmd[0]}: command not found", file=sys.stderr)
    except PermissionError:
        print(f"takeback: {cmd[0]}: permission denied", file=sys.stderr)
        code = 126
    finally:
        step.finish(exit_code=code)
    name = step.session.name
    if ctx.json:
        ctx.emit_json(
            {
                "session": name,
                "step": step.n,
                "turn": step.turn,
                "exit_code": code,
                "before": step.before.id if step.before else None,
                "after": step.after.id if step.after else None,
                "changes": [{"path": p, "change": c} for p, c in step.changed],
            }
        )
    elif step.n and step.turn:
        n = len(step.changed)
        what = f"{n} file{'s' if n != 1 else ''} changed" if n else "no file changed"
        undo = " (takeback undo takes it back)" if n else ""
        print(f"takeback: turn {step.turn} of session {name!r}: {what}{undo}", file=sys.stderr)
    elif not step.n or step.before is None:
        print(
            "takeback: the command ran, but was not recorded (see the warning above)",
            file=sys.stderr,
        )
    return code
