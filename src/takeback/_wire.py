"""The relay's frames: a call handed to the watching service, and the service's answers.

The client that sends a call is a command that must start fast, so the frames need no
module to make or read (``json`` alone costs a process more than a millisecond). Names
travel as the bytes the system gave them (a command line, an environment or a folder
need not be UTF-8), and stdin as it was read.

A frame is a header line (``<kind> <length>`` and a newline), then ``length`` bytes of items, each
``<n>:`` and ``n`` bytes. The service answers a call with one line, ``taken`` or
``declined <why>``, and after a taken call's run, a ``done`` frame: exit code, stdout,
stderr.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: see takeback/__init__.py
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

#: The header of a call frame.
CALL = b"takeback-run"
#: The header of the answer to a call that ran.
DONE = b"done"
#: The line that says the service took the call.
TAKEN = b"taken"
#: How a line that declines a call starts.
DECLINED = b"declined "


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def frame(kind: bytes, items: Sequence[bytes]) -> bytes:
    """Return a frame of ``items`` under a ``kind`` header."""
    body = b"".join(b"%d:%s" % (len(item), item) for item in items)
    return b"%s %d\n" % (kind, len(body)) + body


def header(line: bytes, kind: bytes) -> int | None:
    """Return the length a frame's header line announces (None: not such a header)."""
    name, _, size = bytes(line).partition(b" ")
    if name != kind or not size.isdigit():
        return None
    return int(size)


def items(body: bytes) -> list[bytes]:
    """Return a frame body's items.

    Raises:
        ValueError: the body is not a sequence of items.
    """
    out: list[bytes] = []
    i, end = 0, len(body)
    while i < end:
        colon = body.index(b":", i)
        size = body[i:colon]
        if not size.isdigit():
            raise ValueError("not an item")
        start = colon + 1
        stop = start + int(size)
        if stop > end:
            raise ValueError("an item runs past the frame")
        out.append(bytes(body[start:stop]))
        i = stop
    return out


def call_frame(
    claim: str,
    package: str,
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    stdin: bytes | None,
) -> bytes:
    """Return the frame of one call (what the caller's process would have run)."""
    parts = [_raw(claim), _raw(package), _raw(cwd)]
    parts += [b"0", b""] if stdin is None else [b"1", stdin]
    parts.append(b"%d" % len(argv))
    parts += [_raw(a) for a in argv]
    parts.append(b"%d" % len(env))
    for k, v in env.items():
        parts += [_raw(k), _raw(v)]
    return frame(CALL, parts)


class Call:
    """A call as the service reads it."""

    __slots__ = ("argv", "claim", "cwd", "env", "package", "stdin")

    def __init__(self, body: bytes) -> None:
        """Read a call frame's body.

        Raises:
            ValueError: the body is not a call.
        """
        parts = items(body)
        if len(parts) < 7:
            raise ValueError("too few items")
        self.claim, self.package, self.cwd = (_text(p) for p in parts[:3])
        self.stdin: bytes | None = parts[4] if parts[3] == b"1" else None
        argc = int(parts[5])
        argv_end = 6 + argc
        if argc < 0 or argv_end >= len(parts):
            raise ValueError("a command line cut short")
        self.argv = [_text(p) for p in parts[6:argv_end]]
        envc = int(parts[argv_end])
        pairs = parts[argv_end + 1 :]
        if envc < 0 or len(pairs) != 2 * envc:
            raise ValueError("an environment cut short")
        self.env = {_text(pairs[i]): _text(pairs[i + 1]) for i in range(0, len(pairs), 2)}


def done_frame(code: int, out: str, err: str) -> bytes:
    """Return the answer to a call that ran: its exit code and what it printed."""
    return frame(DONE, [b"%d" % code, _raw(out), _raw(err)])


def done(body: bytes) -> tuple[int, str, str]:
    """Read a ``done`` frame's body: exit code, stdout, stderr.

    Raises:
        ValueError: the body is not such an answer.
    """
    parts = items(body)
    if len(parts) != 3:
        raise ValueError("not an answer")
    return int(parts[0]), _text(parts[1]), _text(parts[2])


class _Reading:
    """What the C scanner under ``json`` reads of a decoder: the defaults of ``json.loads``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity: as json reads them


_SPACE = " \t\n\r"


def json_object(raw: bytes) -> dict[str, Any] | None:
    """Read one JSON object (a hook's payload) in UTF-8; None when it is not one.

    With the C scanner that ``json`` itself uses: ``json`` also loads ``re`` for what
    that scanner does without it, 2 ms of every hook call's start-up. What this does
    not read (another encoding, a byte-order mark, no C scanner) is None too, and the
    call then runs where the full reader says what is wrong.
    """
    try:
        import _json

        scan = _json.make_scanner(_Reading())  # type: ignore[arg-type]  # reads these names
        text = raw.decode("utf-8")
    except (ImportError, AttributeError, TypeError, UnicodeDecodeError):
        return None
    start = len(text) - len(text.lstrip(_SPACE))
    if text[start : start + 1] != "{":
        return None
    try:
        doc, end = scan(text, start)
    except (StopIteration, ValueError, RecursionError, SystemError):
        # SystemError: the scanner names its errors with json's own exception, and
        # without json loaded it fails with none set.
        return None
    if text[end:].strip(_SPACE) or not isinstance(doc, dict):
        return None
    return doc
