"""Integrations layer: Gemini CLI's hook calls, read for the one mapping.

Gemini CLI (``hooks`` in ``settings.json``, its hook format as of 0.61; see
docs/agents.md) sends ``SessionStart``, ``BeforeAgent`` (the prompt), ``BeforeTool`` /
``AfterTool`` and ``AfterAgent`` (the reply is over) with ``session_id``, ``cwd`` and,
for a tool, ``tool_name`` and ``tool_input``. ``write_file`` and ``replace`` name the
file in ``tool_input.file_path``; ``run_shell_command`` is a step. Its tool calls carry
no id: a call's before- and after-event are paired by the tool's name and arguments. The
workspace is ``--root``, else ``$GEMINI_PROJECT_DIR``, else the payload's ``cwd``.

Gemini reads a hook's stderr when its stdout is empty: a call prints nothing on either.
"""

from __future__ import annotations

from . import _agent_hook as ah

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .claude_code._call import HookCall
    from .claude_code._payload import Payload

AGENT = "gemini"
FILE_TOOLS = ("write_file", "replace")
SHELL_TOOLS = ("run_shell_command",)
EVENTS: tuple[tuple[str, str | None], ...] = (
    ("SessionStart", None),
    ("BeforeAgent", None),
    ("BeforeTool", "|".join((*FILE_TOOLS, *SHELL_TOOLS))),
    ("AfterTool", "|".join(SHELL_TOOLS)),
    ("AfterAgent", None),
)


def read(raw: bytes, call: HookCall, env: Mapping[str, str]) -> Payload:
    """Return one Gemini CLI hook call in the mapping's words.

    Raises:
        UsageError: not a JSON object, or no ``hook_event_name`` or ``session_id``.

    """
    doc = ah.load(raw)
    event = ah.need(doc, "hook_event_name")
    cwd = ah.text(doc, "cwd")
    root = ah.root_of(call, env, "GEMINI_PROJECT_DIR", cwd)
    r = ah.Reading(AGENT, ah.need(doc, "session_id"), root=root, cwd=cwd or root)
    if event == "BeforeAgent":
        return r.prompt(ah.text(doc, "prompt"))
    if event in ("BeforeTool", "AfterTool"):
        tool = ah.text(doc, "tool_name") or ""
        tool_input = ah.args(doc.get("tool_input"))
        if event == "BeforeTool" and tool in FILE_TOOLS:
            return r.touch(ah.text(tool_input, "file_path"), None)
        if tool in SHELL_TOOLS:
            label = ah.text(tool_input, "command") or tool
            key = ah.call_key(tool, tool_input)
            return r.command(label, key, after=event == "AfterTool")
        return r.ignored(event)
    if event == "AfterAgent":
        return r.stop()
    if event == "SessionStart":
        return r.start(ah.text(doc, "source"))
    return r.ignored(event)
