"""Integrations layer: takeback's hooks in Codex's, Gemini CLI's, Cursor's and Copilot CLI's files.

``takeback hooks install|uninstall AGENT`` for the agents beside Claude Code (whose
settings are :mod:`.claude_code._settings`'). Each agent's own documented file, in its
documented place (see docs/agents.md):

| agent | project | user | shape (version) |
| --- | --- | --- | --- |
| codex | ``.codex/hooks.json`` | ``$CODEX_HOME/hooks.json`` (``~/.codex``) | nested |
| gemini | ``.gemini/settings.json`` | ``~/.gemini/settings.json`` | nested |
| cursor | ``.cursor/hooks.json`` | ``~/.cursor/hooks.json`` | flat, 1 |
| copilot | ``.github/hooks/takeback.json`` | ``$COPILOT_HOME/hooks/takeback.json`` | flat, 1 |

Nested: ``{"hooks": {EVENT: [{"matcher": M, "hooks": [HANDLER]}]}}``; flat: ``{"version":
1, "hooks": {EVENT: [HANDLER]}}`` with the matcher, if any, in the handler. A handler is
takeback's when its command runs ``takeback hook AGENT``; every other key, group and
handler is kept as it was, installing twice writes the same bytes, and uninstalling takes
out takeback's handlers and nothing else (a file of takeback's own that is left with
nothing in it is removed). The file is written as :mod:`.claude_code._settings` writes
Claude Code's: atomically, through a symlink.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from .claude_code._deadline import FIRST_SCAN_TIMEOUT
from .claude_code._settings import (
    SettingsChange,
    merge_handlers,
    ours_pattern,
    rewrite,
)

#: agent -> (module with its EVENTS, layout, key of the handler's command, own file)
_AGENTS: dict[str, tuple[str, str, str, bool]] = {
    "codex": ("_codex", "nested", "command", True),
    "gemini": ("_gemini", "nested", "command", False),
    "cursor": ("_cursor", "flat", "command", True),
    "copilot": ("_copilot", "flat", "bash", True),
}
AGENTS = tuple(_AGENTS)
#: Seconds an agent lets one call run, where its default is shorter (Copilot 30 s, Gemini
#: 60 s): the call that waits for the workspace's first full snapshot may take that long
#: (Codex and Claude Code allow as much by default).
#: Every other call ends within its own bound of 30 s.
HOOK_TIMEOUT = int(FIRST_SCAN_TIMEOUT)

#: what each agent needs a person to do before installed hooks run
NOTES: dict[str, str] = {
    "codex": (
        "Codex runs a hook only once it is reviewed: open /hooks in Codex and trust "
        "takeback's (and trust the project, for project hooks)."
    ),
    "gemini": (
        "Gemini CLI loads project hooks only in a trusted folder, and asks you to accept "
        "new ones at the next start."
    ),
    "cursor": "Cursor reads hooks.json when it starts: restart it.",
    "copilot": (
        "Copilot CLI runs a repository's hooks only in a folder you trust, and reads them "
        "when a session starts."
    ),
}


def settings_path(agent: str, scope: str, root: str, env: Mapping[str, str]) -> str:
    """Return the file an agent reads its hooks from, for ``project`` or ``user`` scope.

    Raises:
        UsageError: an agent or scope takeback does not know.

    """
    home = env.get("HOME") or os.path.expanduser("~")
    if scope not in ("project", "user"):
        raise UsageError(f"{agent} has no {scope} hooks: use --project or --user")
    user = scope == "user"
    if agent == "codex":
        base = (env.get("CODEX_HOME") or os.path.join(home, ".codex")) if user else None
        return os.path.join(base or os.path.join(root, ".codex"), "hooks.json")
    if agent == "gemini":
        return os.path.join(home if user else root, ".gemini", "settings.json")
    if agent == "cursor":
        return os.path.join(home if user else root, ".cursor", "hooks.json")
    if agent == "copilot":
        if user:
            base = env.get("COPILOT_HOME") or os.path.join(home, ".copilot")
            return os.path.join(base, "hooks", "takeback.json")
        return os.path.join(root, ".github", "hooks", "takeback.json")
    raise UsageError(f"unknown agent {agent!r}")


def handlers(agent: str, command: str) -> dict[str, tuple[str | None, dict[str, Any]]]:
    """Return each event's matcher and the handler takeback installs there."""
    import importlib

    module, layout, key, _own = _AGENTS[agent]
    events = importlib.import_module(f"{__package__}.{module}").EVENTS
    out: dict[str, tuple[str | None, dict[str, Any]]] = {}
    for event, matcher in events:
        if agent == "copilot":
            # Its camelCase payloads name no event: the command does.
            handler: dict[str, Any] = {
                "type": "command",
                key: f"{command} --event {event}",
                "timeoutSec": HOOK_TIMEOUT,
            }
        elif agent == "cursor":
            handler = {key: command}
        elif agent == "gemini":
            handler = {
                "type": "command",
                "name": "takeback",
                key: command,
                "timeout": HOOK_TIMEOUT * 1000,  # milliseconds
            }
        else:
            handler = {"type": "command", key: command}
        out[event] = (matcher, handler)
    return out


def merge(
    agent: str, settings: dict[str, Any], command: str | None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Return the file's object with takeback's handlers in place (``command`` None: out).

    The one merge of :func:`.claude_code._settings.merge_handlers`, in the agent's shape; a
    flat file gets the ``version`` it must have.

    Returns:
        The new object, and what was added and removed (one line each).

    Raises:
        UsageError: ``hooks`` or one of its events has a shape the agent would refuse.

    """
    _module, layout, key, _own = _AGENTS[agent]
    pattern = ours_pattern(agent)

    def ours(h: object) -> bool:
        return isinstance(h, dict) and isinstance(h.get(key), str) and bool(pattern.search(h[key]))

    wanted = handlers(agent, command) if command is not None else {}
    flat = layout == "flat"
    data, added, removed = merge_handlers(
        settings, wanted, ours, removing=command is None, flat=flat, key=key
    )
    if flat and command is not None and "version" not in data:
        data = {"version": 1, **data}
    return data, added, removed


def install(agent: str, path: str, command: str) -> SettingsChange:
    """Put takeback's hooks into an agent's file (made if missing).

    Raises:
        UsageError: the file exists and does not hold a JSON object.
        OSError: it cannot be written.

    """
    return rewrite(path, lambda doc: merge(agent, doc, command))


def uninstall(agent: str, path: str) -> SettingsChange:
    """Take takeback's hooks out of an agent's file, and nothing else.

    Raises:
        UsageError: the file exists and does not hold a JSON object.
        OSError: it cannot be written.

    """
    own_file = _AGENTS[agent][3]

    def only_ours(data: dict[str, Any]) -> bool:  # a hooks file that held only takeback's
        return own_file and data in ({}, {"version": 1})

    return rewrite(path, lambda doc: merge(agent, doc, None), removing=True, drop_if=only_ours)
