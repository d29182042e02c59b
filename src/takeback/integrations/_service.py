"""Integrations layer: the watching service, one process per workspace.

:func:`serve` is the service itself (``takeback service run``): it holds a lock on its
pid file in the store (so one runs per workspace), watches the tree through a
:class:`takeback.Watcher`, and answers on a Unix socket in the store's ``service/``
folder (0700; the socket 0600), one JSON line per connection:

- ``{"op": "mark", "service": ID, "gen": N}``: what changed since that mark (or why a
  full scan is needed), and a new mark;
- ``{"op": "status"}``: what it watches and what it costs;
- ``{"op": "stop"}``: it answers, then exits.

It writes nothing in the workspace. It exits after ``quiet`` seconds without a
question, when asked to, on SIGTERM, or when the store or the root goes away. A question
after ``idle_full`` seconds without one gets a full scan (a person may have worked
meanwhile, with tools whose writes inotify does not see), and so does one more than
``full_every`` seconds after the last full scan.

:func:`start` starts it detached (double fork, its own session, stdio on /dev/null);
:func:`ensure` does so only when none runs, and never waits: it is what the hooks call.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .. import ServicePaths, ask_service

#: Seconds without a question after which the service exits.
QUIET_EXIT = 30 * 60.0
#: Seconds without a question after which the next one gets a full scan.
IDLE_FULL = 5 * 60.0
#: Seconds after a full scan after which the next question gets one again.
FULL_EVERY = 30 * 60.0
#: How long a client may take to send its question.
CLIENT_TIMEOUT = 1.0
#: Set (to anything) in the service's environment: it also takes ``fault`` requests that
#: make it behave as if its queue overflowed or the watch limit was reached (tests only).
FAULTS_ENV = "TAKEBACK_SERVICE_FAULTS"
#: ``0`` (or ``off``): hooks and ``watch`` do not start the service on demand.
SERVICE_ENV = "TAKEBACK_SERVICE"


def _lock_held(paths: ServicePaths) -> int | None:
    """Return the pid of the running service (its lock is held), else None."""
    try:
        fd = os.open(paths.pid, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            raw = os.read(fd, 64).strip()
            return int(raw) if raw.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def log_path(store_path: str) -> str:
    """Return where the service writes why it failed."""
    return ServicePaths(store_path).log


def running_pid(store_path: str) -> int | None:
    """Return the pid of the workspace's running service, or None."""
    return _lock_held(ServicePaths(store_path))


# -- starting and stopping -----------------------------------------------------------------


def start(
    root: str,
    store_path: str,
    *,
    wait: float = 0.0,
    options: Sequence[str] = (),
) -> int | None:
    """Start the workspace's service detached, unless one runs.

    Args:
        root: the workspace root.
        store_path: its store (must exist).
        wait: seconds to wait until it answers (0: return at once).
        options: more ``service run`` arguments (``--quiet-exit 60``).

    Returns:
        The pid of the running service once it answers; None when not waited for, or
        when it did not answer within ``wait``.
    """
    pid = running_pid(store_path)
    if pid is None:
        _spawn(root, store_path, options)
    if wait <= 0:
        return pid
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        reply = ask_service(store_path, {"op": "status"}, timeout=max(wait, 0.5))
        if not reply.error and isinstance(reply.answer, dict):
            got = reply.answer.get("pid")
            return int(got) if isinstance(got, int) else None
        time.sleep(0.02)
    return None


def ensure(root: str, store_path: str, env: Mapping[str, str]) -> bool:
    """Start the service when none runs; never waits. Returns whether one was started.

    ``TAKEBACK_SERVICE=0`` (or ``off``) in ``env``, or in this process's own environment
    (a harness calling the hook in-process with an environment of its own), turns
    starting it on demand off.
    """
    for where in (env, os.environ):
        if where.get(SERVICE_ENV, "").strip().lower() in ("0", "off", "no", "false"):
            return False
    if not os.path.isdir(store_path) or running_pid(store_path) is not None:
        return False
    _spawn(root, store_path, ())
    return True


def _spawn(root: str, store_path: str, options: Sequence[str]) -> None:
    argv = [
        sys.executable,
        "-m",
        "takeback",
        "service",
        "run",
        "--root",
        root,
        "--store",
        store_path,
        *options,
    ]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the detached child, reported through the socket
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            os.chdir("/")
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execv(sys.executable, argv)
        finally:
            os._exit(1)
    os.waitpid(pid, 0)


def stop(store_path: str, *, timeout: float = 3.0) -> int | None:
    """Stop the workspace's service; return the pid it had, or None when none ran.

    It is asked first; one that does not answer (stopped, hung) is killed.
    """
    pid = running_pid(store_path)
    if pid is None:
        return None
    ask_service(store_path, {"op": "stop"}, timeout=0.5)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running_pid(store_path) is None:
            # Its lock goes as it exits; stopped means the process is gone too.
            while not _exited(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            return pid
        time.sleep(0.02)
    if pid > 0 and running_pid(store_path) == pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while running_pid(store_path) is not None and time.monotonic() < deadline + timeout:
            time.sleep(0.02)
    return pid


def _exited(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie no one has reaped yet has ended too)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in (b"Z", b"X")


def status(store_path: str, *, timeout: float = 1.0) -> dict[str, Any]:
    """Return what ``service status --json`` shows (``running``, and the service's counts)."""
    pid = running_pid(store_path)
    if pid is None:
        return {"running": False, "pid": None, "reason": "no service is running"}
    reply = ask_service(store_path, {"op": "status"}, timeout=timeout)
    if reply.error or not isinstance(reply.answer, dict):
        return {"running": True, "pid": pid, "answering": False, "reason": reply.error}
    return {"running": True, "answering": True, **reply.answer}


# -- the service itself --------------------------------------------------------------------


class _Stop(Exception):  # noqa: N818 - a signal, not an error
    """SIGTERM or SIGINT: leave the loop at once."""


class _Service:
    def __init__(
        self,
        root: str,
        store_path: str,
        *,
        quiet: float,
        idle_full: float,
        full_every: float,
        faults: bool,
    ) -> None:
        self.root = root
        self.store = store_path
        self.paths = ServicePaths(store_path)
        self.quiet = quiet
        self.idle_full = idle_full
        self.full_every = full_every
        self.faults = faults
        self.id = os.urandom(8).hex()
        from .. import Watcher  # inotify: loaded by the service, never by a hook call

        self.watcher = Watcher(root, exclude=[store_path])
        self.started = time.time()
        self.last_query = time.monotonic()
        self.last_full = time.monotonic()
        self.questions = 0
        self.done = False

    def answer(self, req: Any) -> dict[str, Any]:
        op = req.get("op") if isinstance(req, dict) else None
        if op == "mark":
            return self.mark(req)
        if op == "status":
            return self.status()
        if op == "stop":
            self.done = True
            return {"stopping": True, "pid": os.getpid()}
        if op == "fault" and self.faults:
            kind = req.get("kind")
            if kind == "overflow":
                from inotify_simple import flags

                self.watcher.process([(-1, flags.Q_OVERFLOW, 0, "")])
            elif kind == "watch-limit":
                self.watcher.degraded = (
                    "the inotify watch limit was reached (fs.inotify.max_user_watches)"
                )
            return {"fault": kind}
        return {"error": f"unknown request {op!r}"}

    def mark(self, req: dict[str, Any]) -> dict[str, Any]:
        now = time.monotonic()
        idle = now - self.last_query
        self.last_query = now
        self.questions += 1
        gen = req.get("gen")
        token = gen if req.get("service") == self.id and isinstance(gen, int) else None
        got = self.watcher.mark(token)
        dirs, reason = got.dirs, got.reason
        if dirs is not None and idle > self.idle_full:
            dirs = None
            reason = (
                f"the service saw no snapshot for {_span(idle)}; a full scan covers "
                "what inotify cannot see"
            )
        elif dirs is not None and now - self.last_full > self.full_every:
            dirs = None
            reason = f"a full scan is taken every {_span(self.full_every)} at least"
        if dirs is None:
            self.last_full = now
        return {
            "service": self.id,
            "gen": got.token,
            "dirs": dirs,
            "reason": reason,
            "index": got.index,
        }

    def status(self) -> dict[str, Any]:
        st = self.watcher.stats()
        rss = 0
        try:
            with open("/proc/self/statm", "rb") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
        return {
            "pid": os.getpid(),
            "service": self.id,
            "root": self.root,
            "store": self.store,
            "started_at": self.started,
            "watches": st.watches,
            "generation": st.generation,
            "changed_folders": st.changed,
            "degraded": st.degraded,
            "overflows": st.overflows,
            "events": st.events,
            "questions": self.questions,
            "idle_s": round(time.monotonic() - self.last_query, 3),
            "quiet_exit_s": self.quiet,
            "rss_bytes": rss,
        }

    def serve_one(self, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        with conn:
            conn.settimeout(CLIENT_TIMEOUT)
            data = b""
            try:
                while not data.endswith(b"\n") and len(data) < 1 << 16:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                try:
                    req = json.loads(data)
                except ValueError:
                    req = None
                out = self.answer(req)
                conn.sendall(json.dumps(out, separators=(",", ":")).encode() + b"\n")
            except OSError:
                return

    def gone(self) -> bool:
        return not os.path.isdir(self.root) or not os.path.isdir(self.paths.dir)


def _span(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _bind(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    folder, name = os.path.split(path)
    old = os.umask(0o177)
    try:
        if len(os.fsencode(path)) <= 100:
            sock.bind(path)
        else:
            fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
            try:
                sock.bind(f"/proc/self/fd/{fd}/{name}")
            finally:
                os.close(fd)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(16)
    sock.setblocking(False)
    return sock


def serve(
    root: str,
    store_path: str,
    *,
    quiet: float = QUIET_EXIT,
    idle_full: float = IDLE_FULL,
    full_every: float = FULL_EVERY,
    faults: bool = False,
) -> int:
    """Run the service in this process until it is done; return an exit status.

    Returns 0 when it ran and stopped, or when another service already runs here; 2 when
    it could not start (no store).
    """
    paths = ServicePaths(store_path)
    if not os.path.isfile(os.path.join(store_path, "store.json")):
        return 2
    os.makedirs(paths.dir, mode=0o700, exist_ok=True)
    os.chmod(paths.dir, 0o700)
    lock = os.open(paths.pid, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(lock)
        return 0 if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else 2

    def _term(_signum: int, _frame: object) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    svc = _Service(
        root, store_path, quiet=quiet, idle_full=idle_full, full_every=full_every, faults=faults
    )
    listener: socket.socket | None = None
    try:
        os.ftruncate(lock, 0)
        os.pwrite(lock, str(os.getpid()).encode(), 0)
        svc.watcher.start()
        try:
            os.unlink(paths.socket)
        except FileNotFoundError:
            pass
        listener = _bind(paths.socket)
        svc.last_query = time.monotonic()
        ino = svc.watcher.fileno()
        lfd = listener.fileno()
        while not svc.done:
            left = svc.quiet - (time.monotonic() - svc.last_query)
            if left <= 0:
                break
            try:
                ready, _, _ = select.select([ino, lfd], [], [], min(left, 5.0))
            except InterruptedError:
                continue
            if ino in ready:
                svc.watcher.drain()
            if lfd in ready:
                svc.serve_one(listener)
            if not ready and svc.gone():
                break
        return 0
    except _Stop:
        return 0
    except BaseException as e:
        try:
            import traceback

            with open(paths.log, "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} service failed: {e!r}\n")
                f.write("".join(traceback.format_exception(e)))
        except OSError:
            pass
        return 1
    finally:
        if listener is not None:
            listener.close()
            try:
                os.unlink(paths.socket)
            except OSError:
                pass
        svc.watcher.close()
        os.close(lock)
