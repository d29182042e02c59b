"""CLI layer: ``takeback snapshot [-m MSG]``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._render import quote_path, read_progress, sid

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "take a snapshot now and print its id"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("-m", "--message", default="", help="a note kept with the snapshot")


def run(ctx: Ctx) -> int:
    """Take the snapshot."""
    from ..errors import StoreMissingError

    ws = ctx.workspace()
    try:
        last = ws.open_store().meta.latest_snapshot()
    except StoreMissingError:
        last = None
    with read_progress("Taking a snapshot", not ctx.json) as on_progress:
        info = ws.snapshot(ctx.args.message, session=ctx.recording_session, on_progress=on_progress)
    if ctx.json:
        ctx.emit_json(info.to_json())
        return 0
    ctx.out(sid(info.id))
    said = last is not None and (last.skipped_count, sorted(last.skipped)) == (
        info.skipped_count,
        sorted(info.skipped),
    )
    if info.skipped_count and not said:
        # Said when it changes, not at every snapshot (the latest one said it already).
        names = ", ".join(quote_path(p) for p in sorted(info.skipped))
        more = info.skipped_count - len(info.skipped)
        ctx.warn(
            f"{info.skipped_count} file(s) over the size limit not kept: {names}"
            + (f" and {more} more" if more > 0 else "")
            + " (--max-file-bytes N keeps files up to N bytes)"
        )
    if info.unreadable_count:
        names = ", ".join(f"{p} ({why})" for p, why in info.unreadable)
        more = info.unreadable_count - len(info.unreadable)
        ctx.warn(
            f"{info.unreadable_count} path(s) unreadable, not kept: {names}"
            + (f" and {more} more" if more > 0 else "")
        )
    return 0
