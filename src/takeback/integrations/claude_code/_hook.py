"""Integrations layer: one hook call mapped onto sessions, turns, touches and steps.

The entry point behind ``takeback hook claude-code`` (and, through
``integrations._agent_hook``, every other agent's): one JSON payload on stdin per call.
``UserPromptSubmit`` begins a turn; ``PreToolUse`` of a file tool (Write, Edit,
MultiEdit, NotebookEdit) touches the file it names; ``PreToolUse`` of Bash begins a
command step (a snapshot before it) and ``PostToolUse`` of Bash finishes it (a snapshot
after it; what it changed joins the turn); ``Stop`` ends the turn. A command step still
open at the session's next call (a Bash call that failed, when ``PostToolUseFailure`` is
not installed) is finished then. The agent's session id is takeback's session.
``PostToolBatch`` (a batch of tool calls resolved) finishes the command steps still open
in it. ``SessionStart`` begins the workspace's first snapshot (:mod:`._baseline`).

Hooks fail open: :func:`run` never raises; what goes wrong is logged (:mod:`._log`) and
the command exits 0 with nothing on stdout. :class:`._deadline.Deadline` bounds the time
one call may take.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from ...errors import UsageError
from ._baseline import BASELINE_ENV, session_start, start_baseline, wait_for_baseline
from ._call import AGENT
from ._deadline import FIRST_SCAN_TIMEOUT
from ._log import append_log, describe, fallback_log_dir, log_event, log_line
from ._payload import (
    COMMAND_TOOLS,
    FILE_TOOLS,
    MANY_FILES,
    TURN_EVENTS,
    choose_root,
    expand_user,
    label,
    make_workspace,
    parse_payload,
)
from ._pending import Pending

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ... import Session, Step, Turn, Workspace
    from ._call import HookCall
    from ._deadline import Deadline
    from ._payload import Payload


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
    records = Pending(ws.store_path, name).claim_all(but=but)
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
        rels = [ws.rel(expand_user(p, home), base=payload.cwd or ws.root) for p in paths]
        turn = _open_turn(ws.session(name))
        said = []
        for rel in rels:
            kept = turn.touch(rel, tool_call_id=payload.tool_use_id)
            said.append(f"{'touched' if kept else 'already touched or out of scope'} {rel}")
        return f"turn {turn.n}: {', '.join(said)}{done}"
    if event == "PreToolUse" and tool in COMMAND_TOOLS:
        command = payload.tool_input.get("command")
        text = label(command if isinstance(command, str) else tool) or tool
        turn = _open_turn(ws.session(name))
        step = turn.command(text, tool_call_id=payload.tool_use_id).begin()
        if step.n == 0:
            return "the session could not be started: the command runs unrecorded"
        Pending(ws.store_path, name).put(
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
        record = Pending(ws.store_path, name).claim(payload.tool_use_id)
        if record is None:
            return f"no command step was begun for this tool call{done}"
        step_obj = _resume_step(ws.session(name), record)
        if step_obj is None:
            return f"step {record.get('step')} was already finished{done}"
        step_obj.finish()
        return f"step {step_obj.n} finished: {len(step_obj.changed)} path(s) changed{done}"
    if event == "UserPromptSubmit":
        turn = ws.session(name).turn(label=label(payload.prompt))
        ws.mark_agent(name, payload.agent)  # so the log and the page say whose it is
        return f"turn {turn.n} begun{done}"
    if event == "SessionStart":
        start = session_start(ws, name, env, fork=payload.source == "fork")
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
        ws = make_workspace(choose_root(payload, call.root, env), store, call.max_file_bytes, env)
        log_dir = ws.store_path
        if deadline is not None:
            deadline.log_dir = log_dir
            if deadline.problem:
                append_log(log_dir, log_line(payload, deadline.problem))
            if _first_scan(ws):
                deadline.extend(FIRST_SCAN_TIMEOUT)
        ws.on_event(lambda ev: log_event(log_dir, payload, ev))
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
        from .._autogc import start_if_due

        start_if_due(ws)
        if env.get("TAKEBACK_HOOK_DEBUG"):
            ms = (time.perf_counter() - started) * 1000
            append_log(ws.store_path, log_line(payload, f"ok in {ms:.0f} ms: {done}"))
        return done
    except BaseException as e:  # noqa: BLE001 - a hook fails open, whatever went wrong
        try:
            where = ws.store_path if ws is not None else fallback_log_dir(call, store, payload, env)
            append_log(where, log_line(payload, describe(e), call.agent or AGENT))
        except BaseException:  # noqa: BLE001 - nowhere left to say it
            pass
        return None
    finally:
        if ws is not None:
            try:
                ws.close()
            except BaseException:  # noqa: BLE001 - the call is over either way
                pass


def _wants_service(payload: Payload) -> bool:
    """Whether this call snapshots the workspace, so starts its watching service.

    A Bash call and a prompt snapshot; a file tool's call does not (it reads one file),
    so its start-up stays as it was.
    """
    return payload.event == "UserPromptSubmit" or (payload.tool_name or "") in COMMAND_TOOLS


def _start_service(ws: Workspace, env: Mapping[str, str]) -> None:
    """Start the workspace's watching service if none runs (and it is not turned off)."""
    from .._service import ensure

    ensure(ws.root, ws.store_path, env)


def _first_scan(ws: Workspace) -> bool:
    """Whether the next snapshot reads every file: nothing was scanned here yet."""
    from ...scan import CACHE_KEY

    return not ws.has_store() or ws.open_store().meta.get_kv(CACHE_KEY) is None
