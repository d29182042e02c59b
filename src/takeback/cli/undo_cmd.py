"""CLI layer: ``takeback undo [--turn N] [--file PATH | --hunk PATH#K… | -p] [--force | --merge]``.

With ``--hunk``, only those hunks of the turn are taken back (by three-way merge); ``-p``
asks hunk by hunk on a terminal, as ``git add -p`` does, and takes back the chosen ones
in one operation.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._app import number
from ._turnops import add_take_back_arguments, merge_option, report

if TYPE_CHECKING:
    from .. import Session
    from ._app import Ctx

HELP = "take back the last turn (or turn N, or one file of it)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "--turn", type=number, default=None, metavar="N", help="the turn (default: the last)"
    )
    p.add_argument(
        "--file",
        default=None,
        metavar="PATH",
        help="only this file (without --turn: back to before the session first changed it)",
    )
    p.add_argument(
        "--hunk",
        action="append",
        default=[],
        metavar="PATH#K",
        help="only this hunk of the turn (repeatable; ids from: takeback changes --hunks)",
    )
    p.add_argument(
        "-p",
        "--patch",
        action="store_true",
        help="ask hunk by hunk on a terminal (y, n, q, ?), then take back the chosen ones",
    )
    add_take_back_arguments(p)
    p.epilog = (
        "examples:\n"
        "  takeback undo --dry-run          what it would write\n"
        "  takeback undo --merge            keep edits made since the turn\n"
        "  takeback undo --turn 3 --file src/app.py\n"
        "  takeback undo --hunk src/app.py#2   (ids: takeback changes --hunks)"
    )


def run(ctx: Ctx) -> int:
    """Undo and report."""
    ws = ctx.workspace()
    file = ws.rel(ctx.args.file, base=ctx.cwd, follow=False) if ctx.args.file else None
    session = ws.session(ctx.session)
    if ctx.args.patch or ctx.args.hunk:
        return _hunks(ctx, session, file)
    if file is not None and ctx.args.turn is None:
        # One file, back to before the session first changed it (the library's one-file
        # undo, the same as MCP undo_file); with --turn, that turn's change of it.
        result = session.undo_file(
            file,
            force=ctx.args.force,
            merge=merge_option(ctx),
            dry_run=ctx.args.dry_run,
            plan=ctx.args.plan,
        )
        return report(ctx, result)
    open_turn = session.current_turn() if ctx.args.dry_run and ctx.args.turn is None else None
    if open_turn is not None:
        ctx.warn(
            f"turn {open_turn.n} is still open: undo would end it and take it back; "
            "this dry run plans from the turns that ended"
        )
    result = session.undo(
        turn=ctx.args.turn,
        file=file,
        force=ctx.args.force,
        merge=merge_option(ctx),
        dry_run=ctx.args.dry_run,
        plan=ctx.args.plan,
    )
    return report(ctx, result)


_HELP = """y - take back this hunk
n - keep this hunk
q - quit; take back the hunks chosen so far, keep this one and the rest
? - print this help
"""


def _hunks(ctx: Ctx, session: Session, file: str | None) -> int:
    """Take back chosen hunks of a turn: named by --hunk, or asked for with -p."""
    import sys

    from ..errors import UsageError

    if file is not None or ctx.args.force:
        raise UsageError("--hunk and -p take back by merge: not with --file or --force")
    merge = merge_option(ctx) or True
    if not ctx.args.patch:
        result = session.undo(
            turn=ctx.args.turn, hunks=ctx.args.hunk, merge=merge, dry_run=ctx.args.dry_run
        )
        return report(ctx, result)
    if ctx.args.hunk:
        raise UsageError("-p asks for the hunks: not with --hunk")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("-p asks on a terminal, and there is none: use --hunk PATH#K")
    turn = session.ended_turn(ctx.args.turn)
    hunks = session.hunks(turn.n)
    chosen: list[str] = []
    for i, h in enumerate(hunks, 1):
        sys.stdout.buffer.write(f"{h.id}\n".encode() + h.patch)
        sys.stdout.flush()
        answer = ""
        while answer not in ("y", "n", "q"):
            try:
                answer = input(f"({i}/{len(hunks)}) Take back this hunk [y,n,q,?]? ").strip()
            except EOFError:
                answer = "q"
            if answer == "?":
                print(_HELP, end="")
        if answer == "q":
            break
        if answer == "y":
            chosen.append(h.id)
    if not chosen:
        ctx.out("No hunk chosen: nothing taken back.")
        return 0
    result = session.undo(turn=turn.n, hunks=chosen, merge=merge, dry_run=ctx.args.dry_run)
    return report(ctx, result)
