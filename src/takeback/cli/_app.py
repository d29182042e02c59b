"""CLI layer: the parser, the shared options, and the translation of errors to exit codes."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, TakebackError, UsageError
from ._render import quote_path

if TYPE_CHECKING:
    from .. import StoreAddress, Workspace

#: command name -> module (one module per command)
COMMANDS = {
    "snapshot": "snapshot_cmd",
    "status": "status_cmd",
    "log": "log_cmd",
    "diff": "diff_cmd",
    "show": "show_cmd",
    "rewind": "rewind_cmd",
    "run": "run_cmd",
    "changes": "changes_cmd",
    "undo": "undo_cmd",
    "redo": "redo_cmd",
    "revert": "revert_cmd",
    "unrevert": "unrevert_cmd",
    "bisect": "bisect_cmd",
    "turn": "turn_cmd",
    "touch": "touch_cmd",
    "adopt": "adopt_cmd",
    "ui": "ui_cmd",
    "service": "service_cmd",
    "store": "store_cmd",
    "gc": "gc_cmd",
    "purge": "purge_cmd",
    "fsck": "fsck_cmd",
    "du": "du_cmd",
    "config": "config_cmd",
}

SCHEMA = 1


class ArgError(Exception):
    """argparse found bad arguments (exit 2, one line)."""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter (descriptions kept as written), its width found without shutil.

    argparse asks ``shutil.get_terminal_size`` for the width whenever a parser is given
    an argument (it formats each to check it), and importing shutil loads bz2, lzma and
    fnmatch: a few ms of every command a process runs without the service. The width is
    found as shutil finds it: ``COLUMNS``, else the terminal's, else 80.
    """

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = _columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def _columns() -> int:
    """The terminal's width in columns, as ``shutil.get_terminal_size`` gives it."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # argparse's hook
        # One prefix for every error, whichever command's parser found it.
        raise ArgError(f"takeback: error: {message}")


#: the largest number SQLite stores: a step, a turn or a count beyond it is refused
_MAX_NUMBER = 2**63 - 1


def number(text: str) -> int:
    """Parse an integer option (argparse ``type``), refusing what the store cannot hold.

    Raises:
        argparse.ArgumentTypeError: not an integer, or beyond SQLite's 64-bit integers.
    """
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if abs(n) > _MAX_NUMBER:
        raise argparse.ArgumentTypeError(f"{text} is too large")
    return n


def days(text: str) -> float:
    """Parse a number of days (argparse ``type``): finite and not negative.

    Raises:
        argparse.ArgumentTypeError: not a number, infinite, NaN or negative.
    """
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"not a finite number of days, 0 or more: {text!r}")
    return value


def common_options(*, documented: bool = True) -> _Parser:
    """Return the options every command takes, before or after its name.

    They are documented once, in ``takeback --help`` (``documented``); each command's own
    help leaves them out.
    """
    p = _Parser(add_help=False)
    say = (lambda text: text) if documented else (lambda _text: argparse.SUPPRESS)
    p.add_argument(
        "--root",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help=say(
            "the workspace (default: the recorded workspace the current folder lies in, "
            "as git finds its repository, else the current folder)"
        ),
    )
    p.add_argument(
        "--store",
        default=argparse.SUPPRESS,
        metavar="DIR|URL",
        help=say(
            "the store: a folder, or a postgresql:// address (default: $TAKEBACK_STORE, "
            "else one folder per workspace in the user's data folder)"
        ),
    )
    p.add_argument(
        "--session",
        default=argparse.SUPPRESS,
        metavar="NAME",
        help=say(
            "the session (default: $TAKEBACK_SESSION; else, to record, 'default', and to "
            "take back or look, the session of the newest turn)"
        ),
    )
    p.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help=say("print one JSON document on stdout instead of text"),
    )
    p.add_argument(
        "--max-file-bytes",
        type=number,
        default=argparse.SUPPRESS,
        metavar="N",
        help=say("files larger than this are not kept (default: 16 MiB)"),
    )
    return p


#: The commands, grouped as ``takeback --help`` lists them.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("record", ("snapshot", "run", "turn", "touch", "watch")),
    ("look", ("status", "log", "diff", "show", "changes", "bisect", "ui")),
    ("take back", ("undo", "redo", "revert", "unrevert", "rewind")),
    ("agents", ("hooks", "hook", "mcp", "service")),
    ("the store", ("gc", "config", "purge", "fsck", "du", "store", "adopt")),
)

EPILOG = """examples:
  takeback run -- npm run format      run a command as one step, its changes recorded
  takeback changes                    what the last turn changed
  takeback undo --dry-run             what undo would write; then: takeback undo
  takeback rewind --to start -- src   put src/ back as it was when the session began
  takeback hooks install claude-code  record every reply of Claude Code in this project

Run 'takeback COMMAND --help' for a command's options. The manual: docs/ (README)."""


def _grouped(registry: dict[str, str], helps: dict[str, str]) -> str:
    """The commands by group, each with its one line of help."""
    lines = []
    listed: set[str] = set()
    for title, names in GROUPS:
        lines.append(f"{title}:")
        for name in names:
            if name in registry:
                lines.append(f"  {name:<10} {helps.get(name, '')}")
                listed.add(name)
    rest = [n for n in registry if n not in listed]
    if rest:
        lines.append("other:")
        lines += [f"  {name:<10} {helps.get(name, '')}" for name in rest]
    return "\n".join(lines)


def command_in(argv: list[str]) -> str | None:
    """Return the command named in ``argv`` (the first word that is no option's value)."""
    from ._argv import GLOBAL_VALUED, read

    words = read(argv, GLOBAL_VALUED).words
    return words[0] if words else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Return the parser; with ``only``, just that command's (start-up is paid per call)."""
    from . import integrations_cmd

    registry = {**COMMANDS, **integrations_cmd.COMMANDS}
    parser = _Parser(
        prog="takeback",
        parents=[common_options()],
        description="Record what an agent does to a folder and take it back.",
        epilog=EPILOG,
        formatter_class=_Formatter,
    )
    parser.add_argument("-V", "--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    names = [only] if only in registry else list(registry)
    common = common_options(documented=False)
    helps: dict[str, str] = {}
    for name in names:
        module = registry[name]
        mod = importlib.import_module(f".{module}", __package__)
        helps[name] = mod.HELP
        sp = sub.add_parser(
            name,
            parents=[common],
            description=mod.HELP + " (the options every command takes: takeback --help)",
            formatter_class=_Formatter,
        )
        mod.add_arguments(sp)
        sp.set_defaults(_module=module, _after_dashdash=getattr(mod, "AFTER_DASHDASH", None))
    if only not in registry:
        parser.epilog = _grouped(registry, helps) + "\n\n" + EPILOG
    return parser


def _is_text(name: str) -> bool:
    """Whether a name from argv or the environment is valid UTF-8 (no escaped bytes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Ctx:
    """What a command needs from the process: options, environment, folder, output."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.json: bool = bool(getattr(args, "json", False))
        given_root = getattr(args, "root", None)
        try:
            self.cwd = os.getcwd()
        except FileNotFoundError:
            # The folder the command was run from was removed: with an absolute --root
            # there is nothing to take from it.
            if not (given_root and os.path.isabs(given_root)):
                raise UsageError(
                    "the current folder no longer exists: cd to one that does, "
                    "or give --root DIR as an absolute path"
                ) from None
            self.cwd = given_root
        # An empty variable is an unset one (`export TAKEBACK_STORE=` names no folder).
        given = getattr(args, "store", None) or os.environ.get("TAKEBACK_STORE") or None
        #: the store folder, or a database's address, parsed here once (a secret)
        self.store: str | StoreAddress | None = given
        if given is not None and given.startswith(("postgresql://", "postgres://")):
            from .. import StoreAddress

            self.store = StoreAddress(given)
        self._session: str | None = (
            getattr(args, "session", None) or os.environ.get("TAKEBACK_SESSION") or None
        )
        if self._session is not None and not _is_text(self._session):
            raise UsageError(
                "a session name must be text (UTF-8): "
                f"{self._session.encode('utf-8', 'surrogateescape')!r} is not"
            )
        self.max_file_bytes: int | None = getattr(args, "max_file_bytes", None)
        from ..integrations._data_dir import user_data_dir

        #: where default stores live (None: the library asks platformdirs)
        self.data_dir = user_data_dir(os.environ)
        if given_root:
            self.root: str = given_root
        else:
            # Like git from a subfolder: the recorded workspace this folder lies in.
            from .. import find_root

            self.root = find_root(self.cwd, store=self.store, data_dir=self.data_dir)
        self._ws: Workspace | None = None

    def workspace(self) -> Workspace:
        """Return the Workspace for --root/--store (made once)."""
        if self._ws is None:
            from .. import Workspace

            kwargs: dict[str, Any] = {"store": self.store, "data_dir": self.data_dir}
            if self.max_file_bytes is not None:
                kwargs["max_file_bytes"] = self.max_file_bytes
            self._ws = Workspace(self.root, **kwargs)
        return self._ws

    @property
    def recording_session(self) -> str:
        """Where a recording command records: --session, else $TAKEBACK_SESSION, else default.

        Never the session an agent's hooks record in: a person's own ``run`` or
        ``snapshot`` must not join an agent's conversation (nor its undo take them back).
        """
        from .. import DEFAULT_SESSION

        return self._session or DEFAULT_SESSION

    @property
    def session(self) -> str:
        """--session, else $TAKEBACK_SESSION, else the session whose turn ended last."""
        if self._session is None:
            self._session = str(self.workspace().active_session())
        return self._session

    def rel_paths(self, paths: Sequence[str]) -> list[str] | None:
        """Return command-line paths (relative to the current folder) relative to the root."""
        if not paths:
            return None
        ws = self.workspace()
        return [ws.rel(p, base=self.cwd) for p in paths]

    def out(self, text: str = "") -> None:
        """Print a line for people (nothing in --json mode)."""
        if not self.json:
            print(text)

    def emit_json(self, doc: dict[str, Any]) -> None:
        """Print the one JSON document of a --json run (strict JSON: no NaN or Infinity)."""
        print(json.dumps({"schema": SCHEMA, **doc}, indent=2, sort_keys=True, allow_nan=False))

    def warn(self, text: str) -> None:
        """Print a warning to stderr."""
        print(f"takeback: warning: {text}", file=sys.stderr)

    def opened(self) -> bool:
        """Whether the command used a workspace whose store exists."""
        return self._ws is not None and self._ws.has_store()

    def close(self) -> None:
        """Close the workspace's store."""
        if self._ws is not None:
            self._ws.close()


def _warn_interrupted(ctx: Ctx) -> None:
    try:
        journal = ctx.workspace().interrupted()
    except TakebackError:
        return
    if not journal:
        return
    if journal.get("broken"):
        ctx.warn("an interrupted restore left an unreadable journal in the store")
        return
    finish, back = recovery_commands(ctx.workspace().root, journal)
    op = str(journal.get("op", "restore"))
    article = "an" if op[:1] in "aeiou" else "a"
    if finish and back:
        ctx.warn(
            f"{article} {op} was interrupted: finish it with `{finish}` "
            f"or take it back with `{back}`"
        )
    elif back:
        ctx.warn(f"{article} {op} was interrupted: take it back with `{back}`")


#: How many paths a printed recovery command names before it names the whole workspace.
_MAX_NAMED = 20


def recovery_commands(root: str, journal: dict[str, Any]) -> tuple[str | None, str | None]:
    """Return the commands that finish an interrupted operation and that take it back.

    Paths are printed absolute, so the commands work from any folder.
    """
    import shlex

    def cmd(*words: object, paths: Any = None) -> str:
        line = shlex.join(["takeback", *map(str, words)])
        if paths:
            line += " -- " + shlex.join(os.path.join(root, str(p)) for p in paths)
        return line

    session = journal.get("session")
    where: list[str] = ["--session", str(session)] if session else []
    pre, op = journal.get("pre"), journal.get("op")
    planned = [p for p in journal.get("planned") or () if isinstance(p, str)]
    back_paths = (
        journal.get("paths")
        if op == "rewind"
        else (planned if len(planned) <= _MAX_NAMED else None)
    )
    # Ids name snapshots whatever the session: only the turn commands need it.
    back = cmd("rewind", "--to", str(pre)[:10], paths=back_paths) if pre else None
    finish: str | None = None
    raw = journal.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    turns = journal.get("turns") or []
    merge = data.get("merge")
    how = ["--merge=markers"] if merge == "markers" else ["--merge"] if merge else []
    if op == "rewind" and journal.get("target"):
        finish = cmd("rewind", "--to", str(journal["target"])[:10], paths=journal.get("paths"))
    elif op == "undo" and turns:
        extra = ["--file", os.path.join(root, str(journal["file"]))] if journal.get("file") else []
        finish = cmd(*where, "undo", "--turn", turns[0], *extra, *how)
    elif op == "undo-hunks" and turns:
        hunks = [h for h in data.get("hunks") or () if isinstance(h, str)]
        chosen = [w for h in hunks for w in ("--hunk", h)]
        finish = cmd(*where, "undo", "--turn", turns[0], *chosen, *(how or ["--merge"]))
    elif op in ("redo", "unrevert"):
        finish = cmd(*where, op, *how)
    elif op == "revert" and "to_turn" in data:
        finish = cmd(*where, "revert", "--to-turn", data["to_turn"], *how)
    return finish, back


def run(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """Parse, dispatch, and translate errors into the spec's exit codes."""
    # Everything after the first ``--`` is paths (diff, rewind) or a command (run, watch);
    # argparse would drop the ``--`` and mix them with refs, so it is split off here.
    tail: list[str] | None = None
    if "--" in argv:
        i = argv.index("--")
        argv, tail = argv[:i], argv[i + 1 :]
    try:
        args = parser.parse_args(argv)
        if tail is not None:
            kind = getattr(args, "_after_dashdash", None)
            if kind is None:
                raise ArgError(f"takeback: error: unexpected arguments after --: {' '.join(tail)}")
            setattr(args, kind, list(getattr(args, kind, None) or []) + tail)
    except ArgError as e:
        print(e, file=sys.stderr)
        return 2
    if getattr(args, "version", False):
        from .. import __version__

        print(f"takeback {__version__}")
        return 0
    module = getattr(args, "_module", None)
    if module is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        ctx = Ctx(args)
    except TakebackError as e:
        # The store's address could not be read, or its database did not answer.
        if getattr(args, "json", False):
            print(json.dumps({"schema": SCHEMA, **e.to_json()}, indent=2, sort_keys=True))
        print(f"takeback: error: {e.message}", file=sys.stderr)
        return e.exit_code
    try:
        mod = importlib.import_module(f".{module}", __package__)
        if getattr(mod, "CHECKS_JOURNAL", True):
            _warn_interrupted(ctx)
        code: int = mod.run(ctx)
        if getattr(mod, "AUTO_GC", True) and ctx.opened():
            from ..integrations._autogc import start_if_due

            start_if_due(ctx.workspace())
        return code
    except TakebackError as e:
        return _report(ctx, e)
    except KeyboardInterrupt:
        print("takeback: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise  # stdout's reader went away: cli.main ends quietly, as git does
    except OSError as e:
        # A disk that is full or a folder that vanished: one line, not a traceback.
        print(
            f"takeback: error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr
        )
        return 1
    finally:
        ctx.close()


def _conflict_lines(e: ConflictError) -> list[str]:
    """Return a conflict's message a line per path, each path quoted for people.

    The message holds one line per conflict, in order, each starting with its path (a
    path may itself hold a newline), then the advice; a message of another shape is
    split as it is.
    """
    rest = e.message
    lines = []
    for path in e.conflicts:
        if not rest.startswith(path):
            return e.message.splitlines()
        tail, _nl, rest = rest[len(path) :].partition("\n")
        lines.append(quote_path(path) + tail)
    return lines + rest.splitlines()


def _report(ctx: Ctx, e: TakebackError) -> int:
    from ..errors import RestoreError

    if ctx.json:
        ctx.emit_json(e.to_json())
    if isinstance(e, RestoreError):
        print(f"takeback: error: {e.message}", file=sys.stderr)
        for p in e.restored:
            print(f"  restored: {quote_path(p)}", file=sys.stderr)
        for p in e.failed:
            print(f"  not restored: {quote_path(p)}", file=sys.stderr)
        for p, why in sorted(e.left.items()):
            print(f"  left as is: {quote_path(p)} ({why})", file=sys.stderr)
        if e.undo_id:
            print(f"  put it all back with: takeback rewind --to {e.undo_id[:10]}", file=sys.stderr)
    elif isinstance(e, ConflictError):
        lines = _conflict_lines(e)
        if e.regions:
            lines[-1] = "nothing was written; --merge=markers writes conflict markers there"
        elif len(lines) == len(e.conflicts) + 1:
            # The library's closing line speaks of its argument; people type an option.
            lines[-1] = "nothing was written; use --force to overwrite" + (
                " (or --merge to keep both sides' edits)" if "merge" in lines[-1] else ""
            )
        for line in lines:
            print(f"takeback: {line}", file=sys.stderr)
    else:
        print(f"takeback: error: {e.message}", file=sys.stderr)
    return e.exit_code
