"""CLI layer: handing a command to the workspace's running service (the relay's fast path).

With the watching service running, ``takeback snapshot``, ``takeback status``, the
take-backs and ``takeback hook AGENT`` are run by the service: this module reads from the
command line and the environment alone which command it is and which store it uses, and
hands it to the service's client (``takeback._service_client.exchange``: the claim, the
call's frames, the answer), then prints what the service's run of the same command
printed. The service runs it through the same code a run here would (``cli/_served.py``),
in a process that has the library loaded and knows what changed, so the call costs a
process start and the work itself. Every other command, and every call the service does
not take, runs here.

The relay is not tried (the caller runs the command itself) with ``TAKEBACK_RELAY=0``,
for a database store, when the user's data folder is not known without ``platformdirs``,
when no service socket is there, when the service is another installation's, or when it
does not take the call. The client is imported only once the relay is tried: a command
that runs here with the relay off loads none of it.
"""

from __future__ import annotations

import os

from .._where import default_store_path, recorded_root
from ._argv import GLOBAL_VALUED, read

TYPE_CHECKING = False  # not typing's: see takeback/__init__.py
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: ``0`` (or ``off``): every command runs in its own process, never in the service.
RELAY_ENV = "TAKEBACK_RELAY"
#: The commands the service runs when asked, each with the options it takes there besides
#: the global ones (valued, flags). A line with any other option, or with paths after
#: ``--``, runs here: a patch's questions need the terminal, and what the relay does not
#: read it does not hand on.
_TAKE_BACK_FLAGS = ("--json", "--dry-run", "--force")
_COMMANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "snapshot": (("--message",), ("--json",)),
    "status": ((), ("--json",)),
    "rewind": (("--to", "--plan"), ("--json", "--dry-run")),
    "undo": (("--turn", "--file", "--plan"), _TAKE_BACK_FLAGS),
    "redo": (("--plan",), _TAKE_BACK_FLAGS),
    "revert": (("--to-turn", "--plan"), _TAKE_BACK_FLAGS),
    "unrevert": (("--plan",), _TAKE_BACK_FLAGS),
}
#: every option any of them takes (which command a line names is known once it is read)
_VALUED = tuple({*GLOBAL_VALUED, *(v for vs, _f in _COMMANDS.values() for v in vs)})
_FLAGS = tuple({f for _v, fs in _COMMANDS.values() for f in fs})


def relay_on(env: Mapping[str, str]) -> bool:
    """Return whether commands are handed to the service at all (``$TAKEBACK_RELAY``)."""
    return env.get(RELAY_ENV, "").strip().lower() not in ("0", "off", "no", "false")


def _options(argv: Sequence[str]) -> tuple[list[str], dict[str, str]] | None:
    """Return a command line's words and options, or None for anything not relayed."""
    line = read(argv, _VALUED, _FLAGS)
    if line.unknown or line.missing or len(line.words) != 1 or line.words[0] not in _COMMANDS:
        return None  # --help, -V, an unknown option, a value missing: the parser answers
    valued, flags = _COMMANDS[line.words[0]]
    if any(o not in GLOBAL_VALUED and o not in valued for o in line.opts) or any(
        a in _FLAGS and a not in flags for a in argv
    ):
        return None  # another command's option: the parser says what is wrong
    return line.words, line.opts


def _data_dir(env: Mapping[str, str]) -> str | None:
    from ..integrations._data_dir import user_data_dir

    return user_data_dir(env)


def _is_url(store: str) -> bool:
    return store.startswith(("postgresql://", "postgres://"))


def store_for(
    *, root: str | None, store: str | None, env: Mapping[str, str], find_from: str | None
) -> str | None:
    """Return the store folder a command would use (None: not known here, no relay).

    Args:
        root: ``--root`` (or the hook's root), made real here.
        store: ``--store`` or ``$TAKEBACK_STORE``.
        env: the environment (where the data folder is).
        find_from: with no root, the folder to look upward from for a recorded
            workspace, as ``find_root`` does.
    """
    if store:
        return None if _is_url(store) else os.path.realpath(store)
    data = _data_dir(env)
    if data is None:
        return None
    if root:
        return default_store_path(os.path.realpath(root), data)
    if find_from is None:
        return None
    found = recorded_root(os.path.realpath(find_from), data)  # as find_root finds it
    return default_store_path(found, data) if found is not None else None  # None: a new one


def try_command(argv: Sequence[str]) -> int | None:
    """Have the service run a command it takes; return its exit code, or None to run here."""
    got = _options(argv)
    env = os.environ
    if got is None or not relay_on(env):
        return None
    _words, opts = got
    try:
        cwd = os.getcwd()
    except FileNotFoundError:
        return None  # the folder it was run from is gone: the command says so itself
    path = store_for(
        root=opts.get("--root"),
        store=opts.get("--store") or env.get("TAKEBACK_STORE"),
        env=env,
        find_from=cwd,
    )
    if path is None:
        return None
    import sys

    from .._service_client import BrokeOff, exchange

    try:
        answer = exchange(path, list(argv), cwd, env, None)
    except BrokeOff as e:
        print(f"takeback: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # The service goes on with the call, as a snapshot interrupted here would not;
        # `takeback log` shows it.
        print("takeback: interrupted", file=sys.stderr)
        return 130
    if answer is None:
        return None
    code, out, err = answer
    # As print does: a process started without stdout or stderr drops what goes there.
    if sys.stdout is not None:
        sys.stdout.write(out)
    if sys.stderr is not None:
        sys.stderr.write(err)
    return code
