"""CLI layer: ``takeback rewind --to REF [--dry-run] [-- PATH…]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._render import plan_lines, progress, quote_path, sid

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "put the workspace (or just PATHs) back as it was at REF"
AFTER_DASHDASH = "paths"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "--to",
        required=True,
        metavar="REF",
        help="a snapshot id prefix, start, a step number N, or turn:N",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    p.add_argument(
        "--plan",
        default=None,
        metavar="TOKEN",
        help="do exactly the plan a dry run printed, or refuse (exit 3, nothing written) "
        "when a path it names changed since",
    )
    p.add_argument("paths", nargs="*", metavar="-- PATH", help="only these paths (after --)")
    p.epilog = (
        "examples:\n"
        "  takeback rewind --to start --dry-run   the plan, nothing written\n"
        "  takeback rewind --to turn:3            back to before turn 3\n"
        "  takeback rewind --to 4 -- src          only src/, as it was before step 4"
    )


def _path(item: Any, *, for_people: bool = False) -> str:
    """A plan line's path, folders ending in ``/``; quoted when it must be, for people."""
    e = item.target if item.target is not None else item.current
    name = quote_path(str(item.path)) if for_people else str(item.path)
    return name + ("/" if e is not None and e.kind == "d" else "")


def run(ctx: Ctx) -> int:
    """Plan, then (unless --dry-run) snapshot and restore."""
    ws = ctx.workspace()
    paths = ctx.rel_paths(ctx.args.paths)
    with progress("Restoring", not ctx.json) as on_progress:
        result = ws.rewind(
            ctx.args.to,
            paths=paths,
            dry_run=ctx.args.dry_run,
            session=ctx.session,
            on_progress=on_progress,
            plan=None if ctx.args.dry_run else ctx.args.plan,
        )
    plan = result.plan
    counts = plan.counts()
    if ctx.json:
        ctx.emit_json(result.to_json())
        return 0
    if result.note:
        ctx.out(f"note: {result.note}")
    rows = [(item.effect, f"{item.action} {_path(item, for_people=True)}") for item in plan.items]
    for line in plan_lines(rows, would=result.dry_run):
        ctx.out(line)
    total = len(plan.items)
    ctx.out(
        f"{total} path{'s' if total != 1 else ''}: {counts['M']} modified, "
        f"{counts['A']} to remove, {counts['D']} to recreate"
    )
    if result.dry_run:
        for p in plan.not_restorable:
            ctx.out(f"not restored (never kept): {quote_path(p)}")
        for p, why in sorted(plan.left.items()):
            ctx.out(f"left as is: {quote_path(p)} ({why})")
        ctx.out("dry run: nothing was written")
        if result.token:
            ctx.out(f"plan: {result.token} (--plan {result.token} does exactly this, or refuses)")
        return 0
    ctx.out(
        f"pre-rewind snapshot: {sid(result.pre)} "
        f"(undo this rewind with: takeback rewind --to {sid(result.pre)})"
    )
    for p in result.not_restored:
        ctx.out(f"not restored (never kept): {quote_path(p)}")
    for p, why in sorted(result.left.items()):
        ctx.out(f"left as is: {quote_path(p)} ({why})")
    for d in result.kept_dirs:
        ctx.out(f"kept folder {quote_path(d)}/ (it holds files out of scope)")
    ctx.out(f"Rewound to {sid(result.target.id)}.")
    return 0
