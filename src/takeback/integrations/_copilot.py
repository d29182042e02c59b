"""Integrations layer: GitHub Copilot CLI's hook calls, read for the one mapping.

Copilot CLI (``.github/hooks/*.json``, version 1; see docs/agents.md) sends
``sessionStart``, ``userPromptSubmitted``, ``preToolUse``, ``postToolUse`` /
``postToolUseFailure`` and ``agentStop`` with camelCase keys (``sessionId``, ``cwd``,
``toolName``, ``toolArgs``, the latter an object or an object written as a JSON string)
and no event name: the installed command names it (``takeback hook copilot --event
preToolUse``). A payload that does name its event (``hook_event_name``, the format of
its PascalCase events) is read by that name, with ``session_id``, ``tool_name`` and
``tool_input``. ``edit`` and ``create`` name their file in ``path``, and every file an
``apply_patch`` patch names is touched (a patch whose files cannot be read is a step);
``bash`` is a step. Tool calls carry no id: a call's before- and after-event are
paired by the tool's name and arguments. A payload with no session id (older releases)
records in the session ``copilot``. The workspace is ``--root``, else the payload's
``cwd``.
"""

from __future__ import annotations

from . import _agent_hook as ah

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .claude_code._call import HookCall
    from .claude_code._payload import Payload

AGENT = "copilot"
FILE_TOOLS = ("edit", "create")
#: tools whose writes are found by snapshots around them: the shells, and the patch tool
#: it offers models that write patches (it may add, move and delete several files)
SHELL_TOOLS = ("bash", "powershell", "apply_patch")
EVENTS: tuple[tuple[str, str | None], ...] = (
    ("sessionStart", None),
    ("userPromptSubmitted", None),
    ("preToolUse", None),
    ("postToolUse", None),
    ("postToolUseFailure", None),
    ("agentStop", None),
)
#: each event's name in both spellings -> what it is in the mapping
_EVENTS = {
    "sessionStart": ah.START,
    "SessionStart": ah.START,
    "userPromptSubmitted": ah.PROMPT,
    "UserPromptSubmit": ah.PROMPT,
    "preToolUse": ah.BEFORE,
    "PreToolUse": ah.BEFORE,
    "postToolUse": ah.AFTER,
    "PostToolUse": ah.AFTER,
    "postToolUseFailure": ah.AFTER,
    "PostToolUseFailure": ah.AFTER,
    "agentStop": ah.STOP,
    "Stop": ah.STOP,
}


def read(raw: bytes, call: HookCall, env: Mapping[str, str]) -> Payload:
    """Return one Copilot CLI hook call in the mapping's words.

    Raises:
        UsageError: not a JSON object, or neither the payload nor ``--event`` names the event.

    """
    doc = ah.load(raw)
    event = ah.text(doc, "hook_event_name") or call.event
    if not event:
        from ..errors import UsageError

        raise UsageError("the hook's command names no --event, and the payload none")
    cwd = ah.text(doc, "cwd")
    session = ah.text(doc, "sessionId", "session_id") or AGENT
    r = ah.Reading(AGENT, session, root=call.root or cwd, cwd=cwd)
    kind = _EVENTS.get(event)
    if kind == ah.PROMPT:
        return r.prompt(ah.text(doc, "prompt"))
    if kind in (ah.BEFORE, ah.AFTER):
        tool = ah.text(doc, "toolName", "tool_name") or ""
        raw_args = doc["toolArgs"] if "toolArgs" in doc else doc.get("tool_input")
        tool_input = ah.args(raw_args)
        if kind == ah.BEFORE and tool in FILE_TOOLS:
            return r.touch(ah.text(tool_input, "path", "file_path"), None)
        if tool == "apply_patch":
            patch = raw_args if isinstance(raw_args, str) else ah.text(tool_input, "input")
            files = ah.patch_files(patch)
            if files:
                return r.touch_all(files, None) if kind == ah.BEFORE else r.ignored(event)
        if tool in SHELL_TOOLS:
            label = ah.text(tool_input, "command") or tool
            return r.command(label, ah.call_key(tool, tool_input), after=kind == ah.AFTER)
        return r.ignored(event)
    if kind == ah.STOP:
        return r.stop()
    if kind == ah.START:
        return r.start(ah.text(doc, "source"))
    return r.ignored(event)
