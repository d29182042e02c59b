"""Integrations layer: takeback's hooks in Claude Code's settings files, put in and taken out.

The settings merge behind ``takeback hooks install|uninstall claude-code``: takeback's
handlers are added to (or taken out of) a settings file, leaving every other key and
handler as it was, and never adding one of its own twice. A handler is takeback's when
its command runs ``takeback hook claude-code`` (:func:`is_ours`); what it does when
called is :mod:`._hook`'s.

The file is replaced atomically, and a symlinked one is written through (people keep
settings in a dotfiles repository and link them in).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._fs import atomic_write
from ...errors import UsageError
from ._call import AGENT
from ._payload import COMMAND_TOOLS, FILE_TOOLS

#: the events takeback installs, and their matchers (None: the event takes none). Only
#: events every Claude Code release knows: an unknown event name makes Claude Code skip
#: the whole settings file.
HOOK_SPECS: tuple[tuple[str, str | None], ...] = (
    # Every source (startup, resume, clear, compact): the first snapshot starts early.
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    ("PreToolUse", "|".join([*FILE_TOOLS, *sorted(COMMAND_TOOLS)])),
    ("PostToolUse", "|".join(sorted(COMMAND_TOOLS))),
    ("Stop", None),
)
#: what a failed Bash call sends instead of PostToolUse; installed only when the Claude
#: Code on PATH is at least :data:`FAILURE_EVENT_SINCE` (older ones would skip the file)
FAILURE_SPEC: tuple[str, str | None] = ("PostToolUseFailure", "|".join(sorted(COMMAND_TOOLS)))
#: the first Claude Code release known to read ``PostToolUseFailure`` (it was added
#: without a changelog entry early in 2.1; this is the earliest release we know of whose
#: users report the event firing, not a guess below it)
FAILURE_EVENT_SINCE = (2, 1, 50)
#: sent once a batch of tool calls has resolved, before the next model call: every
#: command step still open in it ends there (a denied call's too) instead of at the next
#: call; installed from :data:`BATCH_EVENT_SINCE`, the release it was seen working in
#: (the one the real-agent tests run), not a guess below it
BATCH_SPEC: tuple[str, str | None] = ("PostToolBatch", None)
BATCH_EVENT_SINCE = (2, 1, 332)
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def claude_version(env: Mapping[str, str]) -> tuple[int, int, int] | None:
    """Return the version of the ``claude`` on PATH (None: none, or it does not say).

    Runs ``claude --version`` (5 s at most); nothing else is read or written.
    """
    import shutil
    import subprocess

    exe = shutil.which("claude", path=env.get("PATH"))
    if exe is None:
        return None
    try:
        proc = subprocess.run(
            [exe, "--version"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=5,
            stdin=subprocess.DEVNULL,
            env=dict(env),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        return None
    return (int(m[1]), int(m[2]), int(m[3]))


def hook_specs(version: tuple[int, int, int] | None) -> tuple[tuple[str, str | None], ...]:
    """Return the events to install for a Claude Code version (None: not known)."""
    specs = HOOK_SPECS
    if version is not None and version >= FAILURE_EVENT_SINCE:
        specs = (*specs, FAILURE_SPEC)
    if version is not None and version >= BATCH_EVENT_SINCE:
        specs = (*specs, BATCH_SPEC)
    return specs


def ours_pattern(agent: str) -> re.Pattern[str]:
    """Return the pattern of a command that runs ``takeback hook AGENT``."""
    return re.compile(
        r"(?:^|[\s/\\'\"])takeback(?:\.exe)?['\"]?\s(?:.*\s)?hook\s+"
        + re.escape(agent)
        + r"(?:\s|['\"]|$)"
    )


_OURS = ours_pattern(AGENT)


class SettingsChange:
    """What installing or uninstalling did to one settings file."""

    def __init__(
        self,
        path: str,
        added: list[str] | None = None,
        removed: list[str] | None = None,
        *,
        created: bool = False,
    ) -> None:
        self.path = path
        self.added = added or []
        self.removed = removed or []
        self.created = created

    @property
    def changed(self) -> bool:
        """Whether the file was written."""
        return bool(self.added or self.removed)

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``--json``)."""
        return {
            "settings": self.path,
            "changed": self.changed,
            "created": self.created,
            "added": self.added,
            "removed": self.removed,
        }


def default_command(env: Mapping[str, str], agent: str = AGENT) -> str:
    """Return the command the hooks run: ``takeback`` when it is on PATH, else this Python's."""
    import shlex
    import shutil
    import sys

    if shutil.which("takeback", path=env.get("PATH")):
        return f"takeback hook {agent}"
    return f"{shlex.quote(sys.executable)} -m takeback hook {agent}"


def settings_path(scope: str, root: str, env: Mapping[str, str]) -> str:
    """Return the settings file of a scope: ``project``, ``local`` or ``user``."""
    if scope == "user":
        base = env.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
        return os.path.join(base, "settings.json")
    name = "settings.local.json" if scope == "local" else "settings.json"
    return os.path.join(root, ".claude", name)


def is_ours(handler: object) -> bool:
    """Return whether a hook handler is one that takeback installed."""
    if not isinstance(handler, dict):
        return False
    command = handler.get("command")
    return isinstance(command, str) and _OURS.search(command) is not None


def _matcher(group: dict[str, Any]) -> str | None:
    m = group.get("matcher")
    return m if isinstance(m, str) and m else None


def _say(event: str, matcher: str | None, command: str) -> str:
    return f"{event}{f' [{matcher}]' if matcher else ''}: {command}"


def merge_hooks(
    settings: dict[str, Any],
    command: str | None,
    specs: Sequence[tuple[str, str | None]] = HOOK_SPECS,
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Return settings with takeback's handlers in place, and what was added and removed.

    Claude Code's shape, through :func:`merge_handlers`: each event's group has its
    matcher and the handler ``{"type": "command", "command": command}``.

    Args:
        settings: the parsed settings file.
        command: the command to install; None takes takeback's handlers out.
        specs: the events to install and their matchers (:func:`hook_specs`).

    Raises:
        UsageError: ``hooks`` or one of its events has a shape Claude Code would refuse.

    """
    wanted: dict[str, tuple[str | None, dict[str, Any]]] = {}
    if command is not None:
        wanted = {e: (m, {"type": "command", "command": command}) for e, m in specs}
    return merge_handlers(settings, wanted, is_ours, removing=command is None)


def merge_handlers(
    settings: dict[str, Any],
    wanted: Mapping[str, tuple[str | None, dict[str, Any]]],
    ours: Callable[[object], bool],
    *,
    removing: bool = False,
    flat: bool = False,
    key: str = "command",
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Return a hooks file's object with takeback's handlers as wanted, and what changed.

    The one merge of every agent's hooks file. Every other key, group and handler is
    kept as it was. In each event wanted, one handler of takeback's is kept when it has
    the matcher wanted and every field of the handler wanted (a field a person added to
    it stays); any other of its handlers there (a stale command or matcher, a duplicate)
    is removed. Events not wanted are left alone, takeback's handlers in them included
    (a person may have added ``SessionEnd`` or ``PostToolUseFailure`` by hand), unless
    ``removing``, which takes takeback's handlers out of every event.

    Args:
        settings: the parsed file.
        wanted: event -> (its matcher, the handler takeback installs there).
        ours: whether a handler is one that takeback installed.
        removing: take takeback's handlers out (``wanted`` empty).
        flat: the handlers sit in the event's list, each with its own ``matcher``
            (Cursor, Copilot CLI); else in groups under a matcher (Claude Code, Codex,
            Gemini CLI).
        key: the handler's field that holds its command (``bash`` for Copilot CLI).

    Raises:
        UsageError: ``hooks`` or one of its events has a shape the agent would refuse.

    """
    import copy

    data = copy.deepcopy(settings)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError("the settings' 'hooks' is not an object; fix it by hand first")
    added: list[str] = []
    removed: list[str] = []
    for event in [*hooks, *(e for e in wanted if e not in hooks)]:
        if not removing and event not in wanted:
            continue
        entries = hooks.get(event, [])
        if not isinstance(entries, list):
            raise UsageError(f"the settings' hooks.{event} is not a list; fix it by hand first")
        want = wanted.get(event)
        kept = False

        def right(matcher: str | None, h: dict[str, Any], want: Any = want) -> bool:
            return (
                want is not None
                and matcher == want[0]
                and all(h.get(k) == v for k, v in want[1].items())
            )

        out: list[Any] = []
        for entry in entries:
            handlers = entry.get("hooks") if isinstance(entry, dict) and not flat else [entry]
            if not isinstance(entry, dict) or not isinstance(handlers, list):
                out.append(entry)
                continue
            if not any(ours(h) for h in handlers):
                out.append(entry)
                continue
            matcher = _matcher(entry)
            left = []
            for h in handlers:
                if not ours(h):
                    left.append(h)
                elif not kept and right(matcher, h):
                    kept = True
                    left.append(h)
                else:
                    removed.append(_say(event, matcher, str(h.get(key))))
            if left and not flat:
                out.append({**entry, "hooks": left})
            elif left:
                out.extend(left)
        if want is not None and not kept:
            matcher, handler = want
            if flat:
                out.append({**handler, **({"matcher": matcher} if matcher else {})})
            else:
                out.append({**({"matcher": matcher} if matcher else {}), "hooks": [handler]})
            added.append(_say(event, matcher, str(handler[key])))
        if out or (event in hooks and not entries):
            hooks[event] = out
        else:
            hooks.pop(event, None)
    if hooks or ("hooks" in settings and not settings["hooks"]):
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    return data, added, removed


def load_settings(path: str) -> dict[str, Any]:
    """Return a settings file's object ({} when the file does not exist or is empty).

    Raises:
        UsageError: the file is not a JSON object (it is left as it is).

    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e}); nothing was changed") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} does not hold a JSON object; nothing was changed")
    return doc


def _write_settings(path: str, data: dict[str, Any]) -> None:
    """Write a settings file atomically; a symlink is written through, never replaced.

    People keep settings in a dotfiles repository and link them in: the link's target
    gets the new content (by a temporary file renamed next to the target), and the link
    stays a link. The file keeps its permission bits; a new one is made 0644.
    """
    path = os.path.realpath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    atomic_write(path, text.encode("utf-8"), mode=0o644, keep_mode=True)


#: a merge of takeback's handlers into a settings object: the new object, and what was
#: added and removed (one line each)
Merge = Callable[[dict[str, Any]], tuple[dict[str, Any], list[str], list[str]]]


def rewrite(
    path: str,
    merge: Merge,
    *,
    removing: bool = False,
    drop_if: Callable[[dict[str, Any]], bool] | None = None,
) -> SettingsChange:
    """Merge takeback's handlers into a settings file or out of it; write only a change.

    The one writer of every agent's hooks file. Installing makes a missing file;
    removing leaves a missing file missing, and deletes a file ``drop_if`` says held
    nothing but takeback's.

    Raises:
        UsageError: the file exists and does not hold a JSON object.
        OSError: it cannot be written.

    """
    existed = os.path.exists(path)
    if removing and not existed:
        return SettingsChange(path)
    data, added, removed = merge(load_settings(path))
    change = SettingsChange(path, added, removed, created=not existed)
    if not change.changed:
        change.created = False
    elif drop_if is not None and drop_if(data):
        os.unlink(os.path.realpath(path))
    else:
        _write_settings(path, data)
    return change


def install(
    path: str, command: str, specs: Sequence[tuple[str, str | None]] = HOOK_SPECS
) -> SettingsChange:
    """Put takeback's hooks into a settings file (made if missing).

    Args:
        path: the settings file.
        command: the command the hooks run.
        specs: the events to install and their matchers (:func:`hook_specs`).

    Raises:
        UsageError: the file exists and is not a settings object.
        OSError: it cannot be written.

    """
    return rewrite(path, lambda doc: merge_hooks(doc, command, specs))


def uninstall(path: str) -> SettingsChange:
    """Take takeback's hooks out of a settings file, and nothing else.

    Raises:
        UsageError: the file exists and is not a settings object.
        OSError: it cannot be written.

    """
    return rewrite(path, lambda doc: merge_hooks(doc, None), removing=True)
