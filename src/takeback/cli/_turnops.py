"""CLI layer: the options of undo, redo, revert and unrevert, and printing what they did."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Literal

from .. import summary
from ._render import plan_lines, quote_path, sid, write_bytes

if TYPE_CHECKING:
    from .. import TurnOpResult
    from ._app import Ctx


def _merge_value(text: str) -> str:
    if text != "markers":
        raise argparse.ArgumentTypeError(f"--merge takes nothing or =markers, not {text!r}")
    return text


def add_take_back_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--force``, ``--merge[=markers]`` and ``--dry-run``."""
    how = p.add_mutually_exclusive_group()
    how.add_argument("--force", action="store_true", help="overwrite files changed since")
    how.add_argument(
        "--merge",
        nargs="?",
        const=True,
        default=False,
        type=_merge_value,
        metavar="markers",
        help="merge files changed since: take back the turn's hunks, keep the edits since "
        "(=markers: write conflict markers where both changed the same lines)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (and the diff each merge would write); write nothing",
    )
    p.add_argument(
        "--plan",
        default=None,
        metavar="TOKEN",
        help="do exactly the plan a dry run printed, or refuse (exit 3, nothing written) "
        "when the workspace or the history changed since",
    )


def merge_option(ctx: Ctx) -> bool | Literal["markers"]:
    """The ``merge`` argument the library takes, from ``--merge[=markers]``."""
    value = ctx.args.merge
    return "markers" if value == "markers" else bool(value)


def report(ctx: Ctx, result: TurnOpResult) -> int:
    """Print the result of a turn operation and return its exit code.

    Args:
        ctx: the command's context.
        result: what the operation did.

    Returns:
        0; or 3 when conflict markers were written, or when a dry run found conflicts
        that would refuse the operation (a refusal is an exception, turned into its
        code by ``main``).
    """
    refused = result.dry_run and result.conflicts and not getattr(ctx.args, "force", False)
    code = 3 if result.markers or refused else 0
    if ctx.json:
        ctx.emit_json(result.to_json())
        return code
    ctx.out(summary(result))
    if result.nothing:
        return 0
    if result.dry_run:
        merged = set(result.merged)
        by_force = not refused
        rows = []
        for p in result.restored:
            action = result.actions.get(p.rstrip("/"), "M")
            note = "  (conflict markers)" if p in result.markers else ""
            note = note or ("  (merged)" if p in merged else "")
            effect = result.effects.get(p.rstrip("/"), "restore")
            rows.append((effect, f"  {action} {quote_path(p)}{note}"))
        for line in plan_lines(rows, would=True):
            ctx.out(line)
        for p in result.conflicts:
            note = " (would be overwritten)" if by_force else ""
            ctx.out(f"  conflict: {result.why.get(p, quote_path(p))}{note}")
        for p in result.not_restored:
            ctx.out(f"  would not be restored (never kept): {quote_path(p)}")
        for p, why in sorted(result.left.items()):
            ctx.out(f"  would be left as is: {quote_path(p)} ({why})")
        if refused:
            how = (
                "--merge=markers writes conflict markers"
                if ctx.args.merge
                else "--merge keeps both sides' edits, --force overwrites"
            )
            ctx.out(f"dry run: nothing was written (the conflicts refuse it; {how})")
        else:
            ctx.out("dry run: nothing was written")
        if result.token and not refused:
            ctx.out(f"plan: {result.token} (--plan {result.token} does exactly this, or refuses)")
        if result.preview:  # last, so that the patch can be cut from the output as it is
            ctx.out("The merges it would write:")
            write_bytes(result.preview)
        return code
    forced = set(result.conflicts)
    merged = set(result.merged)
    for p in result.restored:
        name = quote_path(p)
        if p in forced:
            name += "  (overwrote changes made since)"
        elif p in result.markers:
            name += "  (conflict markers)"
        elif p in merged:
            name += "  (merged: edits made since kept)"
        ctx.out(f"  {name}")
    for p in result.not_restored:
        ctx.out(f"  not restored (never kept): {quote_path(p)}")
    for p, why in sorted(result.left.items()):
        ctx.out(f"  left as is: {quote_path(p)} ({why})")
    ctx.out(f"Snapshot before it: {sid(result.pre)} (takeback rewind --to {sid(result.pre)})")
    for p, regions in sorted(result.markers.items()):
        for r in regions:
            at = r.markers or r.now
            ctx.out(f"conflict: {quote_path(p)}: lines {at[0]}-{at[1]} (markers written)")
    if result.markers:
        ctx.out("Resolve the markers; the snapshot above gives back the files as they were.")
    return code
