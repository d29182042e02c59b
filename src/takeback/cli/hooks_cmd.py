"""CLI layer: ``takeback hooks install|uninstall AGENT [--project | --local | --user]``.

AGENT is ``claude-code`` (below) or ``codex``, ``gemini``, ``cursor``, ``copilot``, whose
files ``integrations._agent_settings`` writes (``--project`` or ``--user``).

Install merges takeback's handlers into Claude Code's settings file and prints what it
changed (``PostToolUseFailure`` too when ``claude --version`` says the release knows
it); uninstall takes out exactly takeback's handlers. Both leave every other key and
hook of the file as they were.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "put takeback's hooks into an agent's settings, or take them out"
CHECKS_JOURNAL = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    from ..integrations._agent_settings import AGENTS

    p.add_argument(
        "action", choices=["install", "uninstall"], help="add takeback's hooks, or remove them"
    )
    p.add_argument(
        "agent", choices=["claude-code", *AGENTS], help="the agent whose settings to change"
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--project",
        dest="scope",
        action="store_const",
        const="project",
        help="the project's file (.claude/settings.json, .codex/hooks.json, "
        ".gemini/settings.json, .cursor/hooks.json, .github/hooks/takeback.json; the default)",
    )
    scope.add_argument(
        "--local",
        dest="scope",
        action="store_const",
        const="local",
        help="the project's .claude/settings.local.json (not committed; claude-code only)",
    )
    scope.add_argument(
        "--user",
        dest="scope",
        action="store_const",
        const="user",
        help="your own file, under your home folder (every project)",
    )
    p.add_argument(
        "--command",
        default=None,
        metavar="CMD",
        help="the command the hooks run (default: 'takeback hook AGENT' "
        "when takeback is on PATH, else this Python with -m takeback)",
    )


def run(ctx: Ctx) -> int:
    """Install or uninstall, then say what changed."""
    from ..errors import UsageError

    scope = ctx.args.scope or "project"
    if scope != "user" and not os.path.isdir(ctx.root):
        raise UsageError(f"not a folder: {ctx.root}")
    root = os.path.realpath(ctx.root)
    agent = ctx.args.agent
    install = ctx.args.action == "install"
    if not install and ctx.args.command:
        raise UsageError("--command is for install only")
    done = _claude_code(ctx, scope, root) if agent == "claude-code" else _other(ctx, scope, root)
    path, change, version, notes = done
    if ctx.json:
        doc = {"action": ctx.args.action, "agent": agent, "scope": scope}
        ctx.emit_json({**doc, "claude_code": version, **change.to_json()})
        return 0
    if not change.changed:
        ctx.out(
            f"{path}: takeback's hooks are already in place; nothing changed."
            if install
            else f"{path}: no takeback hooks found; nothing changed."
        )
        return 0
    gone = not install and not os.path.exists(path)
    ctx.out(f"{'Removed' if gone else 'Created' if change.created else 'Updated'} {path}:")
    for line in change.removed:
        ctx.out(f"  - {line}")
    for line in change.added:
        ctx.out(f"  + {line}")
    if install:
        for note in notes:
            ctx.out(note)
    return 0


#: said after an install whose hooks run this Python, not ``takeback`` on PATH
_NOT_ON_PATH = (
    "note: takeback is not on PATH, so the hooks run this Python "
    "directly; use --command to choose another."
)


def _claude_code(ctx: Ctx, scope: str, root: str) -> tuple[str, Any, str | None, list[str]]:
    """Install or uninstall Claude Code's hooks: (path, change, its version, notes)."""
    from ..errors import UsageError
    from ..integrations.claude_code import _settings as cc

    path = cc.settings_path(scope, root, os.environ)
    if ctx.args.action != "install":
        return path, cc.uninstall(path), None, []
    command = ctx.args.command or cc.default_command(os.environ)
    if not cc.is_ours({"command": command}):
        raise UsageError(f"--command must run 'takeback hook claude-code': {command!r}")
    version = cc.claude_version(os.environ)
    change = cc.install(path, command, cc.hook_specs(version))
    notes = [] if command.startswith("takeback ") else [_NOT_ON_PATH]
    if cc.hook_specs(version) == cc.HOOK_SPECS:
        since = ".".join(map(str, cc.FAILURE_EVENT_SINCE))
        found = f"Claude Code {'.'.join(map(str, version))}" if version else "no claude"
        notes.append(
            f"note: {found} on PATH, so no PostToolUseFailure handler (Claude Code "
            f"{since} or later); a failed Bash call's step ends at the next hook call."
        )
    notes.append(
        "Claude Code reads hooks when a session starts: restart it, or review them with /hooks."
    )
    return path, change, ".".join(map(str, version)) if version else None, notes


def _other(ctx: Ctx, scope: str, root: str) -> tuple[str, Any, str | None, list[str]]:
    """Install or uninstall another agent's hooks: (path, change, None, notes)."""
    from ..errors import UsageError
    from ..integrations import _agent_settings as ag
    from ..integrations.claude_code import _settings as cc

    agent = ctx.args.agent
    path = ag.settings_path(agent, scope, root, os.environ)
    if ctx.args.action != "install":
        return path, ag.uninstall(agent, path), None, []
    command = ctx.args.command or cc.default_command(os.environ, agent)
    if not cc.ours_pattern(agent).search(command):
        raise UsageError(f"--command must run 'takeback hook {agent}': {command!r}")
    change = ag.install(agent, path, command)
    notes = [] if command.startswith("takeback ") else [_NOT_ON_PATH]
    return path, change, None, [*notes, ag.NOTES[agent]]
