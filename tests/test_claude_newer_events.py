"""Claude Code's newer hook events: ``PostToolBatch``, and ``SessionStart`` of a fork.

Payloads as Claude Code 2.1.332 sends them (seen in a real run), sent through the commands
that ``takeback hooks install claude-code`` wrote, by the Claude player of
``test_hooks.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import CLI
from .test_hooks import Claude, _fake_claude, _ours

CMD = "takeback hook claude-code"


@pytest.fixture(autouse=True)
def _no_claude_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CLAUDE_PROJECT_DIR", "CLAUDE_CONFIG_DIR", "TAKEBACK_HOOK_DEBUG"):
        monkeypatch.delenv(var, raising=False)


FORK = "f0f0f0f0-0000-4000-8000-000000000001"


def _install(tb: CLI, tmp_path: Path, version: str) -> str:
    return tb("hooks", "install", "claude-code", env=_fake_claude(tmp_path, version)).stdout


@pytest.mark.quick
def test_post_tool_batch_is_installed_only_where_claude_code_is_seen_to_send_it(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    settings = ws_dir / ".claude" / "settings.json"
    tb("hooks", "install", "claude-code", "--command", CMD, env=_fake_claude(tmp_path, "2.1.90"))
    assert "PostToolBatch" not in json.loads(settings.read_text())["hooks"]
    out = tb(
        "hooks", "install", "claude-code", "--command", CMD, env=_fake_claude(tmp_path, "2.1.332")
    ).stdout
    assert f"  + PostToolBatch: {CMD}" in out
    assert ("PostToolBatch", None, CMD) in _ours(json.loads(settings.read_text()))


def test_a_denied_command_step_ends_with_its_batch_not_at_stop(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    (ws_dir / "notes.txt").write_text("notes\n")
    _install(tb, tmp_path, "2.1.332")
    claude = Claude(ws_dir, store_dir, ws_dir / ".claude" / "settings.json")
    claude.send("UserPromptSubmit", prompt="Clean up.", prompt_id="p1")
    bash = {
        "tool_name": "Bash",
        "tool_use_id": "toolu_denied",
        "tool_input": {"command": "rm a.txt"},
    }
    claude.send("PreToolUse", **bash)  # the person denies it: no PostToolUse, no failure
    claude.send("PostToolBatch", tool_calls=[{**bash, "tool_response": "denied"}])
    (ws_dir / "notes.txt").write_text("notes, edited while the agent answers\n")
    claude.send("Stop", stop_hook_active=False, last_assistant_message="I did not remove it.")
    changes = json.loads(tb("changes", "--json").stdout)
    assert changes["changes"] == []  # the person's edit is not the agent's


def test_a_forked_conversation_starts_its_own_session_where_it_was_forked(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    (ws_dir / "app.py").write_text("VALUE = 1\n")
    _install(tb, tmp_path, "2.1.332")
    claude = Claude(ws_dir, store_dir, ws_dir / ".claude" / "settings.json")
    claude.send("SessionStart", source="startup")
    claude.send("UserPromptSubmit", prompt="Bump it.")
    claude.tool(
        "Write",
        {"file_path": str(ws_dir / "app.py"), "content": "VALUE = 2\n"},
        lambda: (ws_dir / "app.py").write_text("VALUE = 2\n"),
    )
    claude.send("Stop", stop_hook_active=False)

    # claude --resume SESSION --fork-session: a new session id, source "fork".
    claude.send("SessionStart", session_id=FORK, source="fork", seconds_since_last_response=4)
    (ws_dir / "app.py").write_text("VALUE = 3  # a person's edit\n")
    claude.send("UserPromptSubmit", session_id=FORK, prompt="Now something else.")
    claude.send("Stop", session_id=FORK, stop_hook_active=False)

    tb("rewind", "--to", "start", "--session", FORK)
    assert (ws_dir / "app.py").read_text() == "VALUE = 2\n"  # as it was when forked
