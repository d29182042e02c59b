"""Integrations layer: takeback's hooks in Codex's, Gemini CLI's, Cursor's and Copilot CLI's files.

``takeback hooks install|uninstall AGENT`` for the agents beside Claude Code (whose
settings are :mod:`._claude_settings`'). Each agent's own documented file, in its
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
nothing in it is removed). The file is written as :mod:`._claude_settings` writes
Claude Code's: atomically, through a symlink.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import UsageError
from ._claude_hook import FIRST_SCAN_TIMEOUT
from ._claude_settings import SettingsChange, _write_settings, load_settings

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
    "copilot": "Copilot CLI reads its hooks when a session starts.",
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


def default_command(agent: str, env: Mapping[str, str]) -> str:
    """Return the command the hooks run: ``takeback`` when it is on PATH, else this Python's."""
    import shlex
    import shutil
    import sys

    if shutil.which("takeback", path=env.get("PATH")):
        return f"takeback hook {agent}"
    return f"{shlex.quote(sys.executable)} -m takeback hook {agent}"


def ours_pattern(agent: str) -> re.Pattern[str]:
    """Return the pattern of a command that runs ``takeback hook AGENT``."""
    return re.compile(
        r"(?:^|[\s/\\'\"])takeback(?:\.exe)?['\"]?\s(?:.*\s)?hook\s+"
        + re.escape(agent)
        + r"(?:\s|['\"]|$)"
    )


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
            handler = {key: command, **({"matcher": matcher} if matcher else {})}
        elif agent == "gemini":
            handler = {
                "type": "command",
                "name": "takeback",
                key: command,
                "timeout": HOOK_TIMEOUT * 1000,  # milliseconds
            }
        else:
            handler = {"type": "command", key: command}
        out[event] = (matcher if layout == "nested" else None, handler)
    return out


def merge(
    agent: str, settings: dict[str, Any], command: str | None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Return the file's object with takeback's handlers in place (``command`` None: out).

    In each event installed, one handler of takeback's is kept when it is exactly the one
    wanted (with its group's matcher, in the nested shape); any other of its handlers
    there is removed. Events not installed keep takeback's handlers (a person may have
    added one by hand), unless everything is taken out.

    Returns:
        The new object, and what was added and removed (one line each).

    Raises:
        UsageError: ``hooks`` or one of its events has a shape the agent would refuse.

    """
    import copy

    _module, layout, key, _own = _AGENTS[agent]
    pattern = ours_pattern(agent)

    def ours(h: object) -> bool:
        return isinstance(h, dict) and isinstance(h.get(key), str) and bool(pattern.search(h[key]))

    data = copy.deepcopy(settings)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError("the file's 'hooks' is not an object; fix it by hand first")
    wanted = handlers(agent, command) if command is not None else {}
    added: list[str] = []
    removed: list[str] = []
    for event in [*hooks, *(e for e in wanted if e not in hooks)]:
        if command is not None and event not in wanted:
            continue
        entries = hooks.get(event, [])
        if not isinstance(entries, list):
            raise UsageError(f"the file's hooks.{event} is not a list; fix it by hand first")
        want = wanted.get(event)

        def say(h: object, event: str = event) -> None:
            removed.append(f"{event}: {h.get(key) if isinstance(h, dict) else h}")

        if layout == "nested":
            out, kept = _merge_nested(entries, want, ours, say)
        else:
            out, kept = _merge_flat(entries, want, ours, say)
        if want is not None and not kept:
            matcher, handler = want
            if layout == "nested":
                out.append({**({"matcher": matcher} if matcher else {}), "hooks": [handler]})
            else:
                out.append(handler)
            added.append(f"{event}{f' [{matcher}]' if matcher else ''}: {handler[key]}")
        if out or (event in hooks and not entries):
            hooks[event] = out
        else:
            hooks.pop(event, None)
    if hooks or ("hooks" in settings and not settings["hooks"]):
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    if layout == "flat" and command is not None and "version" not in data:
        data = {"version": 1, **data}
    return data, added, removed


def _merge_nested(
    groups: list[Any],
    want: tuple[str | None, dict[str, Any]] | None,
    ours: Callable[[object], bool],
    say: Callable[[object], None],
) -> tuple[list[Any], bool]:
    kept = False
    out: list[Any] = []
    for group in groups:
        hs = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(group, dict) or not isinstance(hs, list) or not any(map(ours, hs)):
            out.append(group)
            continue
        matcher = group.get("matcher") or None
        left = []
        for h in hs:
            if not ours(h):
                left.append(h)
            elif not kept and want is not None and matcher == want[0] and h == want[1]:
                kept = True
                left.append(h)
            else:
                say(h)
        if left:
            out.append({**group, "hooks": left})
    return out, kept


def _merge_flat(
    entries: list[Any],
    want: tuple[str | None, dict[str, Any]] | None,
    ours: Callable[[object], bool],
    say: Callable[[object], None],
) -> tuple[list[Any], bool]:
    kept = False
    out: list[Any] = []
    for h in entries:
        if not ours(h):
            out.append(h)
        elif not kept and want is not None and h == want[1]:
            kept = True
            out.append(h)
        else:
            say(h)
    return out, kept


def install(agent: str, path: str, command: str) -> SettingsChange:
    """Put takeback's hooks into an agent's file (made if missing).

    Raises:
        UsageError: the file exists and does not hold a JSON object.
        OSError: it cannot be written.

    """
    existed = os.path.exists(path)
    data, added, removed = merge(agent, load_settings(path), command)
    change = SettingsChange(path, added, removed, created=not existed)
    if change.changed:
        _write_settings(path, data)
    else:
        change.created = False
    return change


def uninstall(agent: str, path: str) -> SettingsChange:
    """Take takeback's hooks out of an agent's file, and nothing else.

    Raises:
        UsageError: the file exists and does not hold a JSON object.
        OSError: it cannot be written.

    """
    if not os.path.exists(path):
        return SettingsChange(path)
    data, _added, removed = merge(agent, load_settings(path), None)
    change = SettingsChange(path, [], removed)
    if not change.changed:
        return change
    if _AGENTS[agent][3] and data in ({}, {"version": 1}):
        os.unlink(os.path.realpath(path))  # a hooks file that held only takeback's
    else:
        _write_settings(path, data)
    return change
