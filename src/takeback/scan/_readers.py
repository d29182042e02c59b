"""Scan layer: files read, hashed and compressed in forked processes.

A first snapshot reads every file. On a pool of threads the reads, SHA-256 and zstd
release the GIL, but what each file costs in Python around them does not, and the
walking thread needs the GIL too: on 100,000 files the threads kept about one core
busy of two. :class:`ForkedReaders` does the same work in processes forked before the
scan starts any thread; each takes chunks of files over a pipe and sends back what it
found, and a thread per process turns its answers into the futures the walk waits for.

The chunk function runs in the child with the parent's memory as it was at the fork
(the scanner, its root and limits). Its answer must be something ``marshal`` carries.
A child that dies fails the futures it owed (the scan fails, as when a thread raises);
the processes are ended and reaped by :meth:`ForkedReaders.close`.
"""

from __future__ import annotations

import marshal
import os
import signal
import struct
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from .._fs import write_all

_LEN = struct.Struct("<Q")


def _write_all(fd: int, data: bytes) -> None:
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


def _receive(fd: int) -> bytes | None:
    """Read one message (None: the other end closed)."""
    head = _read_exact(fd, _LEN.size)
    if head is None:
        return None
    return _read_exact(fd, _LEN.unpack(head)[0])


def _fail(fut: Future[Any], message: str) -> None:
    try:
        fut.set_exception(RuntimeError(message))
    except InvalidStateError:
        pass  # failed already, by the other side


class _Child:
    def __init__(self, pid: int, requests: int, answers: int) -> None:
        self.pid = pid
        self.requests = requests
        self.answers = answers
        self.owed: deque[Future[Any]] = deque()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None


class ForkedReaders:
    """Run ``work(chunk)`` in ``n`` forked processes; :meth:`submit` returns a future.

    Args:
        n: how many processes.
        work: what a process does with one chunk (runs in the child).
    """

    def __init__(self, n: int, work: Callable[[Any], Any]) -> None:
        self._children: list[_Child] = []
        try:
            for _ in range(n):
                self._children.append(self._fork(work))
        except BaseException:
            self.close()
            raise
        for child in self._children:
            child.thread = threading.Thread(
                target=self._drain, args=(child,), name="takeback-read", daemon=True
            )
            child.thread.start()

    @staticmethod
    def _fork(work: Callable[[Any], Any]) -> _Child:
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, reported through the pipe
            code = 0
            try:
                os.close(req_w)
                os.close(ans_r)
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides
                while (raw := _receive(req_r)) is not None:
                    try:
                        answer = marshal.dumps((True, work(marshal.loads(raw))))
                    except Exception as e:  # noqa: BLE001 - sent to the parent
                        answer = marshal.dumps((False, f"{type(e).__name__}: {e}"))
                    _write_all(ans_w, answer)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(ans_w)
        return _Child(pid, req_w, ans_r)

    def submit(self, chunk: Any) -> Future[Any]:
        """Hand a chunk to the process that owes the fewest answers."""
        child = min(self._children, key=lambda c: len(c.owed))
        fut: Future[Any] = Future()
        with child.lock:
            child.owed.append(fut)
        try:
            _write_all(child.requests, marshal.dumps(chunk))
        except OSError as e:
            # The process is gone: the walk learns it where it waits for the answer.
            with child.lock:
                if fut in child.owed:
                    child.owed.remove(fut)
            _fail(fut, f"a reader process is gone: {e.strerror or e}")
        return fut

    def _drain(self, child: _Child) -> None:
        while True:
            try:
                raw = _receive(child.answers)
            except OSError:
                raw = None
            if raw is None:
                with child.lock:
                    owed, child.owed = list(child.owed), deque()
                for fut in owed:
                    _fail(fut, "a reader process ended early")
                return
            with child.lock:
                fut = child.owed.popleft()
            ok, value = marshal.loads(raw)
            if fut.set_running_or_notify_cancel():
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(RuntimeError(f"a reader process failed: {value}"))

    def close(self, *, kill: bool = False) -> None:
        """End the processes and reap them; ``kill``: at once, dropping what they owe."""
        for child in self._children:
            if kill:
                try:
                    os.kill(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.close(child.requests)
            except OSError:
                pass
        for child in self._children:
            if child.thread is not None:
                child.thread.join(timeout=30)
                if child.thread.is_alive():
                    os.kill(child.pid, signal.SIGKILL)
                    child.thread.join()
            try:
                os.close(child.answers)
            except OSError:
                pass
            try:
                os.waitpid(child.pid, 0)
            except ChildProcessError:
                pass
        self._children = []
