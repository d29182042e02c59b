"""Integrations layer: the watching service, one process per workspace.

:func:`serve` is the service itself (``takeback service run``): it holds a lock on its
pid file in the store (so one runs per workspace), watches the tree through a
:class:`takeback.Watcher`, and answers on a Unix socket in the store's ``service/``
folder (0700; the socket 0600), one question per connection, a JSON line:

- ``{"op": "mark", "service": ID, "gen": N}``: what changed since that mark (or why a
  full scan is needed), and a new mark;
- ``{"op": "status"}``: what it watches and what it costs;
- ``{"op": "stop"}``: it answers, then exits;

or a call frame (``_wire.py``): a command the relay (``cli/_relay.py``) hands over, with
its claim file C. When the service can still remove C it answers ``taken``, runs the
command (the ``runner`` given to :func:`serve`) and answers its exit code and output;
otherwise it declines, and the caller runs it.

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
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import _wire as wire
from .._service_client import ServicePaths, answer_here, ask_service
from .._where import foreign_folder, peer_uid, via_short_path
from ..store import HeldDatabases, hold_databases
from ._read_ahead import IDLE_SECONDS, STEP_SECONDS, ReadAhead
from ._service_pid import exited, lock_held, start_time

#: Runs one command line handed over by the relay: (argv, cwd, env, stdin) -> (exit
#: code, stdout, stderr). The command line's (``cli/_served.py``), given by ``service run``.
Runner = Callable[[list[str], str, dict[str, str], bytes | None], tuple[int, str, str]]
#: How long claim files a caller left behind (it died before sending) are kept.
CLAIM_MAX_AGE = 60.0

#: Seconds without a question after which the service exits.
QUIET_EXIT = 30 * 60.0
#: Seconds without a question after which the next one gets a full scan.
IDLE_FULL = 5 * 60.0
#: Seconds after a full scan after which the next question gets one again.
FULL_EVERY = 30 * 60.0
#: The longest request read (a hook call carries its payload: a file tool's may hold a
#: whole file). A longer one is answered as not understood; its caller runs it itself.
REQUEST_MAX = 16 << 20
#: How long a client may take to send its question.
CLIENT_TIMEOUT = 1.0
#: Set (to anything) in the service's environment: it also takes ``fault`` requests that
#: make it behave as if its queue overflowed or the watch limit was reached, or die or
#: stall once it has taken the next call (tests only).
FAULTS_ENV = "TAKEBACK_SERVICE_FAULTS"
#: ``0`` (or ``off``): hooks and ``watch`` do not start the service on demand.
SERVICE_ENV = "TAKEBACK_SERVICE"
#: Seconds without a question before the service audits itself (a full scan compared
#: with what it would vouch for), and at most how often it does.
AUDIT_AFTER = 60.0
AUDIT_EVERY = 10 * 60.0


def log_path(store_path: str) -> str:
    """Return where the service writes why it failed."""
    return ServicePaths(store_path).log


def running_pid(store_path: str) -> int | None:
    """Return the pid of the workspace's running service, or None."""
    held = lock_held(ServicePaths(store_path))
    return None if held is None else held[0]


def check_folders(store_path: str) -> str:
    """Return why the service must not run for this store ('' when it may).

    The store's folder and the service's must be this user's alone: a folder another
    user made first (a store under /tmp) could hold links that a service of root's
    would follow.
    """
    return foreign_folder(store_path) or foreign_folder(ServicePaths(store_path).dir)


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
    if pid is None and not check_folders(store_path):
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
    starting it on demand off. Only a folder store has one: a database's workspace keeps
    a local folder, but no ``store.json`` in it (its snapshots scan in full).
    """
    for where in (env, os.environ):
        if where.get(SERVICE_ENV, "").strip().lower() in ("0", "off", "no", "false"):
            return False
    if not os.path.isfile(os.path.join(store_path, "store.json")):
        return False
    if running_pid(store_path) is not None:
        return False
    if check_folders(store_path):
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
            os.umask(0o077)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            # Nothing the caller had open goes along: a lock it held (``flock LOCK
            # takeback ...``) or a pipe its reader waits to see closed would stay held
            # for as long as the service runs.
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            os.execv(sys.executable, argv)
        finally:
            os._exit(1)
    os.waitpid(pid, 0)


def stop(store_path: str, *, timeout: float = 3.0) -> int | None:
    """Stop the workspace's service; return the pid it had, or None when none ran.

    It is asked first; one that does not answer (stopped, hung) is killed.
    """
    held = lock_held(ServicePaths(store_path))
    if held is None:
        return None
    pid, started = held
    ask_service(store_path, {"op": "stop"}, timeout=0.5)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running_pid(store_path) is None:
            # Its lock goes as it exits; stopped means the process is gone too.
            while not exited(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            return pid
        time.sleep(0.02)
    # Killed only when the pid names the process that wrote it (the same start time):
    # a pid from another pid namespace, or one reused since, is someone else's.
    if pid > 0 and lock_held(ServicePaths(store_path)) == held and start_time(pid) == started:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while running_pid(store_path) is not None and time.monotonic() < deadline + timeout:
            time.sleep(0.02)
    return pid


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


class _Stop(BaseException):  # a signal, not an error (no call catches it)
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
        runner: Runner | None = None,
        audit_after: float = AUDIT_AFTER,
        audit_every: float = AUDIT_EVERY,
    ) -> None:
        self.root = root
        self.audit_after = audit_after
        self.audit_every = audit_every
        self.audits = 0
        self.divergences = 0
        #: what the last audit that compared anything found ('' before one)
        self.last_audit = ""
        self.audited_at = time.monotonic()
        self.runner = runner
        self.store = store_path
        self.paths = ServicePaths(store_path)
        self.quiet = quiet
        self.idle_full = idle_full
        self.full_every = full_every
        self.faults = faults
        self.id = os.urandom(8).hex()
        from ..scan._watcher import Watcher  # inotify: loaded by the service, never by a hook call

        self.watcher = Watcher(root, exclude=[store_path])
        self.started = time.time()
        self.last_query = time.monotonic()
        #: the last question or call of any kind (the quiet exit counts from it)
        self.last_call = time.monotonic()
        self.last_full = time.monotonic()
        self.questions = 0
        self.calls = 0
        #: connections from another user's processes, refused
        self.strangers = 0
        #: whether the log says that the watch limit left folders without a watch
        self.said_unwatched = False
        self.done = False
        #: a fault: the next call taken is not run, the service dies instead (tests only)
        self.die_in_call = False
        #: a fault: the next call taken waits this many seconds first (tests only)
        self.stall_in_call = 0.0
        self.stall_mark = ""  # a file made when the stall begins
        self.claims = self.paths.claims
        #: the last trees of the folders that hold others, read in idle time
        self.ahead = ReadAhead()
        #: the store's databases, kept open between calls (once serving)
        self.held: HeldDatabases | None = None
        #: a call ran since the databases' logs were last copied into them (idle time)
        self.unsaved = False
        #: the installed takeback this service runs (a call from another is declined)
        self.package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
            elif kind == "die-in-call":
                self.die_in_call = True
            elif kind == "stall-in-call":
                self.stall_in_call = float(req.get("seconds", 2.0))
                self.stall_mark = str(req.get("mark") or "")
            elif kind == "watch-limit":
                self.watcher.degraded = (
                    "the inotify watch limit was reached (fs.inotify.max_user_watches)"
                )
            elif kind == "blind":
                self.watcher.blind(str(req.get("folder") or ""))
            return {"fault": kind}
        return {"error": f"unknown request {op!r}"}

    def mark(self, req: dict[str, Any]) -> dict[str, Any]:
        now = time.monotonic()
        idle = now - self.last_query
        self.last_query = self.last_call = now
        self.questions += 1
        gen = req.get("gen")
        token = gen if req.get("service") == self.id and isinstance(gen, int) else None
        got = self.watcher.mark(token)
        dirs, reason = got.dirs, got.reason
        if got.subtrees and not self.said_unwatched:
            self.said_unwatched = True
            self.log(
                f"{len(got.subtrees)} folder(s) have no watch: the inotify watch limit "
                "(fs.inotify.max_user_watches) was reached; every snapshot lists them and "
                "all below them. Raise it: sysctl fs.inotify.max_user_watches=N"
            )
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
            "subtrees": got.subtrees if dirs is not None else [],
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
            "unwatched": st.extra.get("unwatched", 0),
            "rebuilds": st.extra.get("rebuilds", 0),
            "overflows": st.overflows,
            "events": st.events,
            "questions": self.questions,
            "calls": self.calls,
            "strangers": self.strangers,
            "audits": self.audits,
            "divergences": self.divergences,
            "last_audit": self.last_audit,
            "trees_read_ahead": self.ahead.read,
            "ids_read_ahead": self.held.ids_read if self.held is not None else 0,
            "idle_s": round(time.monotonic() - self.last_call, 3),
            "quiet_exit_s": self.quiet,
            "rss_bytes": rss,
        }

    def serve_one(self, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        with conn:
            try:
                uid = peer_uid(conn)
            except OSError:
                return
            if uid != os.geteuid():
                self.strangers += 1
                return  # not this user's: no answer, no call run
            try:
                self._serve(conn)
            except (RecursionError, ValueError, TypeError) as e:
                # A question no parser takes (JSON nested thousands deep, say): that
                # caller gets no answer; the service goes on.
                self.log(f"a question was not understood: {e!r}")

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(CLIENT_TIMEOUT)
        data = bytearray()
        try:
            while b"\n" not in data and len(data) < REQUEST_MAX:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
            line, _, rest = data.partition(b"\n")
            size = wire.header(bytes(line), wire.CALL)
            if size is not None:
                self.take_call(conn, size, rest)
                return
            try:
                req = json.loads(data)
            except (ValueError, RecursionError):
                req = None
            out = self.answer(req)
            conn.sendall(json.dumps(out, separators=(",", ":")).encode() + b"\n")
        except OSError:
            return

    def take_call(self, conn: socket.socket, size: int, got: bytearray) -> None:
        """Read the rest of a call frame; run the call if it is this service's to take."""
        self.last_call = time.monotonic()
        call: wire.Call | None = None
        if size <= REQUEST_MAX:
            while len(got) < size:
                chunk = conn.recv(min(1 << 20, size - len(got)))
                if not chunk:
                    return
                got += chunk
            try:
                call = wire.Call(bytes(got[:size]))
            except ValueError:
                call = None
        why = "the call was not understood" if call is None else self._refuse(call)
        if why or call is None:
            conn.sendall(wire.DECLINED + why.encode() + b"\n")
            return
        self.run_call(conn, call)

    def run_call(self, conn: socket.socket, call: wire.Call) -> None:
        """Take a call the relay hands over, run it, and answer what it printed."""
        try:
            # The claim is the caller's until removed: removing it is taking the call.
            os.unlink(os.path.join(self.claims, call.claim))
        except FileNotFoundError:
            conn.sendall(wire.DECLINED + b"the caller withdrew it\n")
            return
        self.calls += 1
        try:
            conn.sendall(wire.TAKEN + b"\n")
        except OSError:
            pass  # the caller is gone: the call runs all the same, as it would have there
        if self.die_in_call:
            os._exit(9)
        if self.stall_in_call:
            if self.stall_mark:
                with open(self.stall_mark, "w"):
                    pass
            time.sleep(self.stall_in_call)
            self.stall_in_call = 0.0
        assert self.runner is not None
        # Python's collector waits until the answer is sent: run during a call it went
        # over what the call made, the folder cache's copy among it (50,000 records at a
        # million files), and cost 3.3 ms a call there against 0.3 ms at 100,000 files.
        gc.disable()
        try:
            try:
                code, out, err = self.runner(call.argv, call.cwd, call.env, call.stdin)
            except Exception as e:  # noqa: BLE001 - one call's failure must not end the service
                self.log(f"a call failed: {e!r}", e)
                code, out, err = 1, "", f"takeback: error: the service failed to run it: {e!r}\n"
            try:
                conn.settimeout(CLIENT_TIMEOUT)
                conn.sendall(wire.done_frame(code, out, err))
            except OSError:
                pass  # the caller gave up waiting (its bound passed): what ran is recorded
        finally:
            gc.enable()
        gc.collect(1)  # what the call left: the caller has its answer already
        self.last_call = time.monotonic()
        self.unsaved = True

    def _refuse(self, call: wire.Call) -> str:
        """Return why this service does not take a call ('' when it does)."""
        if self.runner is None:
            return "this service runs no calls"
        if call.package != self.package:
            return "the service runs another installation of takeback"
        if len(call.claim) != 24 or not _is_hex(call.claim):
            return "no claim"
        if not call.argv:
            return "no command line"
        return ""

    def sweep_claims(self) -> None:
        """Remove claim files that callers who died before sending left behind."""
        try:
            # Through a handle that did not follow a link: only the claims folder's own
            # entries are ever removed.
            dfd = os.open(self.claims, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        try:
            names = os.listdir(dfd)
            old = time.time() - CLAIM_MAX_AGE
            for name in names:
                try:
                    if os.lstat(name, dir_fd=dfd).st_mtime < old:
                        os.unlink(name, dir_fd=dfd)
                except OSError:
                    pass
        except OSError:
            return
        finally:
            os.close(dfd)

    def log(self, text: str, e: BaseException | None = None) -> None:
        """Write a line (and a traceback) to the service's log."""
        try:
            import traceback

            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            with open(os.open(self.paths.log, flags, 0o600), "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")
                if e is not None:
                    f.write("".join(traceback.format_exception(e)))
        except OSError:
            pass

    def audit_in(self) -> float:
        """Seconds until an audit is due (0: now)."""
        now = time.monotonic()
        return max(
            0.0,
            self.last_call + self.audit_after - now,
            self.audited_at + self.audit_every - now,
        )

    def audit(self) -> None:
        """Compare a full scan with what this service would vouch for; act on a difference.

        A difference turns the fast path off for good (every answer says "full scan"),
        and is written to the log with the folders that differed. An audit during
        which the workspace changed decides nothing and is not counted.
        """
        self.audited_at = time.monotonic()
        if self.watcher.degraded is not None:
            return
        from .. import Workspace

        before = [0]

        def ask(mark: Any) -> tuple[list[str] | None, bool]:
            token = mark.gen if mark is not None and mark.service == self.id else None
            got = self.watcher.mark(token)
            before[0] = self.watcher.events
            return got.dirs, got.index

        try:
            with Workspace(self.root, store=self.store) as ws:
                found = ws.audit(ask)
        except Exception as e:  # noqa: BLE001 - an audit that fails decides nothing
            self.log(f"an audit failed: {e!r}")
            return
        self.watcher.drain()
        if found.agreed is None or self.watcher.events != before[0]:
            return  # nothing compared, or the workspace changed meanwhile
        self.audits += 1
        if found.agreed:
            self.last_audit = "agreed with a full scan"
            return
        self.divergences += 1
        self.last_audit = found.why
        self.watcher.degraded = (
            "an audit found the service's view differed from a full scan; "
            "every snapshot scans in full (see the service's log)"
        )
        self.log(f"audit: the service's view differed from a full scan: {found.why}")

    def gone(self, lock: int) -> bool:
        """Whether the workspace or the store went away, or the store was made anew.

        A store deleted and made again (``purge``, a copy over it) has another pid file:
        a service started for it holds that one, and this one would only linger.
        """
        if not os.path.isdir(self.root) or not os.path.isdir(self.paths.dir):
            return True
        try:
            return os.stat(self.paths.pid).st_ino != os.fstat(lock).st_ino
        except OSError:
            return True


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _span(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _bind(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        via_short_path(path, sock.bind)
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
    runner: Runner | None = None,
    audit_after: float = AUDIT_AFTER,
    audit_every: float = AUDIT_EVERY,
) -> int:
    """Run the service in this process until it is done; return an exit status.

    With ``runner``, it also takes the calls the relay hands over and runs them with it;
    while it does, the snapshots they take ask this service what changed without a socket.

    Returns 0 when it ran and stopped, or when another service already runs here; 2 when
    it could not start (no store).
    """
    paths = ServicePaths(store_path)
    if not os.path.isfile(os.path.join(store_path, "store.json")) or check_folders(store_path):
        return 2
    try:
        os.mkdir(paths.dir, 0o700)
    except FileExistsError:
        pass
    if check_folders(store_path):
        return 2  # made meanwhile by someone else
    try:
        lock = os.open(paths.pid, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return 2
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(lock)
        return 0 if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else 2

    stopping: list[int] = []

    def _term(signum: int, _frame: object) -> None:
        # Raised to leave whatever runs at once; and kept, for when it runs in a
        # finalizer (``__del__``, a collector's callback), where Python drops what is
        # raised: the loop then ends at its next turn.
        stopping.append(signum)
        raise _Stop

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    svc = _Service(
        root,
        store_path,
        quiet=quiet,
        idle_full=idle_full,
        full_every=full_every,
        faults=faults,
        runner=runner,
        audit_after=audit_after,
        audit_every=audit_every,
    )
    listener: socket.socket | None = None
    held: HeldDatabases | None = None
    try:
        os.ftruncate(lock, 0)
        os.pwrite(lock, b"%d %d" % (os.getpid(), start_time(os.getpid()) or 0), 0)
        svc.watcher.start()
        try:
            os.unlink(paths.socket)
        except FileNotFoundError:
            pass
        if runner is not None:
            os.makedirs(svc.claims, mode=0o700, exist_ok=True)
            # Calls run in this process ask this service what changed, not its socket.
            answer_here(os.path.realpath(store_path), svc.mark)
        held = svc.held = hold_databases(store_path)
        listener = _bind(paths.socket)
        svc.last_query = svc.last_call = time.monotonic()
        lfd = listener.fileno()
        while not svc.done and not stopping:
            left = svc.quiet - (time.monotonic() - svc.last_call)
            if left <= 0:
                break
            ino = svc.watcher.fileno()  # a new one after the watches are made anew
            try:
                wait = min(left, 5.0, max(svc.audit_in(), 0.05))
                busy = False
                trees = svc.ahead.due(svc.runner is not None and svc.watcher.degraded is None)
                if trees or (held is not None and held.ids_ahead):
                    idle = time.monotonic() - svc.last_call
                    busy = idle >= IDLE_SECONDS
                    wait = 0.0 if busy else min(wait, IDLE_SECONDS - idle)
                if svc.unsaved:
                    wait = min(wait, max(IDLE_SECONDS - (time.monotonic() - svc.last_call), 0.0))
                ready, _, _ = select.select([ino, lfd], [], [], wait)
            except InterruptedError:
                continue
            if ino in ready:
                svc.watcher.drain()
            if lfd in ready:
                svc.serve_one(listener)
            if not ready:
                if svc.gone(lock):
                    break
                svc.watcher.check()
                svc.sweep_claims()
                if held and svc.unsaved and time.monotonic() - svc.last_call >= IDLE_SECONDS:
                    # What the calls committed is copied into the databases now, not in
                    # the commit of a call that happens to fill the log.
                    svc.unsaved = False
                    held.checkpoint()
                if busy:
                    if trees:
                        svc.ahead.step(svc.root, svc.store, svc.log)
                    elif held is not None:
                        held.read_ids_ahead(STEP_SECONDS)
                elif svc.audit_in() <= 0:
                    svc.audit()
        return 0
    except _Stop:
        return 0
    except BaseException as e:  # noqa: BLE001 - logged, and the service exits 1
        svc.log(f"service failed: {e!r}", e)
        return 1
    finally:
        answer_here(os.path.realpath(store_path), None)
        if listener is not None:
            listener.close()
            try:
                os.unlink(paths.socket)
            except OSError:
                pass
        svc.watcher.close()
        if held is not None:
            held.release()
        os.close(lock)
