"""CLI layer: handing a command to the workspace's running service (the relay).

With the watching service running, ``takeback snapshot``, ``takeback status`` and
``takeback hook claude-code`` are run by the service: this module finds its socket from the command
line and the environment alone, sends the call (argv, current folder, environment,
stdin) and prints what the service's run of the same command printed. The service runs
it through the same code a run here would (``cli/_served.py``), in a process that has
the library loaded and knows what changed, so the call costs a process start and the
work itself. Every other command, and every call the service does not take, runs here.

Nothing runs twice and nothing is dropped. Before sending, the client makes a *claim*
file in the service's ``claims/`` folder; the service removes it before it runs the call
and answers ``taken``; a client with no such answer within ``WAIT_TAKEN`` seconds removes
it itself and runs the call here. Only one of the two removals can succeed, and whoever
removed the claim runs the call.

The relay is not tried (the caller runs the command itself) with ``TAKEBACK_RELAY=0``,
for a database store, when the user's data folder is not known without ``platformdirs``,
when no service socket is there, when the service is another installation's, or when it
does not take the call.
"""

from __future__ import annotations

import os

from .._where import (
    CLAIMS_DIR,
    SOCKET_NAME,
    default_store_path,
    foreign_folder,
    peer_uid,
    recorded_root,
    service_dir,
    via_short_path,
)
from .._wire import DONE, TAKEN, call_frame, done, header
from ._argv import GLOBAL_VALUED, read

TYPE_CHECKING = False  # not typing's: see takeback/__init__.py
if TYPE_CHECKING:
    import _socket
    from collections.abc import Mapping, Sequence

#: ``0`` (or ``off``): every command runs in its own process, never in the service.
RELAY_ENV = "TAKEBACK_RELAY"
#: How long the client waits for the service to take a call before running it itself.
WAIT_TAKEN = 0.5
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


class BrokeOff(Exception):  # named for what happened, not "...Error": it is no bug
    """The service took the call and then stopped answering: it may have run part of it."""


def _stuck(store_path: str) -> None:
    """The service did not take a call in time: the call's own scans do not ask it again."""
    from .._service_client import answer_here

    answer_here(store_path, f"the service did not answer within {WAIT_TAKEN:g} s")


def _package() -> str:
    """The installed takeback the service must also be running (its folder)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    if got is None:
        return None
    _words, opts = got
    env = os.environ
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


def exchange(
    store_path: str,
    argv: list[str],
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | None,
) -> tuple[int, str, str] | None:
    """Hand one call to the store's service; return its exit code, stdout and stderr.

    None: the service did not take it, and it runs here.

    Waits as long as the service runs the call once it has taken it (a hook call is
    bounded by its own ``Deadline``).

    Raises:
        BrokeOff: the service took the call and then closed the connection or stopped.
    """
    if env.get(RELAY_ENV, "").strip().lower() in ("0", "off", "no", "false"):
        return None
    sdir = service_dir(store_path)
    if not os.path.exists(os.path.join(sdir, SOCKET_NAME)) or foreign_folder(sdir):
        return None  # none runs; or its folder is not this user's alone: run it here
    claim = os.path.join(sdir, CLAIMS_DIR, os.urandom(12).hex())
    try:
        os.close(os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except OSError:
        return None  # no claims folder (a service that takes no calls), no room
    request = call_frame(os.path.basename(claim), _package(), argv, cwd, env, stdin)
    sock = None
    lines = None
    first = None
    try:
        sock = _connect(sdir)
        if peer_uid(sock) != os.geteuid():
            # Not this user's service: it gets neither the environment nor the input.
            sock.close()
            sock = None
            _withdraw(claim)
            return None
        sock.sendall(request)
        lines = _Lines(sock)
        first = lines.next(WAIT_TAKEN)
    except OSError:
        pass
    try:
        if first != TAKEN:
            if _withdraw(claim):
                if lines is not None and lines.timed_out:
                    _stuck(store_path)
                return None  # the service did not take it: it runs here
            if lines is None:
                raise BrokeOff(_BROKE)
            # Taken just as we gave up waiting: its answer is still to come.
            while first != TAKEN:
                first = lines.next(None)
                if first is None:
                    raise BrokeOff(_BROKE)
        assert lines is not None
        last = lines.next(None)
        size = None if last is None else header(last, DONE)
        body = None if size is None else lines.read(size)
        if body is None:
            raise BrokeOff(_BROKE)
        return done(body)
    except (OSError, ValueError, AttributeError) as e:
        raise BrokeOff(_BROKE) from e
    finally:
        if sock is not None:
            sock.close()


_BROKE = (
    "the watching service stopped answering while it ran this call; "
    "`takeback log` shows whether it was recorded"
)


def _withdraw(claim: str) -> bool:
    """Take a claim back; True when it was still ours (the service never took the call)."""
    try:
        os.unlink(claim)
    except FileNotFoundError:
        return False
    return True


def _connect(sdir: str) -> _socket.socket:
    # ``_socket``, the C module under ``socket``: ``socket`` costs a process 2 ms of
    # enum conversions, and the relay needs none of what it adds.
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(WAIT_TAKEN)
        via_short_path(os.path.join(sdir, SOCKET_NAME), sock.connect)
    except BaseException:
        sock.close()
        raise
    return sock


class _Lines:
    """The lines the service sends on one connection."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        #: the last line asked for did not come in time (the connection is still open)
        self.timed_out = False

    def next(self, timeout: float | None) -> bytes | None:
        """Return the next line (None: the connection closed, or ``timeout`` s passed)."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.timed_out = True
                    return None
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                self.timed_out = True
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def read(self, size: int) -> bytes | None:
        """Return the next ``size`` bytes (None: the connection closed before them)."""
        self.sock.settimeout(None)
        while len(self.buf) < size:
            chunk = self.sock.recv(max(1 << 16, size - len(self.buf)))
            if not chunk:
                return None
            self.buf += chunk
        data, self.buf = self.buf[:size], self.buf[size:]
        return data
