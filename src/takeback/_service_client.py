"""Base layer: the client of a workspace's watching service, all that talks to its socket.

The service (``integrations/_service.py``) listens on a Unix socket in the store's
``service/`` folder (0700; the socket 0600), one exchange per connection. The client
connects (:func:`connect`), and sends nothing to a socket another user listens on; then
it sends one of two things:

- a question, a JSON line in and a JSON line out, all within ``ASK_TIMEOUT`` seconds
  (:func:`ask`). :func:`changes_since` asks "what changed since the mark this scan's
  cache was taken at"; every way the answer can fail (no service, a dead one, one that
  answers late or with garbage) comes back as a :class:`Changes` with no folders and the
  reason, so the caller takes a full scan. In the service's own process the question
  goes to the service itself, not the socket (:func:`answer_here`);
- a call (:func:`exchange`): a command the relay (``cli/_relay.py``) hands over whole,
  in the frames of ``_wire.py`` (argv, current folder, environment, stdin), and the exit
  code and output of the service's run of it.

Nothing runs twice and nothing is dropped. Before sending a call, the client makes a
*claim* file in the service's ``claims/`` folder; the service removes it before it runs
the call and answers ``taken``; a client with no such answer within ``WAIT_TAKEN``
seconds removes it itself and runs the call here. Only one of the two removals can
succeed, and whoever removed the claim runs the call.

It sits in the base layer and loads nothing of the library, because the relay uses it on
a command's way to the service: importing it loads ``os`` and the base modules alone.
``json`` is imported by the question itself, the socket is ``_socket``'s (``socket``
costs a process 2 ms of enum conversions), and the records are plain classes
(``dataclasses`` and ``typing`` load ``re``, ``inspect`` and more).
"""

from __future__ import annotations

import os

from ._where import (
    CLAIMS_DIR,
    PID_NAME,
    SERVICE_DIR,
    SOCKET_NAME,
    foreign_folder,
    peer_uid,
    service_dir,
    via_short_path,
)
from ._wire import DONE, TAKEN, call_frame, done, header

TYPE_CHECKING = False  # not typing's: see takeback/__init__.py
if TYPE_CHECKING:
    import _socket
    from collections.abc import Callable, Mapping
    from typing import Any, Final

#: How long a scan waits for the service's answer before it scans in full.
ASK_TIMEOUT = 0.5
#: How long a call waits for the service to take it before it runs here.
WAIT_TAKEN = 0.5


class ServiceError(Exception):
    """The service could not be asked or answered nonsense; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StrangerError(ServiceError):
    """The socket's process is another user's: it is sent nothing."""


class BrokeOff(Exception):  # named for what happened, not "...Error": it is no bug
    """The service took the call and then stopped answering: it may have run part of it."""


class _Record:
    """Equality, hash and repr by the fields in ``__slots__``, as a frozen dataclass's."""

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Record) or type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"


class ServicePaths(_Record):
    """Where a workspace's service keeps its socket, pid file and log (in the store)."""

    __slots__ = ("store",)
    store: Final[str]

    def __init__(self, store: str) -> None:
        self.store = store

    @property
    def dir(self) -> str:
        """The service's folder in the store (0700)."""
        return os.path.join(self.store, SERVICE_DIR)

    @property
    def socket(self) -> str:
        """The socket it listens on (0600)."""
        return os.path.join(self.dir, SOCKET_NAME)

    @property
    def pid(self) -> str:
        """Its pid file, locked while it runs: one service per workspace."""
        return os.path.join(self.dir, PID_NAME)

    @property
    def claims(self) -> str:
        """The claim files of the calls the relay hands over (see :func:`exchange`)."""
        return os.path.join(self.dir, CLAIMS_DIR)

    @property
    def log(self) -> str:
        """Where it writes why it stopped, when that was a failure."""
        return os.path.join(self.dir, "log")


class ServiceReply(_Record):
    """An answer of the service (``error`` is '' when there is one)."""

    __slots__ = ("answer", "error")
    answer: Final[Any]
    error: Final[str]

    def __init__(self, answer: Any, error: str = "") -> None:
        self.answer = answer
        self.error = error


class Mark(_Record):
    """A point in one service's event stream, kept with the scan cache it vouches for."""

    __slots__ = ("service", "gen")
    service: Final[str]
    gen: Final[int]

    def __init__(self, service: str, gen: int) -> None:
        self.service = service
        self.gen = gen

    def encode(self) -> bytes:
        """Return the form kept in the store."""
        return f"{self.service}:{self.gen}".encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Mark | None:
        """Read a kept mark (None for none or a malformed one)."""
        if not raw:
            return None
        service, _, gen = raw.decode("ascii", "replace").rpartition(":")
        if not service or not gen.isdigit():
            return None
        return cls(service, int(gen))


class Changes(_Record):
    """The service's answer for one scan.

    Attributes:
        mark: the new mark (None: no service answered); the scan's cache is kept with it.
        dirs: folders changed since the asked mark; None: scan in full.
        reason: why a full scan ('' when ``dirs`` is given).
        index: git's index changed since the asked mark.
        ms: how long the question took.
        subtrees: folders the service has no watch on (the watch limit was met): each
            is listed, with every folder below it, by the scan.
    """

    __slots__ = ("mark", "dirs", "reason", "index", "ms", "subtrees")
    mark: Final[Mark | None]
    dirs: Final[list[str] | None]
    reason: Final[str]
    index: Final[bool]
    ms: Final[float]
    subtrees: Final[tuple[str, ...]]

    def __init__(
        self,
        mark: Mark | None,
        dirs: list[str] | None,
        reason: str,
        index: bool = False,
        ms: float = 0.0,
        subtrees: tuple[str, ...] = (),
    ) -> None:
        self.mark = mark
        self.dirs = dirs
        self.reason = reason
        self.index = index
        self.ms = ms
        self.subtrees = subtrees


#: store folder (real path) -> who answers its questions in this very process: the
#: service itself (it runs the calls the relay hands it, and their scans ask it without
#: a socket), or the reason none will (a call found it stuck: no second wait).
_HERE: dict[str, Callable[[dict[str, Any]], Any] | str] = {}


def answer_here(store_path: str, answer: Callable[[dict[str, Any]], Any] | str | None) -> None:
    """Say who answers this process's questions about ``store_path``.

    Args:
        store_path: the store's folder, as a real path.
        answer: takes a request and returns the answer the socket would carry; or why
            the service cannot answer (every question then gets that reason at once, and
            a full scan); None: ask over the socket again.
    """
    if answer is None:
        _HERE.pop(store_path, None)
    else:
        _HERE[store_path] = answer


def ask_service(
    store_path: str, request: dict[str, Any], *, timeout: float = ASK_TIMEOUT
) -> ServiceReply:
    """Send one request to the workspace's service; never raises.

    Returns:
        The decoded answer, or an ``error`` saying why there is none (no service, no
        answer within ``timeout`` seconds, an answer that is not JSON).
    """
    try:
        return ServiceReply(ask(store_path, request, timeout=timeout))
    except ServiceError as e:
        return ServiceReply(None, e.reason)


def connect(store_path: str, timeout: float) -> _socket.socket:
    """Connect to the workspace's service, and check that it is this user's.

    Raises:
        ServiceError: no service listens there, or it cannot be reached in ``timeout``
            seconds.
        StrangerError: the process listening is another user's.
    """
    path = os.path.join(service_dir(store_path), SOCKET_NAME)
    if not os.path.exists(path):
        # Most scans run with no service: they learn so without making a socket.
        raise ServiceError("no service is running")
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            via_short_path(path, sock.connect)
        except FileNotFoundError as e:
            raise ServiceError("no service is running") from e
        except ConnectionRefusedError as e:
            raise ServiceError("the service is not running (it stopped or died)") from e
        except TimeoutError as e:
            raise ServiceError(f"the service did not answer within {timeout:g} s") from e
        except OSError as e:
            raise ServiceError(f"the service cannot be reached: {e.strerror or e}") from e
        if peer_uid(sock) != os.geteuid():
            # Not this user's service: it gets neither a question nor a call.
            raise StrangerError("the service's socket belongs to another user")
    except BaseException:
        sock.close()
        raise
    return sock


def ask(store_path: str, request: dict[str, Any], *, timeout: float = ASK_TIMEOUT) -> Any:
    """Send one request and return the decoded answer, all within ``timeout`` seconds.

    Raises:
        ServiceError: no service, no answer in time, or an answer that is not JSON.
    """
    here = _HERE.get(store_path)
    if isinstance(here, str):
        raise ServiceError(here)
    if here is not None:
        return here(request)
    import json
    import time

    deadline = time.monotonic() + timeout
    sock = connect(store_path, timeout)
    try:
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
        except OSError as e:
            # It closed the connection first (a stranger refused, a service going away).
            raise ServiceError(f"the service broke off: {e.strerror or e}") from e
        chunks: list[bytes] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServiceError(f"the service did not answer within {timeout:g} s")
            sock.settimeout(left)
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError as e:
                raise ServiceError(f"the service did not answer within {timeout:g} s") from e
            except OSError as e:
                raise ServiceError(f"the service broke off: {e.strerror or e}") from e
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    finally:
        sock.close()
    raw = b"".join(chunks)
    if not raw:
        raise ServiceError("the service closed the connection without an answer")
    try:
        return json.loads(raw)
    except ValueError as e:
        raise ServiceError("the service's answer was not understood") from e


def changes_since(store_path: str, mark: Mark | None, *, timeout: float = ASK_TIMEOUT) -> Changes:
    """Ask the service what changed since ``mark`` (and for a new mark); never raises."""
    import time

    t0 = time.monotonic()
    try:
        got = ask(
            store_path,
            {
                "op": "mark",
                "service": mark.service if mark else None,
                "gen": mark.gen if mark else None,
            },
            timeout=timeout,
        )
        new = Mark(str(got["service"]), int(got["gen"]))
        dirs = got["dirs"]
        if dirs is not None and not (
            isinstance(dirs, list) and all(isinstance(d, str) for d in dirs)
        ):
            raise ServiceError("the service's answer was not understood")
        reason = str(got.get("reason") or "")
        index = bool(got.get("index", False))
        subtrees = got.get("subtrees") or []
        if not (isinstance(subtrees, list) and all(isinstance(d, str) for d in subtrees)):
            raise ServiceError("the service's answer was not understood")
    except ServiceError as e:
        return Changes(None, None, e.reason, ms=(time.monotonic() - t0) * 1000)
    except (KeyError, TypeError, ValueError):
        return Changes(
            None,
            None,
            "the service's answer was not understood",
            ms=(time.monotonic() - t0) * 1000,
        )
    if dirs is None and not reason:
        reason = "the service asked for a full scan"
    return Changes(new, dirs, reason, index, (time.monotonic() - t0) * 1000, tuple(subtrees))


_BROKE = (
    "the watching service stopped answering while it ran this call; "
    "`takeback log` shows whether it was recorded"
)


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
        sock = connect(store_path, WAIT_TAKEN)
        sock.sendall(request)
        lines = _Lines(sock)
        first = lines.next(WAIT_TAKEN)
    except StrangerError:
        # It gets neither the environment nor the input.
        _withdraw(claim)
        return None
    except (ServiceError, OSError):
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


def _package() -> str:
    """The installed takeback the service must also be running (its folder)."""
    return os.path.dirname(os.path.abspath(__file__))


def _withdraw(claim: str) -> bool:
    """Take a claim back; True when it was still ours (the service never took the call)."""
    try:
        os.unlink(claim)
    except FileNotFoundError:
        return False
    return True


def _stuck(store_path: str) -> None:
    """The service did not take a call in time: the call's own scans do not ask it again."""
    answer_here(store_path, f"the service did not answer within {WAIT_TAKEN:g} s")


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
