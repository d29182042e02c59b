"""Integrations layer: Cursor's hook calls, read for the one mapping.

Cursor (``.cursor/hooks.json``, version 1; see docs/agents.md) sends ``sessionStart``,
``beforeSubmitPrompt`` (the prompt), ``preToolUse`` / ``postToolUse`` /
``postToolUseFailure`` (every tool, with ``tool_name``, ``tool_input`` and
``tool_use_id``) and ``stop``, each with ``conversation_id``. A file tool (``Write``,
``StrReplace``, ``Delete``, ``EditNotebook``) names its file in ``tool_input.path`` (or
``file_path``, ``target_notebook``); ``Shell`` is a step. ``beforeShellExecution`` /
``afterShellExecution``, which carry no tool id, are read too (paired by command and
folder) for a person who routes them here. The workspace is ``--root``, else
``$CURSOR_PROJECT_DIR``, else the first of ``workspace_roots``, else ``cwd``.

Cursor reads stdout as JSON on every event: a call answers ``{}``, which decides nothing
(``cli.hook_cmd.ANSWERS``).
"""

from __future__ import annotations

from . import _agent_hook as ah

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .claude_code._call import HookCall
    from .claude_code._payload import Payload

AGENT = "cursor"
FILE_TOOLS = ("Write", "StrReplace", "Delete", "EditNotebook")
SHELL_TOOLS = ("Shell",)
_PATH_KEYS = ("path", "file_path", "target_notebook", "target_file")
EVENTS: tuple[tuple[str, str | None], ...] = (
    ("sessionStart", None),
    ("beforeSubmitPrompt", None),
    ("preToolUse", "|".join((*FILE_TOOLS, *SHELL_TOOLS))),
    ("postToolUse", "|".join(SHELL_TOOLS)),
    ("postToolUseFailure", "|".join(SHELL_TOOLS)),
    ("stop", None),
)


def read(raw: bytes, call: HookCall, env: Mapping[str, str]) -> Payload:
    """Return one Cursor hook call in the mapping's words.

    Raises:
        UsageError: not a JSON object, or no ``hook_event_name`` or ``conversation_id``.

    """
    doc = ah.load(raw)
    event = ah.need(doc, "hook_event_name")
    roots = doc.get("workspace_roots")
    first = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
    cwd = ah.text(doc, "cwd")
    root = ah.root_of(call, env, "CURSOR_PROJECT_DIR", first or cwd)
    session = ah.need(doc, "conversation_id", "session_id")
    r = ah.Reading(AGENT, session, root=root, cwd=cwd or root)
    if event == "beforeSubmitPrompt":
        return r.prompt(ah.text(doc, "prompt"))
    if event in ("preToolUse", "postToolUse", "postToolUseFailure"):
        tool = ah.text(doc, "tool_name") or ""
        tool_input = ah.args(doc.get("tool_input"))
        call_id = ah.text(doc, "tool_use_id")
        if event == "preToolUse" and tool in FILE_TOOLS:
            return r.touch(ah.text(tool_input, *_PATH_KEYS), call_id)
        if tool in SHELL_TOOLS:
            label = ah.text(tool_input, "command") or tool
            return r.command(label, call_id, after=event != "preToolUse")
        return r.ignored(event)
    if event in ("beforeShellExecution", "afterShellExecution"):
        command = ah.text(doc, "command") or "shell"
        key = ah.call_key("Shell", {"command": command, "cwd": cwd})
        return r.command(command, key, after=event == "afterShellExecution")
    if event == "stop":
        return r.stop()
    if event == "sessionStart":
        return r.start(ah.text(doc, "source"))
    return r.ignored(event)
