"""CLI layer: ``takeback``. argv, environment, current folder, stdout and exit codes live here.

``main(argv) -> int`` never calls ``sys.exit``; it is the one place that turns an
exception into an exit code (the code each error class carries).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: see takeback/__init__.py
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


#: The exit code when stdout is closed before the output ends (``takeback log | head``):
#: git's, which dies of SIGPIPE (128 + 13, as the shell reports it).
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None, *, relay: bool = True) -> int:
    """Run the command line and return the exit code.

    With ``relay`` (the default), a command the workspace's running service takes is
    run by it (``_relay``); the service itself runs what it takes with ``relay=False``.

    When the reader of stdout goes away early (``takeback status | head -1``), the
    output stops quietly, as git's does: no error, no traceback, exit 141.
    """
    try:
        code = _main(argv, relay)
        if sys.stdout is not None:  # None: started with no stdout (``>&-``), output dropped
            sys.stdout.flush()  # what is still buffered fails here, not at exit
    except BrokenPipeError:
        # Python would try to flush stdout again at exit and print an error about it:
        # stdout is pointed at /dev/null so that last flush has nowhere to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    return code


#: the commands the workspace's service may run (``_relay._COMMANDS`` says with what)
_RELAYED = frozenset({"snapshot", "status", "rewind", "undo", "redo", "revert", "unrevert"})


def _main(argv: Sequence[str] | None, relay: bool) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):
        from .. import __version__

        print(f"takeback {__version__}")
        return 0
    # A command's own process (no argv given) ends as soon as its call is done, here or
    # by the service: nothing is open then, and the interpreter's teardown (2 ms, and
    # 14 ms after a full scan at 100,000 files) is skipped.
    end = _end_process if argv is None else None
    if relay and not _RELAYED.isdisjoint(args):
        # With the workspace's service running, it takes these (see ``_relay``).
        from ._relay import try_command

        code = try_command(args)
        if code is not None:
            if end is not None:
                end(code)
            return code
    if "hook" in args:
        # A hook call is parsed on its own, before the full parser: it starts faster, and a
        # bad option is logged instead of ending in exit 2 (which blocks the agent).
        from .hook_cmd import entry

        code = entry(args, end=end if relay else None)
        if code is not None:
            return code
    # Imported here: `--version` and hook calls never pay for the parser and its commands.
    from ._app import build_parser, command_in, run

    only = command_in(args)
    # A process that runs many command lines (the watching service) builds each command's
    # parser once: parsing changes nothing in it.
    parser = _PARSERS.get(only)
    if parser is None:
        parser = _PARSERS[only] = build_parser(only)
    code = run(parser, args)
    if end is not None and only in _ENDS_AT_ONCE:
        # Its store is closed and its output written: what the interpreter would still
        # do is free what the scan left in memory, one object at a time (14 ms of a
        # 0.2 s full scan at 100,000 files).
        end(code)
    return code


#: The commands whose own process ends as soon as they are done (see ``_end_process``):
#: they run no thread, child or open file past their end.
_ENDS_AT_ONCE = frozenset({"snapshot", "status"})


_PARSERS: dict[str | None, Any] = {}


def _end_process(code: int) -> None:
    """Flush what was printed and end the process now, with ``code``.

    For a command's own process only, once nothing is open: the interpreter's teardown
    (freeing every object, module by module, then the atexit hooks) is skipped.
    """
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


__all__ = ["main"]
