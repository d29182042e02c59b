"""Base layer: asking a workspace's watching service what changed (the client side).

The service (``integrations/_service.py``) listens on a Unix socket in the store's
``service/`` folder (0700; the socket 0600). One question per connection: a JSON line
in, a JSON line out. :func:`changes_since` asks "what changed since the mark this
scan's cache was taken at"; every way the answer can fail (no service, a dead one, one
that answers late or with garbage) comes back as a :class:`Changes` with no folders and
the reason, so the caller takes a full scan.

It sits in the base layer, loading nothing of the library, so that the relay
(``cli/_relay.py``) can use it on its way to the service: importing it loads ``os`` and
the base modules alone. ``json`` is imported by the question itself, and the records are
plain classes (``dataclasses`` and ``typing`` load ``re``, ``inspect`` and more).
"""

from __future__ import annotations

import os

from ._where import (
    CLAIMS_DIR,
    PID_NAME,
    SERVICE_DIR,
    SOCKET_NAME,
    peer_uid,
    service_dir,
    via_short_path,
)

TYPE_CHECKING = False  # not typing's: see takeback/__init__.py
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable
    from typing import Any, Final

#: How long a scan waits for the service's answer before it scans in full.
ASK_TIMEOUT = 0.5


class ServiceError(Exception):
    """The service could not be asked or answered nonsense; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
        """The claim files of the calls the relay hands over (see ``cli/_relay.py``)."""
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
#: a socket), or the reason none will (the relay found it stuck: no second wait).
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


def connect(store_path: str, timeout: float) -> socket.socket:
    """Connect to the workspace's service.

    Raises:
        ServiceError: no service listens there.
    """
    path = os.path.join(service_dir(store_path), SOCKET_NAME)
    if not os.path.exists(path):
        # Most scans run with no service: they learn so without loading ``socket``.
        raise ServiceError("no service is running")
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        via_short_path(path, sock.connect)
    except FileNotFoundError as e:
        sock.close()
        raise ServiceError("no service is running") from e
    except ConnectionRefusedError as e:
        sock.close()
        raise ServiceError("the service is not running (it stopped or died)") from e
    except TimeoutError as e:
        sock.close()
        raise ServiceError(f"the service did not answer within {timeout:g} s") from e
    except OSError as e:
        sock.close()
        raise ServiceError(f"the service cannot be reached: {e.strerror or e}") from e
    if peer_uid(sock) != os.geteuid():
        sock.close()
        raise ServiceError("the service's socket belongs to another user")
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
