"""Claude Code hooks: the settings merge, and the real ``takeback hook claude-code``.

A whole session is fed through the commands that ``takeback hooks install`` wrote into
the settings file (run by a shell, as Claude Code runs them), with payloads of the shape
Claude Code sends; then undo, redo and rewind must give the exact states. Broken
payloads must exit 0 with nothing on stdout and nothing written to the workspace.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import CLI, SRC, state

SESSION = "8f1c2a4e-3b7d-4c1e-9a0f-2d6b5e7c9a11"

FORMATTER = """\
import pathlib, sys
root = pathlib.Path(sys.argv[1])
for p in sorted(root.rglob("*.py")):
    if p.name == "fmt.py":
        continue
    text = "\\n".join(line.rstrip() for line in p.read_text().splitlines()) + "\\n"
    p.write_text(text)
out = root / "build" / "fmt.log"
out.parent.mkdir(exist_ok=True)
out.write_text("formatted\\n")
"""


@pytest.fixture(autouse=True)
def _no_claude_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CLAUDE_PROJECT_DIR", "CLAUDE_CONFIG_DIR", "TAKEBACK_HOOK_DEBUG"):
        monkeypatch.delenv(var, raising=False)


class Claude:
    """Plays Claude Code: sends each event to the hooks that the settings file names."""

    def __init__(self, root: Path, store: Path, settings: Path) -> None:
        self.root = root
        self.store = store
        self.hooks: dict[str, list[dict[str, Any]]] = json.loads(settings.read_text())["hooks"]
        self.calls = 0
        self.n = 0

    def _matching(self, event: str, tool: str | None) -> list[str]:
        out = []
        for group in self.hooks.get(event, []):
            matcher = group.get("matcher")
            if matcher and tool is not None and tool not in matcher.split("|"):
                continue
            out += [h["command"] for h in group["hooks"] if h["type"] == "command"]
        return out

    def send(self, event: str, **fields: Any) -> None:
        payload = {
            "session_id": SESSION,
            "transcript_path": f"/home/u/.claude/projects/x/{SESSION}.jsonl",
            "cwd": str(self.root),
            "permission_mode": "acceptEdits",
            "hook_event_name": event,
            **fields,
        }
        env = dict(
            os.environ,
            CLAUDE_PROJECT_DIR=str(self.root),
            TAKEBACK_STORE=str(self.store),
            PYTHONPATH=SRC,
        )
        for command in self._matching(event, fields.get("tool_name")):
            proc = subprocess.run(
                ["sh", "-c", command],
                input=json.dumps(payload),
                text=True,
                capture_output=True,
                cwd=self.root,
                env=env,
                timeout=60,
            )
            self.calls += 1
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout == "", proc.stdout
            assert proc.stderr == "", proc.stderr

    def tool(self, name: str, tool_input: dict[str, Any], act: Any) -> None:
        """A tool call: PreToolUse, the tool's own effect, PostToolUse."""
        self.n += 1
        tid = f"toolu_01{self.n:06d}"
        self.send("PreToolUse", tool_name=name, tool_use_id=tid, tool_input=tool_input)
        act()
        self.send(
            "PostToolUse",
            tool_name=name,
            tool_use_id=tid,
            tool_input=tool_input,
            tool_response={"filePath": tool_input.get("file_path")},
        )


def test_a_whole_session_through_the_installed_hooks(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "app.py").write_text("def foo():  \n    return 1\n")
    (ws_dir / "README.md").write_text("# app\n")
    (ws_dir / "fmt.py").write_text(FORMATTER)
    out = tb("hooks", "install", "claude-code", "--project", env={"PATH": "/usr/bin:/bin"}).stdout
    assert "Created" in out and "+ PreToolUse [" in out
    claude = Claude(ws_dir, store_dir, ws_dir / ".claude" / "settings.json")
    s0 = state(ws_dir)

    # Turn 1: write a new file in a new folder, edit one, run a formatter over both.
    claude.send("UserPromptSubmit", prompt="Rename foo to bar and add a test.")
    test_py = ws_dir / "tests" / "test_app.py"

    def write_test() -> None:
        test_py.parent.mkdir()
        test_py.write_text("from app import bar   \n\ndef test_bar():\n    assert bar() == 1\n")

    claude.tool("Write", {"file_path": str(test_py), "content": "..."}, write_test)
    claude.tool(
        "Edit",
        {"file_path": str(ws_dir / "app.py"), "old_string": "foo", "new_string": "bar"},
        lambda: (ws_dir / "app.py").write_text("def bar():  \n    return 1\n"),
    )
    s_before_bash = state(ws_dir)
    claude.tool(
        "Bash",
        {"command": "python fmt.py .", "description": "Format"},
        lambda: subprocess.run([sys.executable, "fmt.py", str(ws_dir)], check=True, cwd=ws_dir),
    )
    claude.send("Stop", stop_hook_active=False)
    s1 = state(ws_dir)
    assert s1["app.py"][1] == b"def bar():\n    return 1\n"

    # Turn 2: a MultiEdit and a new notebook.
    claude.send("UserPromptSubmit", prompt="Return 2, and add a notebook.")
    claude.tool(
        "MultiEdit",
        {"file_path": str(ws_dir / "app.py"), "edits": [{"old_string": "1", "new_string": "2"}]},
        lambda: (ws_dir / "app.py").write_text("def bar():\n    return 2\n"),
    )
    claude.tool(
        "NotebookEdit",
        {
            "notebook_path": str(ws_dir / "nb.ipynb"),
            "new_source": "print(1)",
            "edit_mode": "insert",
        },
        lambda: (ws_dir / "nb.ipynb").write_text('{"cells": []}\n'),
    )
    claude.send("Stop", stop_hook_active=False)
    s2 = state(ws_dir)
    assert claude.calls == 10  # PostToolUse of a file tool matches no handler of ours

    assert not (store_dir / "hook.log").exists()
    changes = json.loads(tb("changes", "--turn", "1", "--session", SESSION, "--json").stdout)
    assert {c["path"]: c["status"] for c in changes["changes"]} == {
        "app.py": "modified",
        "tests/test_app.py": "created",
        "build/fmt.log": "created",
        "build": "created",
    }  # the folder the formatter made is a change too
    changes = json.loads(tb("changes", "--session", SESSION, "--json").stdout)
    assert {c["path"]: c["status"] for c in changes["changes"]} == {
        "app.py": "modified",
        "nb.ipynb": "created",
    }

    undo = json.loads(tb("undo", "--session", SESSION, "--json").stdout)
    assert undo["turns"] == [2] and state(ws_dir) == s1
    assert f"Undid turn 1 of session {SESSION!r}." in tb("undo", "--session", SESSION).stdout
    assert state(ws_dir) == s0
    tb("redo", "--session", SESSION)
    assert state(ws_dir) == s1

    tb("rewind", "--to", "1", "--session", SESSION)  # before the Bash step
    assert state(ws_dir) == s_before_bash
    tb("rewind", "--to", "turn:2", "--session", SESSION)
    assert state(ws_dir) == s1
    tb("rewind", "--to", "start", "--session", SESSION)
    assert state(ws_dir) == s0
    tb("rewind", "--to", undo["pre"], "--session", SESSION)  # taken just before the undo
    assert state(ws_dir) == s2


def test_bash_steps_end_at_stop_or_post_tool_use_failure(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    base = {"session_id": "s", "cwd": str(ws_dir)}

    def hook(**p: Any) -> None:
        proc = tb("hook", "claude-code", input=json.dumps({**base, **p}).encode())
        assert proc.stdout == "" and proc.stderr == ""

    hook(hook_event_name="UserPromptSubmit", prompt="go")
    hook(
        hook_event_name="PreToolUse",
        tool_name="Bash",
        tool_use_id="t1",
        tool_input={"command": "sed -i s/a/b/ a.txt"},
    )
    (ws_dir / "a.txt").write_text("b\n")  # the command failed after writing: no PostToolUse
    hook(
        hook_event_name="PreToolUse",
        tool_name="Bash",
        tool_use_id="t2",
        tool_input={"command": "false"},
    )
    (ws_dir / "b.txt").write_text("b\n")
    hook(
        hook_event_name="PostToolUseFailure",
        tool_name="Bash",
        tool_use_id="t2",
        tool_input={"command": "false"},
        error="exit 1",
    )
    hook(hook_event_name="Stop")
    changes = json.loads(tb("changes", "--session", "s", "--json").stdout)["changes"]
    assert [(c["path"], c["status"]) for c in changes] == [
        ("a.txt", "modified"),
        ("b.txt", "created"),
    ]
    # t1's end was never seen (t2's was: PostToolUseFailure): a.txt is unconfirmed, a
    # conflict unless --force (SPEC, "Take-backs do what they showed").
    assert [c["unconfirmed"] for c in changes] == [True, False]
    tb("undo", "--session", "s", check=3)
    tb("undo", "--session", "s", "--force")
    assert (ws_dir / "a.txt").read_text() == "a\n" and not (ws_dir / "b.txt").exists()
    steps = [
        s
        for s in json.loads(tb("log", "--session", "s", "--json").stdout)
        if s["kind"] == "step-after"
    ]
    assert sorted(s["step"] for s in steps) == [1, 2]


BROKEN: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("not json", b"{this is not json"),
    ("not utf-8", b"\xff\xfe\x00{"),
    ("not an object", b"[1, 2]"),
    ("no event", json.dumps({"session_id": "s", "cwd": "{ws}"}).encode()),
    (
        "no session",
        json.dumps({"hook_event_name": "UserPromptSubmit", "cwd": "{ws}", "prompt": "x"}).encode(),
    ),
    (
        "session not a string",
        json.dumps({"hook_event_name": "Stop", "session_id": 7, "cwd": "{ws}"}).encode(),
    ),
    (
        "no file path",
        json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "session_id": "s",
                "cwd": "{ws}",
                "tool_name": "Write",
                "tool_input": {"content": "x"},
            }
        ).encode(),
    ),
    (
        "tool_input not an object",
        json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "session_id": "s",
                "cwd": "{ws}",
                "tool_name": "Edit",
                "tool_input": "a.txt",
            }
        ).encode(),
    ),
    (
        "path outside the root",
        json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "session_id": "s",
                "cwd": "{ws}",
                "tool_name": "Write",
                "tool_use_id": "t",
                "tool_input": {"file_path": "{outside}"},
            }
        ).encode(),
    ),
    (
        "dot-dot out of the root",
        json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "session_id": "s",
                "cwd": "{ws}",
                "tool_name": "Edit",
                "tool_input": {"file_path": "../outside.txt"},
            }
        ).encode(),
    ),
    (
        "cwd that does not exist",
        json.dumps(
            {
                "hook_event_name": "UserPromptSubmit",
                "session_id": "s",
                "cwd": "/nonexistent/x",
                "prompt": "x",
            }
        ).encode(),
    ),
]

IGNORED: list[tuple[str, bytes]] = [
    (
        "unknown event",
        json.dumps({"hook_event_name": "TeammateIdle", "session_id": "s", "cwd": "{ws}"}).encode(),
    ),
    (
        "unknown tool",
        json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "session_id": "s",
                "cwd": "{ws}",
                "tool_name": "Read",
                "tool_input": {"file_path": "{ws}/a.txt"},
            }
        ).encode(),
    ),
    (
        "post without pre",
        json.dumps(
            {
                "hook_event_name": "PostToolUse",
                "session_id": "s",
                "cwd": "{ws}",
                "tool_name": "Bash",
                "tool_use_id": "nope",
            }
        ).encode(),
    ),
]


def _fill(raw: bytes, ws: Path, outside: Path) -> bytes:
    return raw.replace(b"{ws}", str(ws).encode()).replace(b"{outside}", str(outside).encode())


def _run_broken(tb: CLI, ws_dir: Path, tmp_path: Path, raw: bytes) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    before = state(ws_dir)
    # Bytes as they come (the CLI fixture sends text, and one payload is not UTF-8).
    env = dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)
    proc = subprocess.run(
        [sys.executable, "-m", "takeback", "hook", "claude-code"],
        input=_fill(raw, ws_dir, outside),
        capture_output=True,
        cwd=ws_dir,
        env=env,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert state(ws_dir) == before
    assert outside.read_text() == "outside\n"


@pytest.mark.quick
@pytest.mark.parametrize("raw", [r for _n, r in BROKEN], ids=[n for n, _r in BROKEN])
def test_broken_payloads_exit_0_and_are_logged(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path, raw: bytes
) -> None:
    _run_broken(tb, ws_dir, tmp_path, raw)
    log = (store_dir / "hook.log").read_text()
    assert re.search(r"claude-code .*(UsageError|PathError|ScanError)", log), log
    assert stat.S_IMODE((store_dir / "hook.log").stat().st_mode) == 0o600


@pytest.mark.parametrize("raw", [r for _n, r in IGNORED], ids=[n for n, _r in IGNORED])
def test_events_takeback_does_not_use_are_ignored(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path, raw: bytes
) -> None:
    _run_broken(tb, ws_dir, tmp_path, raw)
    assert not (store_dir / "hook.log").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["hook", "claude-code", "--bogus"],
        ["hook"],
        ["hook", "no-such-agent"],
        ["hook", "claude-code", "extra"],
        ["--max-file-bytes", "lots", "hook", "claude-code"],
        ["--root", str(Path("/nonexistent/root")), "hook", "claude-code"],
    ],
)
def test_bad_arguments_exit_0_silently(
    tb: CLI, ws_dir: Path, store_dir: Path, args: list[str]
) -> None:
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "s",
        "cwd": str(ws_dir),
        "prompt": "x",
    }
    proc = tb(*args, input=json.dumps(payload).encode())
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert (store_dir / "hook.log").exists()
    assert list(ws_dir.iterdir()) == []


def test_an_unusable_store_still_exits_0(tb: CLI, ws_dir: Path, tmp_path: Path) -> None:
    not_a_folder = tmp_path / "store-is-a-file"
    not_a_folder.write_text("x")
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "s",
        "cwd": str(ws_dir),
        "prompt": "x",
    }
    proc = tb(
        "hook",
        "claude-code",
        input=json.dumps(payload).encode(),
        env={"TAKEBACK_STORE": str(not_a_folder)},
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert not_a_folder.read_text() == "x"


def test_global_options_before_the_command_and_project_dir(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    sub = ws_dir / "sub"
    sub.mkdir()
    other_store = tmp_path / "other-store"
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "s",
        "cwd": str(sub),
        "prompt": "x",
    }
    proc = tb(
        "--store",
        str(other_store),
        "hook",
        "claude-code",
        input=json.dumps(payload).encode(),
        env={"CLAUDE_PROJECT_DIR": str(ws_dir), "TAKEBACK_HOOK_DEBUG": "1"},
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert "UserPromptSubmit session=s: ok in" in (other_store / "hook.log").read_text()
    log = json.loads(tb("log", "--all", "--json", "--store", str(other_store)).stdout)
    assert {s["session"] for s in log} == {"s"}


def test_help_goes_through_the_parser(tb: CLI) -> None:
    assert "claude-code" in tb("hook", "--help").stdout


# -- hooks install / uninstall ---------------------------------------------------------

USER_SETTINGS = {
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo mine"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "say hi"}]}],
    },
    "model": "opus",
}


def _ours(settings: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    return [
        (event, group.get("matcher"), h["command"])
        for event, groups in settings.get("hooks", {}).items()
        for group in groups
        for h in group["hooks"]
        if "hook claude-code" in h["command"]
    ]


@pytest.mark.quick
def test_install_merges_and_uninstall_removes_exactly_its_own(tb: CLI, ws_dir: Path) -> None:
    path = ws_dir / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(USER_SETTINGS, indent=4))
    cmd = "takeback hook claude-code"
    out = tb("hooks", "install", "claude-code", "--command", cmd).stdout
    assert out.startswith(f"Updated {path}:")
    assert f"  + PreToolUse [Write|Edit|MultiEdit|NotebookEdit|Bash]: {cmd}" in out
    assert f"  + PostToolUse [Bash]: {cmd}" in out
    assert f"  + UserPromptSubmit: {cmd}" in out and f"  + Stop: {cmd}" in out
    assert f"  + SessionStart: {cmd}" in out
    merged = json.loads(path.read_text())
    assert merged["permissions"] == USER_SETTINGS["permissions"] and merged["model"] == "opus"
    assert sorted(_ours(merged)) == sorted(
        [
            ("PostToolUse", "Bash", cmd),
            ("PreToolUse", "Write|Edit|MultiEdit|NotebookEdit|Bash", cmd),
            ("SessionStart", None, cmd),
            ("Stop", None, cmd),
            ("UserPromptSubmit", None, cmd),
        ]
    )
    before: dict[str, Any] = USER_SETTINGS
    assert merged["hooks"]["PreToolUse"][0] == before["hooks"]["PreToolUse"][0]
    assert merged["hooks"]["Stop"][0] == before["hooks"]["Stop"][0]

    text = path.read_text()
    again = tb("hooks", "install", "claude-code", "--command", cmd).stdout
    assert "nothing changed" in again and path.read_text() == text

    out = tb("hooks", "uninstall", "claude-code").stdout
    assert out.count("  - ") == 5  # one per event installed
    assert json.loads(path.read_text()) == USER_SETTINGS
    assert "nothing changed" in tb("hooks", "uninstall", "claude-code").stdout


def test_install_replaces_a_stale_command_and_duplicates(tb: CLI, ws_dir: Path) -> None:
    path = ws_dir / ".claude" / "settings.json"
    path.parent.mkdir()
    old = "/old/venv/bin/takeback hook claude-code"
    path.write_text(
        json.dumps(
            {
                "hooks": {
                    "Stop": [
                        {
                            "hooks": [
                                {"type": "command", "command": old},
                                {"type": "command", "command": "echo keep"},
                            ]
                        },
                        {"hooks": [{"type": "command", "command": old}]},
                    ],
                }
            }
        )
    )
    cmd = f"{sys.executable} -m takeback hook claude-code"
    doc = json.loads(tb("hooks", "install", "claude-code", "--json", "--command", cmd).stdout)
    assert doc["changed"] and doc["removed"] == [f"Stop: {old}", f"Stop: {old}"]
    assert len(doc["added"]) == 5
    settings = json.loads(path.read_text())
    assert settings["hooks"]["Stop"] == [
        {"hooks": [{"type": "command", "command": "echo keep"}]},
        {"hooks": [{"type": "command", "command": cmd}]},
    ]
    assert len(_ours(settings)) == 5


def test_install_for_the_user_writes_under_home(tb: CLI, ws_dir: Path, tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    assert home.is_relative_to(tmp_path)
    doc = json.loads(tb("hooks", "install", "claude-code", "--user", "--json").stdout)
    path = home / ".claude" / "settings.json"
    assert doc["settings"] == str(path) and doc["created"] and path.exists()
    assert len(_ours(json.loads(path.read_text()))) == 5
    assert not (ws_dir / ".claude").exists()
    tb("hooks", "uninstall", "claude-code", "--user")
    assert json.loads(path.read_text()) == {}
    config = tmp_path / "claude-config"
    tb("hooks", "install", "claude-code", "--user", env={"CLAUDE_CONFIG_DIR": str(config)})
    assert len(_ours(json.loads((config / "settings.json").read_text()))) == 5


def test_install_refuses_a_broken_settings_file(tb: CLI, ws_dir: Path) -> None:
    path = ws_dir / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{ not json")
    proc = tb("hooks", "install", "claude-code", check=2)
    assert "not valid JSON" in proc.stderr and proc.stdout == ""
    assert path.read_text() == "{ not json"


def test_default_command_without_takeback_on_path(tb: CLI, ws_dir: Path) -> None:
    out = tb("hooks", "install", "claude-code", "--local", env={"PATH": "/usr/bin:/bin"}).stdout
    assert "takeback is not on PATH" in out
    settings = json.loads((ws_dir / ".claude" / "settings.local.json").read_text())
    assert {c for _e, _m, c in _ours(settings)} == {
        f"{sys.executable} -m takeback hook claude-code"
    }


def test_a_symlinked_settings_file_is_written_through_and_stays_a_link(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    # The user's settings kept in a dotfiles repository, linked into ~/.claude.
    home = Path(os.environ["HOME"])
    target = tmp_path / "dotfiles" / "claude" / "settings.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(USER_SETTINGS, indent=4))
    target.chmod(0o640)
    link = home / ".claude" / "settings.json"
    link.parent.mkdir()
    rel_target = os.path.relpath(target, link.parent)
    link.symlink_to(rel_target)

    out = tb("hooks", "install", "claude-code", "--user").stdout
    assert out.startswith(f"Updated {link}:")
    assert link.is_symlink() and os.readlink(link) == rel_target
    assert len(_ours(json.loads(target.read_text()))) == 5
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["settings.json"]
    assert sorted(p.name for p in link.parent.iterdir()) == ["settings.json"]

    tb("hooks", "uninstall", "claude-code", "--user")
    assert link.is_symlink() and os.readlink(link) == rel_target
    assert json.loads(target.read_text()) == USER_SETTINGS

    # A link whose target does not exist yet: the target is made, the link kept.
    target.unlink()
    tb("hooks", "install", "claude-code", "--user")
    assert link.is_symlink() and len(_ours(json.loads(target.read_text()))) == 5


# -- faults seen in real agent traffic -------------------------------------------------


def _hook(tb: CLI, ws_dir: Path, env: dict[str, str] | None = None, **p: Any) -> None:
    payload = {"session_id": "s", "cwd": str(ws_dir), **p}
    proc = tb("hook", "claude-code", input=json.dumps(payload).encode(), env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_a_failed_bash_step_closes_at_the_next_hook_call_not_at_stop(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    (ws_dir / "mine.txt").write_text("mine\n")
    _hook(tb, ws_dir, hook_event_name="UserPromptSubmit", prompt="go")
    _hook(
        tb,
        ws_dir,
        hook_event_name="PreToolUse",
        tool_name="Bash",
        tool_use_id="t1",
        tool_input={"command": "sed -i s/a/b/ a.txt && false"},
    )
    (ws_dir / "a.txt").write_text("b\n")  # the command wrote, then failed: no PostToolUse
    _hook(
        tb,
        ws_dir,
        hook_event_name="PreToolUse",
        tool_name="Edit",
        tool_use_id="t2",
        tool_input={"file_path": str(ws_dir / "a.txt")},
    )
    (ws_dir / "a.txt").write_text("c\n")
    (ws_dir / "mine.txt").write_text("a person's edit\n")  # not the agent's
    _hook(tb, ws_dir, hook_event_name="Stop")
    assert not (store_dir / "hook.log").exists()
    changes = json.loads(tb("changes", "--session", "s", "--json").stdout)["changes"]
    assert [(c["path"], c["status"]) for c in changes] == [("a.txt", "modified")]
    # The failed call's end was never seen: a.txt is unconfirmed (SPEC, "Take-backs do
    # what they showed"), a conflict that --force writes over.
    assert changes[0]["unconfirmed"]
    tb("undo", "--session", "s", check=3)
    assert (ws_dir / "a.txt").read_text() == "c\n"
    tb("undo", "--session", "s", "--force")
    assert (ws_dir / "a.txt").read_text() == "a\n"
    assert (ws_dir / "mine.txt").read_text() == "a person's edit\n"


def test_a_tilde_path_is_read_as_the_agent_reads_it(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    notes = ws_dir / "notes.md"
    notes.write_text("old\n")
    env = {"HOME": str(tmp_path)}  # the workspace is ~/ws
    _hook(tb, ws_dir, env, hook_event_name="UserPromptSubmit", prompt="go")
    _hook(
        tb,
        ws_dir,
        env,
        hook_event_name="PreToolUse",
        tool_name="Write",
        tool_use_id="t1",
        tool_input={"file_path": "~/ws/notes.md", "content": "new\n"},
    )
    notes.write_text("new\n")
    _hook(tb, ws_dir, env, hook_event_name="Stop")
    assert not (store_dir / "hook.log").exists()
    assert not (ws_dir / "~").exists()
    changes = json.loads(tb("changes", "--session", "s", "--json").stdout)["changes"]
    assert [(c["path"], c["status"]) for c in changes] == [("notes.md", "modified")]
    tb("undo", "--session", "s")
    assert notes.read_text() == "old\n"


def test_reinstall_keeps_handlers_a_person_added(tb: CLI, ws_dir: Path) -> None:
    path = ws_dir / ".claude" / "settings.json"
    cmd = "takeback hook claude-code"
    tb("hooks", "install", "claude-code", "--command", cmd)
    settings = json.loads(path.read_text())
    # As the README invites: the failure and session-end handlers, added by hand.
    settings["hooks"]["SessionEnd"] = [{"hooks": [{"type": "command", "command": cmd}]}]
    settings["hooks"]["PostToolUseFailure"] = [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": cmd}]}
    ]
    path.write_text(json.dumps(settings, indent=2) + "\n")
    text = path.read_text()
    out = tb("hooks", "install", "claude-code", "--command", cmd, env={"PATH": "/usr/bin:/bin"})
    assert "nothing changed" in out.stdout and path.read_text() == text
    # uninstall still takes out every handler of takeback's, wherever it is
    tb("hooks", "uninstall", "claude-code")
    assert _ours(json.loads(path.read_text())) == []


def _fake_claude(tmp_path: Path, version: str) -> dict[str, str]:
    bin_dir = tmp_path / f"bin-{version.split()[0]}"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text(f"#!/bin/sh\necho '{version}'\n")
    claude.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_install_adds_the_failure_handler_only_where_claude_code_knows_it(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    path = ws_dir / ".claude" / "settings.json"
    cmd = "takeback hook claude-code"
    # No claude on PATH: the four events every release knows.
    doc = json.loads(
        tb(
            "hooks",
            "install",
            "claude-code",
            "--json",
            "--command",
            cmd,
            env={"PATH": "/usr/bin:/bin"},
        ).stdout
    )
    assert doc["claude_code"] is None
    assert "PostToolUseFailure" not in json.loads(path.read_text())["hooks"]
    # An old release: still not.
    old = _fake_claude(tmp_path, "1.0.80 (Claude Code)")
    out = tb("hooks", "install", "claude-code", "--command", cmd, env=old).stdout
    assert "nothing changed" in out
    assert "PostToolUseFailure" not in json.loads(path.read_text())["hooks"]
    # A release that knows the event: its handler is added, once.
    new = _fake_claude(tmp_path, "2.1.90 (Claude Code)")
    out = tb("hooks", "install", "claude-code", "--command", cmd, env=new).stdout
    assert f"  + PostToolUseFailure [Bash]: {cmd}" in out
    assert ("PostToolUseFailure", "Bash", cmd) in _ours(json.loads(path.read_text()))
    text = path.read_text()
    assert (
        "nothing changed" in tb("hooks", "install", "claude-code", "--command", cmd, env=new).stdout
    )
    assert path.read_text() == text
    # Claude Code rolled back: the handler is kept (takeback cannot tell who added it).
    assert (
        "nothing changed" in tb("hooks", "install", "claude-code", "--command", cmd, env=old).stdout
    )
    assert path.read_text() == text


@pytest.mark.quick
def test_a_hook_call_run_here_ends_with_its_step_recorded_and_its_store_closed(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    """Without the service, a hook call ends its process as soon as it has recorded the
    step (no interpreter teardown): what it recorded is all there, and its databases were
    closed first (the last connection's close removes SQLite's write-ahead logs)."""
    (ws_dir / "a.txt").write_text("a\n")
    _hook(tb, ws_dir, hook_event_name="UserPromptSubmit", prompt="go")
    bash: dict[str, Any] = {
        "tool_name": "Bash",
        "tool_use_id": "t1",
        "tool_input": {"command": "make"},
    }
    _hook(tb, ws_dir, hook_event_name="PreToolUse", **bash)
    (ws_dir / "a.txt").write_text("made\n")
    _hook(tb, ws_dir, hook_event_name="PostToolUse", **bash)
    assert not list(store_dir.glob("*.db-wal")), sorted(p.name for p in store_dir.iterdir())
    _hook(tb, ws_dir, hook_event_name="Stop")
    changes = json.loads(tb("changes", "--session", "s", "--json").stdout)["changes"]
    assert [(c["path"], c["status"]) for c in changes] == [("a.txt", "modified")]
