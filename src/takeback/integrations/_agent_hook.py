"""Integrations layer: every agent's hook call, read into the one mapping of turns and steps.

``takeback hook AGENT`` for each agent takeback knows. Claude Code's payloads are read by
:mod:`.claude_code._payload` itself; each other agent has a module (``_codex``, ``_gemini``,
``_cursor``, ``_copilot``) whose ``read`` turns one of its hook calls into a
:class:`.claude_code._payload.Payload` in the words that :func:`.claude_code._hook.handle` maps
onto a session (the agent's conversation id), a turn and its steps:

- :data:`PROMPT`: the person's prompt opens a turn;
- :data:`BEFORE` of :data:`FILE_TOOL`: a file tool is about to write the path it names,
  or a patch tool every path its patch names (each file is touched: its state before is
  kept);
- :data:`BEFORE` / :data:`AFTER` of :data:`SHELL_TOOL`: a command (or any tool whose
  writes are not known one path at a time) is a step bracketed by snapshots. These
  agents run tool calls side by side (Codex was seen to), so a step ends with its own
  after-event (which each of them sends for a failed command too: Codex's and Gemini's
  after-event, Copilot's and Cursor's failure event), or, when that never comes (a
  denied call), with the turn; another tool's call does not end it;
- :data:`STOP`: the reply is over, the turn ends;
- :data:`START`: a conversation starts (the workspace's first snapshot may begin early).

Anything else is ignored (it still finishes a step left open). Where an agent's tool
calls carry no id, a call's before- and after-event are paired by the tool's name and
arguments (:func:`call_key`). Everything else
of a hook call (the time bound, the log, failing open, the relay to the watching service,
the detached first snapshot) is :mod:`.claude_code`'s, the same for every agent.

Nothing here is loaded but by a hook call: the settings files are :mod:`._agent_settings`'.
"""

from __future__ import annotations

import json

from ..errors import UsageError
from .claude_code._call import AGENT as CLAUDE_CODE
from .claude_code._payload import MANY_FILES, Payload
from .claude_code._payload import load as load  # every reader's (ah.load)

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from .claude_code._call import HookCall
    from .claude_code._deadline import Deadline

#: the agents ``takeback hook`` and ``takeback hooks`` know -> the module reading them
AGENTS: dict[str, str] = {
    CLAUDE_CODE: "claude_code._payload",
    "codex": "_codex",
    "gemini": "_gemini",
    "cursor": "_cursor",
    "copilot": "_copilot",
}

PROMPT = "UserPromptSubmit"
BEFORE = "PreToolUse"
AFTER = "PostToolUse"
STOP = "Stop"
START = "SessionStart"
#: the tool names of the mapping (:data:`.claude_code._payload.FILE_TOOLS`, ``COMMAND_TOOLS``)
FILE_TOOL = "Write"
SHELL_TOOL = "Bash"


def run(
    raw: bytes, call: HookCall, env: Mapping[str, str], *, deadline: Deadline | None = None
) -> str | None:
    """Handle one hook call of ``call.agent``; never raises (see :func:`.claude_code._hook.run`)."""
    import importlib

    from .claude_code._hook import run as run_hook

    module = AGENTS.get(call.agent)
    if module is None or call.agent == CLAUDE_CODE:
        return run_hook(raw, call, env, deadline=deadline)
    read = importlib.import_module(f"{__package__}.{module}").read
    return run_hook(raw, call, env, deadline=deadline, read=read)


# -- reading a payload -----------------------------------------------------------------


def text(doc: Mapping[str, Any], *keys: str) -> str | None:
    """Return the first of ``keys`` that holds a non-empty string (None: none does)."""
    for key in keys:
        value = doc.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def need(doc: Mapping[str, Any], *keys: str) -> str:
    """Return the first of ``keys`` that holds a non-empty string.

    Raises:
        UsageError: none does.

    """
    value = text(doc, *keys)
    if value is None:
        raise UsageError(f"hook payload has no {' or '.join(map(repr, keys))}")
    return value


def args(value: object) -> dict[str, Any]:
    """Return a tool's arguments: an object, or an object written as a JSON string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def call_key(tool: str, tool_input: Mapping[str, Any]) -> str:
    """Return the key a tool call's before- and after-event share (for calls with no id).

    Made of the tool's name and its arguments, which both events carry.
    """
    import hashlib

    doc = json.dumps([tool, tool_input], sort_keys=True, default=str)
    return "args-" + hashlib.sha256(doc.encode("utf-8", "surrogatepass")).hexdigest()[:16]


#: the lines of a patch that name a file (compiled on first use: most calls read no patch)
_PATCH_FILE = r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+?)\s*$"


def patch_files(patch: object) -> list[str]:
    """Return every file an ``apply_patch`` patch adds, changes, deletes or moves to.

    The patch format (``*** Begin Patch``, then ``*** Add File: PATH``, ``*** Update
    File: PATH`` with an optional ``*** Move to: PATH``, ``*** Delete File: PATH``) is the
    one Codex's and Copilot CLI's patch tools take; paths are relative to the cwd.
    """
    if not isinstance(patch, str):
        return []
    import re

    return list(dict.fromkeys(re.findall(_PATCH_FILE, patch, re.MULTILINE)))


def root_of(call: HookCall, env: Mapping[str, str], var: str, cwd: str | None) -> str | None:
    """Return the workspace root: ``--root``, else the agent's project variable, else cwd."""
    return call.root or env.get(var) or cwd


class Reading:
    """What every payload of one hook call shares: the agent, session, root and cwd."""

    def __init__(self, agent: str, session: str, *, root: str | None, cwd: str | None) -> None:
        self.agent = agent
        self.session = session
        self.root = root
        self.cwd = cwd

    def _payload(self, event: str, **fields: Any) -> Payload:
        return Payload(
            event=event,
            session_id=self.session,
            cwd=self.cwd,
            agent=self.agent,
            root=self.root,
            parallel=True,
            **fields,
        )

    def prompt(self, prompt: str | None) -> Payload:
        """The person's prompt: a turn begins."""
        return self._payload(PROMPT, prompt=prompt or "")

    def touch(self, path: str | None, call_id: str | None) -> Payload:
        """A file tool is about to write ``path`` (relative to the cwd, or absolute)."""
        if not path:
            return self.ignored("a file tool naming no file")
        return self._payload(
            BEFORE, tool_name=FILE_TOOL, tool_input={"file_path": path}, tool_use_id=call_id
        )

    def touch_all(self, paths: list[str], call_id: str | None) -> Payload:
        """A patch tool is about to write every one of ``paths`` (each kept as a touch)."""
        return self._payload(
            BEFORE, tool_name=FILE_TOOL, tool_input={MANY_FILES: paths}, tool_use_id=call_id
        )

    def command(self, label: str, call_id: str | None, *, after: bool) -> Payload:
        """A command's start (a snapshot before it), or its end (after: what it changed)."""
        return self._payload(
            AFTER if after else BEFORE,
            tool_name=SHELL_TOOL,
            tool_input={"command": label},
            tool_use_id=call_id,
        )

    def stop(self) -> Payload:
        """The reply is over: the turn ends."""
        return self._payload(STOP)

    def start(self, source: str | None) -> Payload:
        """A conversation starts (``source``: startup, resume, ...)."""
        return self._payload(START, source=source)

    def ignored(self, event: str) -> Payload:
        """A call takeback has nothing to record for (a step left open is finished)."""
        return self._payload(f"{event} (ignored)")
