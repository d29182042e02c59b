"""Integrations layer: OpenAI Codex CLI's hook calls, read for the one mapping.

Codex (``hooks.json``, its hook format as of codex-cli 0.171; see docs/agents.md) sends
``SessionStart``, ``UserPromptSubmit``, ``PreToolUse``, ``PostToolUse`` and ``Stop`` with
``session_id``, ``cwd`` and, for a tool, ``tool_name``, ``tool_input`` and
``tool_use_id``. Its shell tools report themselves as ``Bash`` (``tool_input.command``),
a step bracketed by snapshots. ``apply_patch`` carries its patch in
``tool_input.command``: every file the patch adds, changes, moves or deletes is touched
before it runs, as a file tool's; a patch whose files cannot be read from it is recorded
as a step instead, so that nothing it does goes unrecorded. The workspace is ``--root``,
else the payload's ``cwd`` (Codex runs its hooks there).
"""

from __future__ import annotations

from . import _agent_hook as ah

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .claude_code._call import HookCall
    from .claude_code._payload import Payload

AGENT = "codex"
#: tools whose writes are found by snapshots around them
STEP_TOOLS = ("Bash", "apply_patch")
#: the events installed, and their matchers (None: the event takes none)
EVENTS: tuple[tuple[str, str | None], ...] = (
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    ("PreToolUse", "|".join(STEP_TOOLS)),
    ("PostToolUse", "|".join(STEP_TOOLS)),
    ("Stop", None),
)


def read(raw: bytes, call: HookCall, env: Mapping[str, str]) -> Payload:
    """Return one Codex hook call in the mapping's words.

    Raises:
        UsageError: not a JSON object, or no ``hook_event_name`` or ``session_id``.

    """
    doc = ah.load(raw)
    event = ah.need(doc, "hook_event_name")
    cwd = ah.text(doc, "cwd")
    r = ah.Reading(AGENT, ah.need(doc, "session_id"), root=call.root or cwd, cwd=cwd)
    if event == "UserPromptSubmit":
        return r.prompt(ah.text(doc, "prompt"))
    if event in ("PreToolUse", "PostToolUse"):
        tool = ah.text(doc, "tool_name") or ""
        if tool not in STEP_TOOLS:
            return r.ignored(event)
        tool_input = ah.args(doc.get("tool_input"))
        command = tool_input.get("command")
        call_id = ah.text(doc, "tool_use_id")
        after = event == "PostToolUse"
        if tool == "apply_patch":
            files = ah.patch_files(command)
            if files:
                return r.ignored(event) if after else r.touch_all(files, call_id)
            label = "apply_patch"
        elif isinstance(command, list):
            label = " ".join(str(c) for c in command)
        else:
            label = command if isinstance(command, str) else tool
        return r.command(label, call_id, after=after)
    if event == "Stop":
        return r.stop()
    if event == "SessionStart":
        return r.start(ah.text(doc, "source"))
    return r.ignored(event)
