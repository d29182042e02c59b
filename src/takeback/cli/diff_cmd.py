"""CLI layer: ``takeback diff [FROM [TO]] [--binary] [--stat | --name-status] [-- PATH…]``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._render import quote_path, write_bytes

if TYPE_CHECKING:
    from .. import FileDiff
    from ._app import Ctx

HELP = "show a unified diff that git apply accepts"
AFTER_DASHDASH = "paths"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "refs",
        nargs="*",
        metavar="REF",
        help="FROM (default: the latest snapshot) and TO (default: the files now)",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="-- PATH",
        help="only these paths and what is under them (after --)",
    )
    p.epilog = (
        "examples:\n"
        "  takeback diff                     what changed since the latest snapshot\n"
        "  takeback diff turn:3 turn:4       what turn 3 did\n"
        "  takeback diff start -- src/app.py one file since the session began"
    )
    p.add_argument(
        "--binary",
        action="store_true",
        help="write binary files as git binary patches, so git apply takes them too",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--stat", action="store_true", help="counts per file")
    g.add_argument("--name-status", action="store_true", help="A/M/D and the path")


def run(ctx: Ctx) -> int:
    """Print the diff."""
    from ..errors import UsageError

    refs, paths = ctx.args.refs, ctx.args.paths
    if len(refs) > 2:
        raise UsageError("diff takes at most two refs (FROM and TO)")
    want_patch = not (ctx.args.stat or ctx.args.name_status)
    result = ctx.workspace().diff(
        refs[0] if refs else None,
        refs[1] if len(refs) > 1 else None,
        paths=ctx.rel_paths(paths),
        session=ctx.session,
        patch=want_patch or ctx.json,
        binary=ctx.args.binary,
    )
    if ctx.json:
        ctx.emit_json(result.to_json())
        return 0
    # Names are quoted as git quotes them, so that one file is one line of ASCII however
    # odd its name (a newline, a TAB, bytes that are not UTF-8).
    names = [quote_path(f.path) for f in result.files]
    if ctx.args.name_status:
        for f, name in zip(result.files, names, strict=True):
            ctx.out(f"{f.status}\t{name}")
    elif ctx.args.stat:
        width = max((len(name) for name in names), default=0)
        for f, name in zip(result.files, names, strict=True):
            # "~": an upper bound, the shortest edit was too costly to find
            approx = " ~" if f.approximate else ""
            ctx.out(f" {name:<{width}} | +{f.added} -{f.removed}{approx}")
        if result.files:  # as git: nothing at all when nothing changed
            ctx.out(stat_summary(result.files))
    else:
        write_bytes(result.patch)
    return 0


def stat_summary(files: Sequence[FileDiff]) -> str:
    """The last line of ``--stat``, as git writes it (`` 2 files changed, 1 deletion(-)``)."""
    n = len(files)
    added = sum(f.added for f in files)
    removed = sum(f.removed for f in files)
    parts = [f" {n} file{'s' if n != 1 else ''} changed"]
    if added:
        parts.append(f"{added} insertion{'s' if added != 1 else ''}(+)")
    if removed:
        parts.append(f"{removed} deletion{'s' if removed != 1 else ''}(-)")
    return ", ".join(parts)
