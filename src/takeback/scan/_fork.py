"""Scan layer: a forked worker and the pipes it talks over, for the check pass and the reads.

Both the check pass (``_check.py``) and a first snapshot's reads (``_read.py``) hand work
to processes forked from the scan, which run with the parent's memory as it was at the
fork and so are given nothing but what to do next. :func:`fork_worker` makes one: a pipe
each way, messages framed by their length, the child ending with ``os._exit`` whatever
happens in it (it never returns into the parent's code). What a message holds is the
caller's, as bytes; an answer that cannot be read (:func:`receive` gives None) means the
other end closed, a child that died among them.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

from .._fs import write_all

_LEN = struct.Struct("<Q")


def send(fd: int, data: bytes) -> None:
    """Write one message: its length, then its bytes."""
    write_all(fd, _LEN.pack(len(data)) + data)


def _read_exact(fd: int, n: int) -> bytes | None:
    parts = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def receive(fd: int) -> bytes | None:
    """Read one message (None: the other end closed)."""
    head = _read_exact(fd, _LEN.size)
    if head is None:
        return None
    return _read_exact(fd, _LEN.unpack(head)[0])


def fork_worker(run: Callable[[int, int], None]) -> tuple[int, int, int]:
    """Fork a process that runs ``run(requests, answers)`` on its ends of two pipes.

    The child exits with 0 when ``run`` returns and 1 when it raises; it never returns.

    Returns:
        The child's pid, the end the parent writes requests to, and the end it reads
        answers from (both the parent's to close).
    """
    req_r, req_w = os.pipe()
    ans_r, ans_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, reported through the pipe
        code = 0
        try:
            os.close(req_w)
            os.close(ans_r)
            run(req_r, ans_w)
        except BaseException:  # noqa: BLE001 - a forked child exits, never unwinds into the parent's code
            code = 1
        finally:
            os._exit(code)
    os.close(req_r)
    os.close(ans_w)
    return pid, req_w, ans_r


def can_fork() -> bool:
    """Fork only a single-threaded process (forking threads can deadlock the child)."""
    import threading

    return hasattr(os, "fork") and threading.active_count() == 1
