"""CLI layer: ``takeback``. argv, environment, current folder, stdout and exit codes live here.

``main(argv) -> int`` never calls ``sys.exit``; it is the one place that turns an
exception into an exit code (the code each error class carries).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):
        from .. import __version__

        print(f"takeback {__version__}")
        return 0
    if "hook" in args:
        # A hook call is parsed on its own, before the full parser: it starts faster, and a
        # bad option is logged instead of ending in exit 2 (which blocks the agent).
        from .hook_cmd import entry

        code = entry(args)
        if code is not None:
            return code
    # Imported here: `--version` and hook calls never pay for the parser and its commands.
    from ._app import build_parser, command_in, run

    return run(build_parser(command_in(args)), args)


__all__ = ["main"]
