"""CLI layer: printing what undo, redo, revert and unrevert did."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._render import quote_path, sid

if TYPE_CHECKING:
    from .. import TurnOpResult
    from ._app import Ctx


def report(ctx: Ctx, result: TurnOpResult) -> int:
    """Print the result of a turn operation and return 0.

    Args:
        ctx: the command's context.
        result: what the operation did.

    Returns:
        The exit code (0: a refusal is an exception, turned into its code by ``main``).
    """
    if ctx.json:
        ctx.emit_json(result.to_json())
        return 0
    ctx.out(result.summary())
    if result.nothing:
        return 0
    if result.dry_run:
        for p in result.restored:
            action = result.actions.get(p.rstrip("/"), "M")
            ctx.out(f"  {action} {quote_path(p)}")
        by_force = bool(getattr(ctx.args, "force", False))
        for p in result.conflicts:
            note = " (would be overwritten)" if by_force else ""
            ctx.out(f"  conflict: {result.why.get(p, quote_path(p))}{note}")
        for p in result.not_restored:
            ctx.out(f"  would not be restored (never kept): {quote_path(p)}")
        for p, why in sorted(result.left.items()):
            ctx.out(f"  would be left as is: {quote_path(p)} ({why})")
        if result.conflicts and not by_force:
            ctx.out("dry run: nothing was written (the conflicts refuse it; --force overwrites)")
        else:
            ctx.out("dry run: nothing was written")
        return 0
    forced = set(result.conflicts)
    for p in result.restored:
        name = quote_path(p)
        ctx.out(f"  {name}  (overwrote changes made since)" if p in forced else f"  {name}")
    for p in result.not_restored:
        ctx.out(f"  not restored (never kept): {quote_path(p)}")
    for p, why in sorted(result.left.items()):
        ctx.out(f"  left as is: {quote_path(p)} ({why})")
    ctx.out(f"Snapshot before it: {sid(result.pre)} (takeback rewind --to {sid(result.pre)})")
    return 0
