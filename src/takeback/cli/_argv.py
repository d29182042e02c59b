"""CLI layer: a command line read without the argument parser, for the calls that start fast.

Three readers need a command line's words before (or instead of) ``argparse``: the
relay (which commands the watching service may run, and their options), a hook call
(which agent, which store; its parser is never built), and the choice of which one
command's parser to build. They read it with this one reader and one table of the
options that take a value, so an option added to every command is added once.

``--name VALUE`` and ``--name=VALUE`` both work; ``-m VALUE`` is ``--message VALUE``.
Anything else that starts with ``-`` (but ``-`` itself) is an option this reader does
not know, kept in ``unknown`` for the caller to refuse or hand to the parser.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the relay's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

#: the options every command takes, each with a value
GLOBAL_VALUED = ("--root", "--store", "--session", "--max-file-bytes")
#: short names, as the parser knows them
ALIASES = {"-m": "--message"}


class Line:
    """A command line's positional words, its valued options, and what was not read.

    Attributes:
        words: the positional words, in order (option values left out).
        opts: each valued option's last value, by its long name.
        unknown: the options this reader does not know (``--help``, ``-V``, a typo).
        missing: the valued option that ended the line without its value (None: none).
    """

    __slots__ = ("missing", "opts", "unknown", "words")

    def __init__(self) -> None:
        self.words: list[str] = []
        self.opts: dict[str, str] = {}
        self.unknown: list[str] = []
        self.missing: str | None = None


def read(
    argv: Sequence[str], valued: Collection[str] = GLOBAL_VALUED, flags: Collection[str] = ()
) -> Line:
    """Read ``argv``: options in ``valued`` take a value, those in ``flags`` take none."""
    line = Line()
    i = 0
    while i < len(argv):
        a = argv[i]
        name, eq, value = a.partition("=")
        long = ALIASES.get(a)
        if long is not None and long in valued:
            name, eq = long, ""
        if name in valued and name.startswith("--"):
            if not eq:
                if i + 1 >= len(argv):
                    line.missing = name
                    break
                i += 1
                value = argv[i]
            line.opts[name] = value
        elif a in flags:
            pass
        elif a.startswith("-") and a != "-":
            line.unknown.append(a)
        else:
            line.words.append(a)
        i += 1
    return line
