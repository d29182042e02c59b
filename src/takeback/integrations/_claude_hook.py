"""Integrations layer: Claude Code's hook calls, mapped onto sessions, turns, touches and steps.

The entry point behind ``takeback hook claude-code``: one JSON payload on stdin per call.
``UserPromptSubmit`` begins a turn; ``PreToolUse`` of a file tool (Write, Edit,
MultiEdit, NotebookEdit) touches the file it names; ``PreToolUse`` of Bash begins a
command step (a snapshot before it) and ``PostToolUse`` of Bash finishes it (a snapshot
after it; what it changed joins the turn); ``Stop`` ends the turn. A command step still
open at the session's next call (a Bash call that failed, when ``PostToolUseFailure`` is
not installed) is finished then. Claude Code's session id is takeback's session. Which
events and tools are installed in the settings file is :mod:`._claude_settings`'
business.

``PostToolBatch`` (a batch of tool calls resolved) finishes the command steps still open
in it. Every other agent's hook call is read into these same events by
:mod:`._agent_hook` and recorded here, each payload naming its agent.

``SessionStart`` (whatever its ``source``: startup, resume, clear, compact, fork) starts
the workspace's first snapshot, when it has none yet, in a detached process, and returns
at once (a fork, a new session id, also takes its own baseline there and then): that
snapshot reads every file, and the person's first prompt should wait only for what is
left of it. The detached process takes the session's baseline while it
holds an exclusive ``flock`` on ``<store>/claude-code/baseline.lock`` (taken by the
``SessionStart`` call and handed down, so there is no moment when neither holds it);
every other call waits for that lock first, within its own time bound, and then finds
the baseline done instead of reading every file a second time.

Hooks fail open: :func:`run` never raises. Whatever goes wrong is written to
``hook.log`` in the store, and the command exits 0 with nothing on stdout, because
Claude Code reads stdout (and exit code 2) as decisions. :class:`Deadline` bounds the
time one call may take.

A Bash step begins in one process (the ``PreToolUse`` call) and ends in another (the
``PostToolUse`` call): the step's number is kept between the two in a small file under
``<store>/claude-code/pending/``, one per tool call, claimed by an atomic rename so that
two processes never finish the same step.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping

from ..errors import TakebackError, UsageError

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .. import Session, Step, Turn, Workspace

AGENT = "claude-code"

#: file tools -> the key of ``tool_input`` that names the file they write
FILE_TOOLS: dict[str, str] = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
#: tools whose effects are found by snapshots around them
COMMAND_TOOLS = frozenset({"Bash"})
#: the events that end every command step still open, even for an agent whose tool calls
#: run side by side (``Payload.parallel``)
TURN_EVENTS = frozenset({"UserPromptSubmit", "Stop", "SessionStart", "SessionEnd", "PostToolBatch"})
#: the key of a file tool's ``tool_input`` that names several files (no Claude Code tool
#: does; another agent's patch tool, read by ``._agent_hook``)
MANY_FILES = "file_paths"

LABEL_MAX = 200
#: How long one hook call may run before it gives up (``TAKEBACK_HOOK_TIMEOUT``, seconds;
#: 0 turns the bound off). Far above what a call takes on 100,000 files (under a second,
#: unless it must read every file), far below "forever".
DEFAULT_TIMEOUT = 30.0
#: The bound of a call that takes the workspace's first full snapshot (nothing scanned
#: there yet, so every file is read: 8-14 s on 100,000 files, minutes on millions). Giving
#: up would throw that work away and make every later call start it again, so it may run
#: as long as Claude Code itself lets a command hook run by default.
FIRST_SCAN_TIMEOUT = 600.0
TIMEOUT_ENV = "TAKEBACK_HOOK_TIMEOUT"
LOG_NAME = "hook.log"
LOG_MAX_BYTES = 1 << 20
PENDING_DIR = os.path.join("claude-code", "pending")
#: held (exclusively) while a detached process takes the workspace's first snapshot
BASELINE_LOCK = os.path.join("claude-code", "baseline.lock")
#: set in the detached process's environment: it takes the baseline itself
BASELINE_ENV = "TAKEBACK_HOOK_BASELINE"


# -- payloads --------------------------------------------------------------------------


class Payload:
    """The fields of one hook call that takeback reads (the rest is ignored).

    A plain class, not a dataclass: the hook's start-up is kept free of ``dataclasses``.
    """

    __slots__ = (
        "agent",
        "cwd",
        "event",
        "parallel",
        "prompt",
        "root",
        "session_id",
        "source",
        "tool_input",
        "tool_name",
        "tool_use_id",
    )

    def __init__(
        self,
        *,
        event: str,
        session_id: str,
        cwd: str | None = None,
        tool_name: str | None = None,
        tool_input: dict[str, Any] | None = None,
        tool_use_id: str | None = None,
        prompt: str | None = None,
        source: str | None = None,
        agent: str = AGENT,
        root: str | None = None,
        parallel: bool = False,
    ) -> None:
        self.agent = agent
        self.root = root
        self.parallel = parallel
        self.event = event
        self.session_id = session_id
        self.cwd = cwd
        self.tool_name = tool_name
        self.tool_input: dict[str, Any] = tool_input if tool_input is not None else {}
        self.tool_use_id = tool_use_id
        self.prompt = prompt
        self.source = source


def _field(doc: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = doc.get(key)
    if value is None:
        if required:
            raise UsageError(f"hook payload has no {key!r}")
        return None
    if not isinstance(value, str) or (required and not value):
        raise UsageError(f"hook payload field {key!r} is not a non-empty string")
    return value


def parse_payload(raw: bytes) -> Payload:
    """Return the payload of one hook call.

    Args:
        raw: the bytes read from stdin.

    Raises:
        UsageError: empty, not JSON, not an object, or a field of the wrong type.

    """
    if not raw.strip():
        raise UsageError("empty hook payload on stdin")
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise UsageError(f"hook payload is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise UsageError("hook payload is not a JSON object")
    tool_input = doc.get("tool_input")
    if tool_input is None:
        tool_input = {}
    elif not isinstance(tool_input, dict):
        raise UsageError("hook payload field 'tool_input' is not an object")
    return Payload(
        event=_field(doc, "hook_event_name", required=True) or "",
        session_id=_field(doc, "session_id", required=True) or "",
        cwd=_field(doc, "cwd"),
        tool_name=_field(doc, "tool_name"),
        tool_input=tool_input,
        tool_use_id=_field(doc, "tool_use_id"),
        prompt=_field(doc, "prompt"),
        source=_field(doc, "source"),
    )


def _label(text: str | None) -> str:
    return (text or "").strip()[:LABEL_MAX]


def choose_root(payload: Payload | None, root: str | None, env: Mapping[str, str]) -> str:
    """Return the workspace root: ``--root``, else the payload's, else the project or cwd.

    The payload's root is the one another agent's reading names (its own project
    folder); then ``$CLAUDE_PROJECT_DIR``, then the payload's cwd.

    Raises:
        UsageError: none of the three is known.

    """
    if root:
        return root
    if payload is not None and payload.root:
        return payload.root
    project = env.get("CLAUDE_PROJECT_DIR")
    if project:
        return project
    if payload is not None and payload.cwd:
        return payload.cwd
    raise UsageError("no workspace root: the payload has no 'cwd' and CLAUDE_PROJECT_DIR is unset")


# -- the mapping -----------------------------------------------------------------------


class _Pending:
    """The command steps begun by a ``PreToolUse`` call and not yet finished."""

    def __init__(self, store_path: str, session: str) -> None:
        self.dir = os.path.join(store_path, PENDING_DIR, _key(session))

    def put(self, tool_use_id: str | None, record: dict[str, Any]) -> None:
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        final = os.path.join(self.dir, _key(tool_use_id or "-") + ".json")
        tmp = f"{final}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        os.replace(tmp, final)

    def claim(self, tool_use_id: str | None) -> dict[str, Any] | None:
        return self._claim(os.path.join(self.dir, _key(tool_use_id or "-") + ".json"))

    def claim_all(self, *, but: str | None = None) -> list[dict[str, Any]]:
        """Claim every pending step (but the one of tool call ``but``), oldest first."""
        skip = _key(but) + ".json" if but is not None else None
        try:
            names = sorted(n for n in os.listdir(self.dir) if n.endswith(".json") and n != skip)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = [self._claim(os.path.join(self.dir, n)) for n in names]
        return sorted((r for r in found if r is not None), key=lambda r: int(r.get("step", 0)))

    @staticmethod
    def _claim(path: str) -> dict[str, Any] | None:
        # The rename is the claim: of two processes finishing one step, one wins.
        mine = f"{path}.{os.getpid()}.claimed"
        try:
            os.rename(path, mine)
        except FileNotFoundError:
            return None
        try:
            with open(mine, encoding="utf-8") as f:
                record = json.load(f)
        finally:
            os.unlink(mine)
        return record if isinstance(record, dict) else None


def _key(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _open_turn(session: Session) -> Turn:
    return session.ensure_turn()


def _resume_step(session: Session, record: dict[str, Any]) -> Step | None:
    """Return the open command step a record names, as an object that can finish it."""
    tool_use_id = record.get("tool_use_id")
    return session.resume_step(
        int(record["step"]), tool_call_id=tool_use_id if isinstance(tool_use_id, str) else None
    )


def _finish_pending(ws: Workspace, name: str, *, but: str | None = None) -> list[int]:
    """Finish the session's command steps still open (but the one of tool call ``but``).

    A Bash call that fails gets no ``PostToolUse`` (Claude Code sends
    ``PostToolUseFailure``, which older releases do not know). Its step is finished at
    the session's next hook call, whatever the event: left open until ``Stop``, its
    snapshot after would take in what anyone changed meanwhile (a person's edit too),
    and undo would take that back as the agent's.
    """
    records = _Pending(ws.store_path, name).claim_all(but=but)
    if not records:
        return []
    session = ws.session(name)
    done = []
    for record in records:
        step = _resume_step(session, record)
        if step is not None:
            # Its end was never seen: what it changed is marked unconfirmed.
            step.finish(unconfirmed=True)
            done.append(step.n)
    return done


def _expand_user(path: str, env: Mapping[str, str]) -> str:
    """Return a file tool's path with a leading ``~`` expanded, as the agent expands it."""
    if not path.startswith("~"):
        return path
    home = env.get("HOME")
    if home and (path == "~" or path[1] in ("/", os.sep)):
        return os.path.join(home, path[2:]) if len(path) > 2 else home
    return os.path.expanduser(path)


def handle(
    payload: Payload,
    ws: Workspace,
    *,
    session: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Record one hook call; return what was done (for the debug log).

    Every call first finishes the session's command steps still open (a Bash call
    that failed got no ``PostToolUse``), but the one a ``PostToolUse`` of its own
    finishes. For an agent whose tool calls run side by side (``payload.parallel``),
    only the turn's events (:data:`TURN_EVENTS`) do: another tool's call says nothing of
    whether a command still runs.

    Args:
        payload: the parsed hook payload.
        ws: the workspace (its root is the project's).
        session: the session's name (default: the payload's ``session_id``).
        env: the hook's environment (``HOME``, for a path that starts with ``~``);
            default: this process's.

    Raises:
        UsageError: a field the event needs is missing.
        PathError: a file tool names a path outside the root.
        TakebackError: the store cannot be used.

    """
    event, tool = payload.event, payload.tool_name or ""
    name = session or payload.session_id
    post = event in ("PostToolUse", "PostToolUseFailure") and tool in COMMAND_TOOLS
    # An agent whose tool calls run side by side: one call's event says nothing of the
    # others' ends, so their steps end with their own, or with the turn or the batch.
    alone = not payload.parallel or event in TURN_EVENTS
    but = (payload.tool_use_id or "-") if post else None
    finished = _finish_pending(ws, name, but=but) if alone else []
    done = f" (finished steps {finished})" if finished else ""
    if event == "PreToolUse" and tool in FILE_TOOLS:
        key = FILE_TOOLS[tool]
        # Another agent's patch tool names several files (``._agent_hook``).
        paths = payload.tool_input.get(MANY_FILES) or [payload.tool_input.get(key)]
        if not all(isinstance(p, str) and p for p in paths):
            raise UsageError(f"{tool} payload has no tool_input.{key}")
        home = os.environ if env is None else env
        # Refused before anything is recorded: a path outside the root is never kept.
        rels = [ws.rel(_expand_user(p, home), base=payload.cwd or ws.root) for p in paths]
        turn = _open_turn(ws.session(name))
        said = []
        for rel in rels:
            kept = turn.touch(rel, tool_call_id=payload.tool_use_id)
            said.append(f"{'touched' if kept else 'already touched or out of scope'} {rel}")
        return f"turn {turn.n}: {', '.join(said)}{done}"
    if event == "PreToolUse" and tool in COMMAND_TOOLS:
        command = payload.tool_input.get("command")
        label = _label(command if isinstance(command, str) else tool) or tool
        turn = _open_turn(ws.session(name))
        step = turn.command(label, tool_call_id=payload.tool_use_id).begin()
        if step.n == 0:
            return "the session could not be started: the command runs unrecorded"
        _Pending(ws.store_path, name).put(
            payload.tool_use_id,
            {
                "step": step.n,
                "turn": turn.n,
                "tool_use_id": payload.tool_use_id,
                "at": time.time(),
            },
        )
        return f"turn {turn.n}: step {step.n} begun{done}"
    if post:
        record = _Pending(ws.store_path, name).claim(payload.tool_use_id)
        if record is None:
            return f"no command step was begun for this tool call{done}"
        step_obj = _resume_step(ws.session(name), record)
        if step_obj is None:
            return f"step {record.get('step')} was already finished{done}"
        step_obj.finish()
        return f"step {step_obj.n} finished: {len(step_obj.changed)} path(s) changed{done}"
    if event == "UserPromptSubmit":
        turn = ws.session(name).turn(label=_label(payload.prompt))
        ws.mark_agent(name, payload.agent)  # so the log and the page say whose it is
        return f"turn {turn.n} begun{done}"
    if event == "SessionStart":
        start = _session_start(ws, name, env, fork=payload.source == "fork")
        return f"session start ({payload.source or '-'}): {start}{done}"
    if event == "PostToolBatch":
        # Every call of the batch has resolved: the steps still open ended just above.
        return f"batch resolved{done}"
    if event in ("Stop", "SessionEnd"):
        if not ws.has_store():
            return "no store: nothing to end"
        current = ws.session(name).current_turn()
        if current is None:
            return f"no open turn{done}"
        changes = current.end()
        return f"turn {current.n} ended: {len(changes)} file(s) changed{done}"
    return f"ignored{done}"


# -- the baseline, begun when the session starts ---------------------------------------


def _session_start(
    ws: Workspace, name: str, env: Mapping[str, str] | None, *, fork: bool = False
) -> str:
    """Take the baseline in the detached process; elsewhere leave it to the first prompt.

    A workspace with snapshots has a scan cache, so the first prompt's baseline costs a
    walk of stats, not a read of every file (:func:`run` starts the detached process
    when it has none). A forked conversation (``source`` ``fork``: a new session id, the
    parent's conversation so far) takes its baseline at once: its start is the state it
    was forked in, whatever happens before its first prompt.
    """
    if fork or (env is not None and env.get(BASELINE_ENV)):
        info = ws.session(name).start()
        return f"baseline {info.baseline[:12]} taken"
    return "nothing to start; the baseline is taken at the first prompt"


def start_baseline(ws: Workspace, call: HookCall, raw: bytes, env: Mapping[str, str]) -> str:
    """Start the first snapshot in a detached process; return at once.

    The exclusive lock on :data:`BASELINE_LOCK` is taken here and handed to the
    process (the same open file), so a prompt that comes before the process has started
    already finds it held. Nothing is started when another process holds it.

    Returns:
        What was done (for the log).
    """
    import fcntl
    import subprocess
    import sys

    path = os.path.join(ws.store_path, BASELINE_LOCK)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "a baseline is being taken already"
        argv = [sys.executable, "-m", "takeback", "hook", call.agent, "--root", ws.root]
        if call.event:
            argv += ["--event", call.event]
        child_env = {**env, BASELINE_ENV: "1"}
        if ws.store_url is not None:
            # The database itself (not this machine's folder for it), through the
            # environment: its address may hold a password, which argv would show.
            child_env["TAKEBACK_STORE"] = ws.store_url.reveal()
        else:
            argv += ["--store", ws.store_path]
        if call.session:
            argv += ["--session", call.session]
        if call.max_file_bytes is not None:
            argv += ["--max-file-bytes", str(call.max_file_bytes)]
        # Its own session, no terminal, nothing of Claude Code's pipes: Claude Code waits
        # for the hook's stdout to close, and the baseline may take a while.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=(fd,),
            env=child_env,
            cwd=ws.root,
        )
        assert proc.stdin is not None
        try:
            proc.stdin.write(raw)
        finally:
            proc.stdin.close()
        return f"baseline started in the background (pid {proc.pid})"
    finally:
        os.close(fd)  # the process holds the lock through its own copy


def wait_for_baseline(store_path: str) -> bool:
    """Wait while a detached process takes the first snapshot (bounded by the Deadline).

    Returns:
        Whether there was one to wait for.
    """
    import fcntl

    try:
        fd = os.open(os.path.join(store_path, BASELINE_LOCK), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            fcntl.flock(fd, fcntl.LOCK_SH)
            return True
    finally:
        os.close(fd)


# -- running one hook call -------------------------------------------------------------


class Deadline:
    """A wall-clock bound on one hook call (``SIGALRM``, so only in the main thread).

    On expiry, whatever the call is doing (waiting for a lock, a hung file system), one
    line goes to ``hook.log`` and the process exits 0 at once, with nothing on stdout or
    stderr: Claude Code waits for the hook, and a recorder must never hold the agent up.
    What the call had written is safe to abandon at any point: the store writes objects
    before anything names them, and a step begun but not finished is finished later.

    Args:
        seconds: the bound (0 or less: none).
        call: the call's options (where to log when no workspace was made yet).
        env: the environment (``TAKEBACK_STORE``, ``CLAUDE_PROJECT_DIR``).
        problem: a line to log about the bound itself (a value that is not a number).
    """

    def __init__(
        self, seconds: float, call: HookCall, env: Mapping[str, str], *, problem: str | None = None
    ) -> None:
        self.seconds = seconds
        self.problem = problem
        self.payload: Payload | None = None
        self.log_dir: str | None = None
        self._call = call
        self._env = env
        self._started = 0.0
        self._fired = False
        self._saved: Any = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], call: HookCall) -> Deadline:
        """Return the bound ``TAKEBACK_HOOK_TIMEOUT`` asks for (default 30 s)."""
        raw = env.get(TIMEOUT_ENV, "").strip()
        if not raw:
            return cls(DEFAULT_TIMEOUT, call, env)
        try:
            seconds = float(raw)
        except ValueError:
            seconds = float("nan")
        if seconds != seconds or seconds in (float("inf"), float("-inf")):
            return cls(
                DEFAULT_TIMEOUT,
                call,
                env,
                problem=(
                    f"{TIMEOUT_ENV}={raw!r} is not a number of seconds; using {DEFAULT_TIMEOUT:g} s"
                ),
            )
        return cls(seconds, call, env)

    def start(self) -> None:
        """Arm the bound (nothing happens when it is off or signals are out of reach)."""
        import signal

        if self.seconds <= 0 or not hasattr(signal, "setitimer"):
            return
        try:
            self._saved = signal.signal(signal.SIGALRM, self._expire)
        except ValueError:  # not the main thread: no bound rather than no hook
            return
        self._started = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def extend(self, seconds: float) -> None:
        """Let the call run ``seconds`` from its start in all, when that is longer."""
        import signal

        if self._started == 0.0 or seconds <= self.seconds:
            return
        self.seconds = seconds
        left = self._started + seconds - time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))

    def stop(self) -> None:
        """Disarm the bound and put back the handler it replaced."""
        import signal

        if self._started == 0.0:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._saved)
        self._started = 0.0

    def _expire(self, _signum: int, _frame: object) -> None:
        import signal

        if self._fired:
            os._exit(0)  # logging itself hung: leave without it
        self._fired = True
        try:
            signal.setitimer(signal.ITIMER_REAL, 5)
            where = self.log_dir or _fallback_log_dir(
                self._call,
                self._call.store or self._env.get("TAKEBACK_STORE") or None,
                self.payload,
                self._env,
            )
            _append_log(
                where,
                _line(
                    self.payload,
                    (
                        f"gave up after {self.seconds:g} s ({TIMEOUT_ENV}); this call was not "
                        "recorded in full"
                    ),
                ),
            )
        finally:
            os._exit(0)


class HookCall:
    """What one ``takeback hook`` process was given (``problems``: what could not be read)."""

    def __init__(
        self,
        *,
        agent: str = AGENT,
        root: str | None = None,
        store: str | None = None,
        session: str | None = None,
        max_file_bytes: int | None = None,
        event: str | None = None,
    ) -> None:
        self.agent = agent
        self.event = event  # for an agent whose payloads do not name their event
        self.root = root
        self.store = store
        self.session = session
        self.max_file_bytes = max_file_bytes
        self.problems: list[str] = []


def _make_workspace(
    root: str, store: str | None, max_file_bytes: int | None, env: Mapping[str, str]
) -> Workspace:
    from .. import Workspace
    from ._data_dir import user_data_dir

    # Read from the environment here: asking platformdirs costs each call its import.
    data_dir = user_data_dir(env)
    if max_file_bytes is not None:
        return Workspace(root, store=store, data_dir=data_dir, max_file_bytes=max_file_bytes)
    return Workspace(root, store=store, data_dir=data_dir)


def run(
    raw: bytes,
    call: HookCall,
    env: Mapping[str, str],
    *,
    deadline: Deadline | None = None,
    read: Callable[[bytes, HookCall, Mapping[str, str]], Payload] | None = None,
) -> str | None:
    """Handle one hook call and return what was done; never raises.

    Failures (a bad payload, a missing or damaged store, a full disk) are written to
    ``hook.log`` in the store; when even that fails, they are dropped.

    Args:
        raw: the payload bytes from stdin.
        call: the options given on the command line.
        env: the environment (``TAKEBACK_STORE``, ``CLAUDE_PROJECT_DIR``).
        deadline: the call's bound, already running: told where to log, and extended
            when the call has to take the workspace's first full snapshot.
        read: how another agent's payload is read into Claude Code's terms
            (``._agent_hook``); default: Claude Code's own.

    """
    started = time.perf_counter()
    payload: Payload | None = None
    ws: Workspace | None = None
    store = call.store or env.get("TAKEBACK_STORE") or None
    try:
        if call.problems:
            raise UsageError("; ".join(call.problems))
        if read is not None:
            payload = read(raw, call, env)
        elif call.agent != AGENT:
            raise UsageError(f"unknown agent {call.agent!r}: takeback knows {AGENT!r}")
        else:
            payload = parse_payload(raw)
        if deadline is not None:
            deadline.payload = payload
        ws = _make_workspace(choose_root(payload, call.root, env), store, call.max_file_bytes, env)
        log_dir = ws.store_path
        if deadline is not None:
            deadline.log_dir = log_dir
            if deadline.problem:
                _append_log(log_dir, _line(payload, deadline.problem))
            if _first_scan(ws):
                deadline.extend(FIRST_SCAN_TIMEOUT)
        ws.on_event(lambda ev: _log_event(log_dir, payload, ev))
        if payload.event == "SessionStart" and not env.get(BASELINE_ENV) and _first_scan(ws):
            done = "session start: " + start_baseline(ws, call, raw, env)
        else:
            service = _wants_service(payload)
            if service:
                _start_service(ws, env)
            waited = payload.event != "SessionStart" and wait_for_baseline(ws.store_path)
            done = handle(payload, ws, session=call.session, env=env)
            if waited:
                done += " (after the baseline taken in the background)"
            if service:
                _start_service(ws, env)  # the first call of a workspace made its store just now
        from ._autogc import start_if_due

        start_if_due(ws)
        if env.get("TAKEBACK_HOOK_DEBUG"):
            ms = (time.perf_counter() - started) * 1000
            _append_log(ws.store_path, _line(payload, f"ok in {ms:.0f} ms: {done}"))
        return done
    except BaseException as e:  # noqa: BLE001 - a hook fails open, whatever went wrong
        try:
            where = (
                ws.store_path if ws is not None else _fallback_log_dir(call, store, payload, env)
            )
            _append_log(where, _line(payload, _describe(e), call.agent or AGENT))
        except BaseException:  # noqa: BLE001, S110 - nowhere left to say it
            pass
        return None
    finally:
        if ws is not None:
            try:
                ws.close()
            except BaseException:  # noqa: BLE001, S110 - the call is over either way
                pass


def _wants_service(payload: Payload) -> bool:
    """Whether this call snapshots the workspace, so starts its watching service.

    A Bash call and a prompt snapshot; a file tool's call does not (it reads one file),
    so its start-up stays as it was.
    """
    return payload.event == "UserPromptSubmit" or (payload.tool_name or "") in COMMAND_TOOLS


def _start_service(ws: Workspace, env: Mapping[str, str]) -> None:
    """Start the workspace's watching service if none runs (and it is not turned off)."""
    from ._service import ensure

    ensure(ws.root, ws.store_path, env)


def _first_scan(ws: Workspace) -> bool:
    """Whether the next snapshot reads every file: nothing was scanned here yet."""
    from ..scan import CACHE_KEY

    return not ws.has_store() or ws.open_store().meta.get_kv(CACHE_KEY) is None


def _describe(e: BaseException) -> str:
    if isinstance(e, TakebackError):
        return f"{type(e).__name__}: {e.message}"
    import traceback

    tb = "".join(traceback.format_exception(e)).rstrip()
    return f"{type(e).__name__}: {e}\n" + "\n".join(f"    {line}" for line in tb.splitlines())


def _line(payload: Payload | None, text: str, agent: str = AGENT) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
    event = payload.event if payload else "-"
    tool = f" {payload.tool_name}" if payload and payload.tool_name else ""
    sid = payload.session_id if payload else "-"
    agent = payload.agent if payload else agent
    return f"{stamp} {agent} {event}{tool} session={sid}: {text}\n"


def _log_event(log_dir: str, payload: Payload | None, event: dict[str, Any]) -> None:
    if event.get("event") == "snapshot.failed":
        _append_log(log_dir, _line(payload, f"snapshot failed: {event.get('reason')}"))


def _fallback_log_dir(
    call: HookCall, store: str | None, payload: Payload | None, env: Mapping[str, str]
) -> str:
    """Where to log when no workspace could be made: the store it would have used.

    For a database, this machine's folder for it (an address is never a folder name).
    """
    if store and not store.startswith(("postgresql://", "postgres://")):
        return store
    try:
        root = choose_root(payload, call.root, env)
    except UsageError:
        root = os.getcwd()
    try:
        return _make_workspace(root, store, None, env).store_path
    except TakebackError:
        import platformdirs

        return platformdirs.user_data_dir("takeback", appauthor=False)


def _append_log(folder: str, text: str) -> None:
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, LOG_NAME)
    try:
        if os.path.getsize(path) > LOG_MAX_BYTES:
            os.replace(path, path + ".1")
    except OSError:
        pass
    # O_NONBLOCK: a FIFO in the log's place fails at once instead of waiting for a reader.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as f:
        f.write(text)
