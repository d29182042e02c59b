"""Integrations layer: one hook call's payload, in Claude Code's terms, and its workspace root.

Claude Code's own payloads are read here (:func:`parse_payload`); every other agent's
are read into the same :class:`Payload` by its module (``integrations._codex`` and the
others, through ``integrations._agent_hook``). The tool names and events below are the
words of the one mapping onto turns and steps (:mod:`._hook`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from ...errors import UsageError
from ._call import AGENT

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from typing import Any

    from ... import Workspace

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
#: does; another agent's patch tool, read by ``integrations._agent_hook``)
MANY_FILES = "file_paths"

LABEL_MAX = 200


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


def load(raw: bytes) -> dict[str, Any]:
    """Return a hook call's JSON object (any agent's).

    Raises:
        UsageError: empty, not JSON, or not an object.

    """
    if not raw.strip():
        raise UsageError("empty hook payload on stdin")
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise UsageError(f"hook payload is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise UsageError("hook payload is not a JSON object")
    return doc


def parse_payload(raw: bytes) -> Payload:
    """Return the payload of one hook call.

    Args:
        raw: the bytes read from stdin.

    Raises:
        UsageError: empty, not JSON, not an object, or a field of the wrong type.

    """
    doc = load(raw)
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


def label(text: str | None) -> str:
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


def expand_user(path: str, env: Mapping[str, str]) -> str:
    """Return a file tool's path with a leading ``~`` expanded, as the agent expands it."""
    if not path.startswith("~"):
        return path
    home = env.get("HOME")
    if home and (path == "~" or path[1] in ("/", os.sep)):
        return os.path.join(home, path[2:]) if len(path) > 2 else home
    return os.path.expanduser(path)


def make_workspace(
    root: str, store: str | None, max_file_bytes: int | None, env: Mapping[str, str]
) -> Workspace:
    from ... import Workspace
    from .._data_dir import user_data_dir

    # Read from the environment here: asking platformdirs costs each call its import.
    data_dir = user_data_dir(env)
    if max_file_bytes is not None:
        return Workspace(root, store=store, data_dir=data_dir, max_file_bytes=max_file_bytes)
    return Workspace(root, store=store, data_dir=data_dir)
