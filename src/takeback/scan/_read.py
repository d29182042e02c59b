"""Scan layer: files read, hashed and compressed for the walk, on threads or in forks.

The walk hands a folder's files to read as soon as it lists the folder (:meth:`Reader.start`)
and takes what was read when it comes back up to build that folder's tree
(:meth:`Reader.take`), so the reads are done by then. Reads, SHA-256 and zstd release the
GIL, so a pool of threads does them; the objects are stored from the walking thread, in
the walk's order, so writes stay on one thread. Without a pool, every file is read on the
walking thread (:meth:`Reader.read_entry`).

A first snapshot reads every file. On threads, what each file costs in Python around the
reads does not release the GIL, and the walking thread needs the GIL too: on 100,000
files the threads kept about one core busy of two. :class:`ForkedReaders` does the same
work in processes forked before the scan starts any thread (``_fork.py``); each takes
chunks of files over a pipe and sends back what it found, and a thread per process turns
its answers into the futures the walk waits for.

The chunk function runs in the child with the parent's memory as it was at the fork (the
reader, its root and limits). Its answer must be something ``marshal`` carries. A child
that dies fails the futures it owed (the scan fails, as when a thread raises); the
processes are ended and reaped by :meth:`ForkedReaders.close`.
"""

from __future__ import annotations

import errno
import hashlib
import marshal
import os
import stat
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._fs import open_regular
from ..errors import ScanError
from ..model import FILE, LARGE, LINK, Entry
from ._fork import can_fork, fork_worker, receive, send
from ._list import _Stat, _stat_fields, _StatFields, _Unreadable, _why

if TYPE_CHECKING:
    import threading
    from concurrent.futures import Future, ThreadPoolExecutor

#: A first snapshot reads ahead of the walk until about this many bytes are in flight.
_AHEAD_BYTES = 256 << 20
#: How many files, and how many bytes, one task of the read pool takes at most.
_CHUNK_FILES = 32
_CHUNK_BYTES = 8 << 20

#: What a read task gives back for one file: the entry's kind, mode, size, the stat it
#: was read at, its id, and either its compressed bytes (stored as they are) or its raw
#: bytes (to store as a delta against the earlier version); None when it vanished; the
#: reason when it cannot be read.
_Loaded = tuple[str, int, int, tuple[int, ...], str, bytes | None, bytes | None]

#: How a reader process sends back a file it could not read (an exception is not sent).
_UNREADABLE_MARK = "\0unreadable"


class PutObject(Protocol):
    """Stores one object and returns its id (``ObjectStore.put``)."""

    def __call__(
        self,
        kind: str,
        data: bytes,
        oid: str | None = ...,
        base: str | None = ...,
        /,
        *,
        base_bytes: Callable[[], bytes | None] | None = ...,
    ) -> str:
        """Store ``data`` (as a delta against ``base`` when that is smaller).

        ``base_bytes`` makes ``base``'s bytes, if the store has them at hand no faster.
        """
        ...


def _read_all(fd: int, size: int) -> bytes:
    """Read a file to its end (``size``: what its stat said; one more byte shows growth).

    ``os.read`` rather than a file object: a first snapshot reads every file on a pool of
    threads, and what each read does while holding the GIL is what keeps them apart.
    """
    data = os.read(fd, size + 1)
    if len(data) == size:
        return data  # the caller's fstat after the read tells a file that grew since
    chunks = [data]
    if data:
        # Grown, shrunk, or a read cut short (one read returns at most about 2 GB).
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    return b"".join(chunks)


def _fail(fut: Future[Any], message: str) -> None:
    from concurrent.futures import InvalidStateError

    try:
        fut.set_exception(RuntimeError(message))
    except InvalidStateError:
        pass  # failed already, by the other side


class _Child:
    def __init__(self, pid: int, requests: int, answers: int) -> None:
        import threading

        self.pid = pid
        self.requests = requests
        self.answers = answers
        self.owed: deque[Future[Any]] = deque()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None


def _serve(work: Callable[[Any], Any], requests: int, answers: int) -> None:
    """A reader process: answer each chunk sent, until the parent closes its pipe."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides
    while (raw := receive(requests)) is not None:
        try:
            answer = marshal.dumps((True, work(marshal.loads(raw))))
        except Exception as e:  # noqa: BLE001 - sent to the parent
            answer = marshal.dumps((False, f"{type(e).__name__}: {e}"))
        send(answers, answer)


class ForkedReaders:
    """Run ``work(chunk)`` in ``n`` forked processes; :meth:`submit` returns a future.

    Args:
        n: how many processes.
        work: what a process does with one chunk (runs in the child).
    """

    def __init__(self, n: int, work: Callable[[Any], Any]) -> None:
        import functools
        import threading

        self._children: list[_Child] = []
        try:
            for _ in range(n):
                pid, requests, answers = fork_worker(functools.partial(_serve, work))
                self._children.append(_Child(pid, requests, answers))
        except BaseException:
            self.close()
            raise
        for child in self._children:
            child.thread = threading.Thread(
                target=self._drain, args=(child,), name="takeback-read", daemon=True
            )
            child.thread.start()

    def submit(self, chunk: Any) -> Future[Any]:
        """Hand a chunk to the process that owes the fewest answers."""
        from concurrent.futures import Future

        child = min(self._children, key=lambda c: len(c.owed))
        fut: Future[Any] = Future()
        with child.lock:
            child.owed.append(fut)
        try:
            send(child.requests, marshal.dumps(chunk))
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
                raw = receive(child.answers)
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
        import signal

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


class Reader:
    """Reads, hashes and stores the files of one scan.

    Args:
        root: the workspace root (absolute, real).
        max_file_bytes: files larger than this are counted and named, not read.
        put: stores an object (see ``PutObject``) and returns its id.
        pack: compresses an object as the store keeps it, on any thread; with
            ``put_packed``, files are read, hashed and compressed on ``workers`` threads.
        put_packed: stores a batch of objects ``pack`` compressed (kind, id, size, bytes).
        workers: how many threads read files (0: none, everything on the calling one).
        on_progress: called with the number of files read so far, every few hundred.
    """

    def __init__(
        self,
        root: str,
        *,
        max_file_bytes: int,
        put: PutObject,
        pack: Callable[[bytes], bytes] | None,
        put_packed: Callable[[Sequence[tuple[str, str, int, bytes]]], None] | None,
        workers: int,
        on_progress: Callable[[int], None] | None,
    ) -> None:
        self.root = root
        self.max_file_bytes = max_file_bytes
        self._put = put
        self._pack = pack
        self._put_packed = put_packed
        #: how many threads or processes read files (0: the walking thread reads them)
        self.workers = workers if pack is not None and put_packed is not None else 0
        self._on_progress = on_progress
        #: read in forked processes, not threads (a first snapshot: every file is read)
        self.fork = False
        #: how many files were read and hashed
        self.hashed = 0
        self._pool: ThreadPoolExecutor | None = None
        self._procs: ForkedReaders | None = None
        #: folder -> its detailed cache row and the reads handed to the pool, by name
        self._reads: dict[str, tuple[dict[str, Any], dict[str, Future[list[Any]]]]] = {}
        #: about how many bytes of files are being read and not yet taken by the walk
        self._ahead_bytes = 0
        self._ahead_of: dict[int, int] = {}

    def started(self, rel: str) -> bool:
        """Whether a folder's reads were handed out and not yet taken."""
        return rel in self._reads

    def saturated(self) -> bool:
        """Whether enough bytes are being read that the walk need not list further ahead."""
        return self._ahead_bytes > _AHEAD_BYTES

    def start(self, rel: str, detail: dict[str, Any], kept: list[tuple[str, _StatFields]]) -> None:
        """Hand the pool the files of a folder that its cache row does not vouch for.

        Args:
            rel: the folder.
            detail: its detailed cache row (name -> stat and entry; {} for none).
            kept: its files and symlinks in scope, with their stats.
        """
        prefix = rel + "/" if rel else ""
        todo: list[tuple[str, str, _StatFields, bool]] = []
        for name, st in kept:
            cached = detail.get(name)
            if cached is not None and cached[0] == (
                st.st_mode,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
                st.st_ino,
            ):
                continue
            # A file with an earlier version is stored as a delta, from this thread.
            delta = cached is not None and bool(cached[1][2])
            todo.append((name, prefix + name, st, delta))
        futures: dict[str, Future[list[Any]]] = {}
        if todo:
            if self._pool is None and self._procs is None:
                self._start_pool()
            chunk: list[tuple[str, str, _StatFields, bool]] = []
            size = 0
            for item in todo:
                chunk.append(item)
                size += item[2].st_size
                if len(chunk) >= _CHUNK_FILES or size >= _CHUNK_BYTES:
                    self._submit(chunk, futures)
                    chunk, size = [], 0
            if chunk:
                self._submit(chunk, futures)
        self._reads[rel] = (detail, futures)

    def take(self, rel: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """Wait for a folder's reads; return its detailed row and what was read, by name.

        What the reads packed is stored first, as one batch. None: none were started.
        """
        started = self._reads.pop(rel, None)
        if started is None:
            return None
        detail, futures = started
        return detail, self._collect(futures)

    def _start_pool(self) -> None:
        """Start the readers: forked processes for a first snapshot, else threads."""
        if self.fork and can_fork():
            self._procs = ForkedReaders(self.workers, self._load_sent)
            return
        from concurrent.futures import ThreadPoolExecutor  # and logging: only when used

        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="takeback-read")

    def _submit(
        self,
        chunk: list[tuple[str, str, _StatFields, bool]],
        futures: dict[str, Future[list[Any]]],
    ) -> None:
        if self._procs is not None:
            sent = [(name, rel, _stat_fields(st), delta) for name, rel, st, delta in chunk]
            fut = self._procs.submit(sent)
        else:
            assert self._pool is not None
            fut = self._pool.submit(self._load_many, chunk)
        for name, _rel, _st, _delta in chunk:
            futures[name] = fut
        size = sum(st.st_size for _n, _r, st, _d in chunk)
        self._ahead_bytes += size
        self._ahead_of[id(fut)] = size

    def _load_sent(self, chunk: list[tuple[str, str, tuple[int, ...], bool]]) -> list[Any]:
        """What a reader process does with a chunk: ``_load_many``, in what marshal carries."""
        items: list[tuple[str, str, _StatFields, bool]] = [
            (name, rel, _Stat(*st), delta) for name, rel, st, delta in chunk
        ]
        out = []
        for name, res in self._load_many(items):
            out.append(
                (name, (_UNREADABLE_MARK, res.reason) if isinstance(res, _Unreadable) else res)
            )
        return out

    def _load_many(self, chunk: list[tuple[str, str, _StatFields, bool]]) -> list[Any]:
        """Read, hash and compress some files (on a pool thread); one result each."""
        assert self._pack is not None
        out: list[Any] = []
        for name, rel, st, delta in chunk:
            try:
                got = self._load(rel, st)
            except _Unreadable as e:
                out.append((name, e))
                continue
            if got is None:
                out.append((name, None))
                continue
            kind, mode, size, sig, data = got
            if data is None:
                out.append((name, (kind, mode, size, sig, "", None, None)))
                continue
            oid = hashlib.sha256(data).hexdigest()
            if delta:
                out.append((name, (kind, mode, size, sig, oid, None, data)))
            else:
                out.append((name, (kind, mode, size, sig, oid, self._pack(data), None)))
        return out

    def _collect(self, futures: dict[str, Future[list[Any]]]) -> dict[str, Any]:
        """Wait for a folder's reads; store what they packed, as one batch."""
        loaded: dict[str, Any] = {}
        batch: list[tuple[str, str, int, bytes]] = []
        seen: set[int] = set()
        for fut in futures.values():
            if id(fut) in seen:
                continue
            seen.add(id(fut))
            try:
                results = fut.result()
                self._ahead_bytes -= self._ahead_of.pop(id(fut), 0)
            except RuntimeError as e:
                if self._procs is None:
                    raise
                # A reader process died (killed, out of memory) or failed.
                raise ScanError(
                    f"cannot read the workspace {self.root}: {e}", path=self.root
                ) from e
            for name, res in results:
                if isinstance(res, tuple) and len(res) == 2 and res[0] == _UNREADABLE_MARK:
                    res = _Unreadable(res[1])
                loaded[name] = res
                if isinstance(res, tuple) and res[5] is not None:
                    batch.append(("blob", res[4], res[2], res[5]))
        if batch:
            assert self._put_packed is not None
            self._put_packed(batch)
        return loaded

    def stored(
        self, res: _Loaded | _Unreadable | None, base: str | None
    ) -> tuple[Entry, tuple[int, ...]] | None:
        """Return the entry of a file the pool read (its object is stored by now)."""
        if res is None:
            return None
        if isinstance(res, _Unreadable):
            raise res
        kind, mode, size, sig, oid, packed, data = res
        if kind == LARGE:
            return Entry(LARGE, mode, "", size), sig
        self._read_one()
        if data is not None:
            oid = self._put("blob", data, oid, base if kind == FILE else None)
        return Entry(kind, mode, oid, size), sig

    def stop(self) -> None:
        """Stop the readers (a scan's end, or its failure)."""
        # Threads left running would keep a later scan in this process from forking.
        if self._pool is not None:
            for _detail, futures in self._reads.values():
                for fut in futures.values():
                    fut.cancel()
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._procs is not None:
            # Reads still owed (the scan failed): the processes are killed, not waited for.
            owed = any(not f.done() for _d, fs in self._reads.values() for f in fs.values())
            self._procs.close(kill=owed)
            self._procs = None
        self._reads.clear()

    def _read_one(self) -> None:
        self.hashed += 1
        if self._on_progress is not None and self.hashed % 500 == 0:
            self._on_progress(self.hashed)

    def read_entry(
        self, rel: str, st: _StatFields, base: str | None = None
    ) -> tuple[Entry, tuple[int, ...]] | None:
        """Hash (and store) a file or symlink; None if it vanished.

        Raises:
            _Unreadable: it cannot be read (no permission, an I/O error).
        """
        got = self._load(rel, st)
        if got is None:
            return None
        kind, mode, size, sig, data = got
        if data is None:
            return Entry(kind, mode, "", size), sig
        self._read_one()
        oid = self._put("blob", data, None, base if kind == FILE else None)
        return Entry(kind, mode, oid, size), sig

    def _load(
        self, rel: str, st: _StatFields
    ) -> tuple[str, int, int, tuple[int, ...], bytes | None] | None:
        """Read a file or symlink (safe on any thread); None if it vanished.

        Returns:
            Its kind (``LARGE`` for a file over the limit, whose bytes are not read),
            mode, size, the stat it was read at and its bytes.

        Raises:
            _Unreadable: it cannot be read (no permission, an I/O error).
        """
        path = os.path.join(self.root, rel)
        sig: tuple[int, ...] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.fsencode(os.readlink(path))
            except FileNotFoundError:
                return None
            except OSError as e:
                raise _Unreadable(_why(e)) from e
            return LINK, 0o777, len(target), sig, target
        mode = stat.S_IMODE(st.st_mode)
        if st.st_size > self.max_file_bytes:
            return LARGE, mode, st.st_size, sig, None
        for _attempt in range(3):
            try:
                got = open_regular(path)
            except FileNotFoundError:
                return None
            except OSError as e:
                if e.errno == errno.ELOOP:  # it became a symlink since the listing
                    try:
                        st = os.lstat(path)
                    except FileNotFoundError:
                        return None
                    return self._load(rel, st)
                raise _Unreadable(_why(e)) from e
            if got is None:
                return None  # no longer a file (a FIFO or a folder now): not kept
            fd = got[0]
            try:
                data = _read_all(fd, got[1].st_size)
                after = os.fstat(fd)
            except OSError as e:
                raise _Unreadable(_why(e)) from e
            finally:
                os.close(fd)
            sig = (after.st_mode, after.st_size, after.st_mtime_ns, after.st_ctime_ns, after.st_ino)
            if len(data) == after.st_size and after.st_mtime_ns == st.st_mtime_ns:
                break
            # It changed while we read it: take it again, and if it keeps changing keep the
            # last read with its stat, which the race rule will not trust next time.
            st = after
        mode = stat.S_IMODE(sig[0])
        if len(data) > self.max_file_bytes:
            return LARGE, mode, len(data), sig, None
        return FILE, mode, len(data), sig, data
