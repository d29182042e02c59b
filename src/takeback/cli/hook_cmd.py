"""CLI layer: ``takeback hook AGENT``: the entry point that an agent's hooks call.

AGENT is ``claude-code``, ``codex``, ``gemini``, ``cursor`` or ``copilot``
(``integrations._agent_hook``); Copilot's camelCase payloads name no event, so its
hooks' commands do (``--event preToolUse``).

It reads the hook's JSON on stdin, records it, and exits 0 with nothing on stdout
whatever happens, and within a bounded time (``TAKEBACK_HOOK_TIMEOUT``, see
``Deadline`` in the integration): Claude Code reads a hook's stdout, and its exit code 2,
as decisions (block the tool call, keep the agent going), and a recorder must never make
one, nor hold the agent up.
Failures go to ``hook.log`` in the store.

``cli.main`` hands a hook call to :func:`entry` before the full parser is built, so the
call starts quickly and a bad option is logged instead of ending in argparse's exit 2.
"""

from __future__ import annotations

import os
import sys

from ._argv import GLOBAL_VALUED, read

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from ..integrations.claude_code._call import HookCall
    from ..integrations.claude_code._deadline import Deadline
    from ._app import Ctx

HELP = "the entry point an agent's hooks call (reads the hook's JSON on stdin)"
CHECKS_JOURNAL = False

#: What a hook call prints on stdout, by agent: a decision of nothing. Cursor reads a
#: hook's stdout as JSON on every event (some releases refused a ``preToolUse`` call that
#: printed nothing), so it gets an empty object; every other agent takes empty stdout as
#: "go on". Kept here, not in the integration: a call the service runs loads no more.
ANSWERS = {"cursor": "{}\n"}

_VALUED = (*GLOBAL_VALUED, "--event")
_FLAGS = ("--json",)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments (for --help; calls are parsed by :func:`entry`)."""
    from ..integrations._agent_hook import AGENTS

    p.add_argument("agent", choices=list(AGENTS), help="the agent whose hook calls this")
    p.add_argument("--event", default=None, help="the event, for payloads that name none")


def is_hook_call(argv: Sequence[str]) -> bool:
    """Return whether a command line runs ``takeback hook`` (and does not ask for help)."""
    line = read(argv, _VALUED, _FLAGS)
    return line.words[:1] == ["hook"] and not {"-h", "--help"} & set(line.unknown)


def parse(argv: Sequence[str]) -> HookCall:
    """Return the options of a hook call; what cannot be read is kept as a problem."""
    from ..integrations.claude_code._call import HookCall

    call = HookCall(agent="")
    line = read(argv, _VALUED, _FLAGS)
    for name, value in line.opts.items():
        key = name[2:].replace("-", "_")
        if key == "max_file_bytes":
            try:
                call.max_file_bytes = int(value)
            except ValueError:
                call.problems.append(f"--max-file-bytes: not a number: {value!r}")
        else:
            setattr(call, key, value)
    call.problems += [f"unknown option {a}" for a in line.unknown]
    if line.missing:
        call.problems.append(f"{line.missing} needs a value")
    words = line.words
    if words[:1] == ["hook"]:
        words = words[1:]
    if not words:
        call.problems.append("takeback hook needs the agent's name: takeback hook claude-code")
    else:
        call.agent = words[0]
        if len(words) > 1:
            call.problems.append(f"unexpected arguments: {' '.join(words[1:])}")
    return call


def _read_stdin() -> bytes:
    stdin = sys.stdin
    if stdin is None or stdin.isatty():
        return b""
    return stdin.buffer.read()


def entry(argv: Sequence[str], *, end: Callable[[int], None] | None = None) -> int | None:
    """Run a hook call and return 0; return None when ``argv`` is not a hook call.

    Nothing is printed on stdout but the agent's "go on" (:data:`ANSWERS`), and every
    exception (argument errors included) is logged and swallowed. ``end`` is called
    (with 0) once the call is recorded, by the service or here (its workspace closed):
    the process that calls ``entry`` has nothing left to do then.
    """
    if not is_hook_call(argv):
        return None
    saved = sys.stdout
    # Whatever is printed by mistake goes to stderr, which Claude Code does not parse.
    sys.stdout = sys.stderr
    deadline: Deadline | None = None
    relayed = False
    said = ""  # what the agent reads on stdout: a decision of nothing, or nothing
    try:
        from ..integrations.claude_code._deadline import Deadline

        call = parse(argv)
        said = ANSWERS.get(call.agent, "")
        # Armed before stdin is read: an agent that never closes it must not hold us.
        deadline = Deadline.from_env(os.environ, call)
        deadline.start()
        raw = _read_stdin()
        relayed = _relayed(argv, call, raw, deadline)
        if not relayed:
            from ..integrations._agent_hook import run

            run(raw, call, os.environ, deadline=deadline)
    except BaseException:  # noqa: BLE001 - fail open; run() has logged what it could
        relayed = False
    finally:
        if deadline is not None:
            deadline.stop()
        sys.stdout = saved
    if said and saved is not None:
        try:
            saved.write(said)
            saved.flush()
        except OSError:
            pass  # the agent stopped reading: an answer not given decides nothing either
    if end is not None:
        end(0)
    return 0


#: the events that start a conversation, in each agent's spelling
_STARTS = ("SessionStart", "sessionStart")


def _relayed(argv: Sequence[str], call: HookCall, raw: bytes, deadline: Deadline) -> bool:
    """Have the workspace's running service record this call; False: record it here.

    Every event but ``SessionStart`` (which may start the first snapshot in a process of
    its own) is handed over. The caller keeps its bound: the ``Deadline`` is armed while
    it waits.
    """
    from .._wire import json_object
    from ._relay import relay_on, store_for

    if call.problems or not relay_on(os.environ):
        return False
    doc = json_object(raw)  # None: run here, where the payload's fault is logged
    # Copilot's camelCase payloads name no event: its command does (``--event``).
    if doc is None or (doc.get("hook_event_name") or call.event) in (None, *_STARTS):
        return False
    env = os.environ
    cwd = doc.get("cwd")
    root = call.root or env.get("CLAUDE_PROJECT_DIR") or (cwd if isinstance(cwd, str) else None)
    store = call.store or env.get("TAKEBACK_STORE")
    if not root and not store:
        return False
    path = store_for(root=root, store=store, env=env, find_from=None)
    if path is None:
        return False
    here = os.getcwd() if os.path.isdir(".") else "/"
    from .._service_client import BrokeOff, exchange

    try:
        answer = exchange(path, list(argv), here, env, raw)
    except BrokeOff as e:
        from ..integrations.claude_code._log import append_log, log_line
        from ..integrations.claude_code._payload import parse_payload

        deadline.log_dir = path
        append_log(path, log_line(parse_payload(raw), str(e)))
        return True
    return answer is not None


def run(ctx: Ctx) -> int:
    """Handle a hook call that came through the full parser (``cli.main`` normally doesn't)."""
    from ..integrations._agent_hook import run as run_hook
    from ..integrations.claude_code._call import HookCall
    from ..integrations.claude_code._deadline import Deadline

    call = HookCall(
        agent=ctx.args.agent,
        event=ctx.args.event,
        root=getattr(ctx.args, "root", None),
        store=str(ctx.args.store) if getattr(ctx.args, "store", None) else None,
        session=getattr(ctx.args, "session", None),
        max_file_bytes=ctx.max_file_bytes,
    )
    deadline = Deadline.from_env(os.environ, call)
    try:
        deadline.start()
        run_hook(_read_stdin(), call, os.environ, deadline=deadline)
    except BaseException:  # noqa: BLE001 - fail open
        pass
    finally:
        deadline.stop()
    said = ANSWERS.get(call.agent, "")
    if said:
        ctx.out(said.rstrip("\n"))
    return 0
