"""Codex, Gemini CLI, Cursor and Copilot CLI hooks: installed, fed, and taken back.

Each agent is played here with payloads of its documented schema, sent to the commands
that ``takeback hooks install AGENT`` wrote into the agent's own file (run by a shell, as
the agents run them): a reply with a prompt, a new file, an edit, a shell command that
changes two files and the end of the reply, while a person edits another file. Then
``takeback undo`` must take back exactly that reply and leave the person's edit. The real
agents are driven in ``test_real_agents.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ._service import running_service
from ._ui import request, serve_ui
from .conftest import CLI, SRC, state

AGENTS = ("codex", "gemini", "cursor", "copilot")
FILES = {
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
    "copilot": ".github/hooks/takeback.json",
}
USER_FILES = {
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
    "copilot": ".copilot/hooks/takeback.json",
}
#: what each agent reads on stdout from a call (Cursor parses it as JSON every time)
ANSWER = {"codex": "", "gemini": "", "cursor": "{}\n", "copilot": ""}
SCRIPT = """\
import pathlib
pathlib.Path("app.py").write_text(pathlib.Path("app.py").read_text().replace("1", "2"))
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/log.txt").write_text("built\\n")
"""


@pytest.fixture(autouse=True)
def _no_agent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "CLAUDE_PROJECT_DIR",
        "GEMINI_PROJECT_DIR",
        "CURSOR_PROJECT_DIR",
        "CODEX_HOME",
        "COPILOT_HOME",
        "TAKEBACK_HOOK_DEBUG",
    ):
        monkeypatch.delenv(var, raising=False)


class Player:
    """Plays one agent: sends each of its events to the handlers its hooks file names."""

    def __init__(self, agent: str, root: Path, store: Path, session: str) -> None:
        self.agent = agent
        self.root = root
        self.store = store
        self.session = session
        self.config = json.loads((root / FILES[agent]).read_text())["hooks"]
        self.calls = 0
        self.n = 0

    def _commands(self, event: str, tool: str | None) -> list[str]:
        def matches(matcher: object) -> bool:
            if not matcher or tool is None:
                return True
            return re.fullmatch(str(matcher), tool) is not None

        out: list[str] = []
        for entry in self.config.get(event, []):
            if "hooks" in entry:  # nested: a group with a matcher
                if matches(entry.get("matcher")):
                    out += [h["command"] for h in entry["hooks"] if h.get("type") == "command"]
            elif matches(entry.get("matcher")):
                out.append(entry.get("bash") or entry["command"])
        return out

    def send(self, event: str, payload: dict[str, Any], tool: str | None = None) -> None:
        env = dict(os.environ, TAKEBACK_STORE=str(self.store), PYTHONPATH=SRC)
        if self.agent == "gemini":
            env["GEMINI_PROJECT_DIR"] = str(self.root)
        if self.agent == "cursor":
            env["CURSOR_PROJECT_DIR"] = str(self.root)
        for command in self._commands(event, tool):
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
            assert proc.stdout == ANSWER[self.agent], proc.stdout
            assert proc.stderr == "", proc.stderr

    # -- the agents' payloads ----------------------------------------------------------

    def _common(self, event: str) -> dict[str, Any]:
        if self.agent == "copilot":
            return {"sessionId": self.session, "timestamp": 1767225600000, "cwd": str(self.root)}
        if self.agent == "cursor":
            return {
                "conversation_id": self.session,
                "generation_id": f"gen-{self.n}",
                "model": "m",
                "hook_event_name": event,
                "cursor_version": "2.4.0",
                "workspace_roots": [str(self.root)],
                "user_email": None,
                "transcript_path": None,
            }
        doc = {
            "session_id": self.session,
            "transcript_path": None,
            "cwd": str(self.root),
            "hook_event_name": event,
        }
        if self.agent == "codex":
            doc.update(model="gpt-test", permission_mode="bypassPermissions", turn_id="t1")
        else:
            doc["timestamp"] = "2026-01-01T00:00:00Z"
        return doc

    def prompt(self, text: str) -> None:
        event = {
            "codex": "UserPromptSubmit",
            "gemini": "BeforeAgent",
            "cursor": "beforeSubmitPrompt",
            "copilot": "userPromptSubmitted",
        }[self.agent]
        self.send(event, {**self._common(event), "prompt": text})

    def stop(self) -> None:
        stops: dict[str, tuple[str, dict[str, Any]]] = {
            "codex": ("Stop", {"stop_hook_active": False, "last_assistant_message": "Done."}),
            "gemini": ("AfterAgent", {"prompt": "p", "prompt_response": "Done."}),
            "cursor": ("stop", {"status": "completed", "loop_count": 0}),
            "copilot": ("agentStop", {"stopReason": "end_turn"}),
        }
        event, extra = stops[self.agent]
        self.send(event, {**self._common(event), **extra})

    def tool(self, kind: str, target: str, act: Callable[[], object]) -> None:
        """A tool call (``write``, ``edit`` or ``shell``): its before-event, its effect, after."""
        self.n += 1
        call_id = f"call_{self.n:04d}"
        name, args = self._tool(kind, target)
        before, after = {
            "codex": ("PreToolUse", "PostToolUse"),
            "gemini": ("BeforeTool", "AfterTool"),
            "cursor": ("preToolUse", "postToolUse"),
            "copilot": ("preToolUse", "postToolUse"),
        }[self.agent]
        if self.agent == "copilot":
            pre = {**self._common(before), "toolName": name, "toolArgs": json.dumps(args)}
            post = {
                **pre,
                "toolResult": {"resultType": "success", "textResultForLlm": "ok"},
            }
        else:
            pre = {**self._common(before), "tool_name": name, "tool_input": args}
            if self.agent in ("codex", "cursor"):
                pre["tool_use_id"] = call_id
            post = {**pre, **self._common(after)}
            post["tool_response" if self.agent != "cursor" else "tool_output"] = (
                {"llmContent": "ok", "returnDisplay": "ok"} if self.agent == "gemini" else "ok"
            )
        self.send(before, pre, name)
        act()
        self.send(after, post, name)

    def _tool(self, kind: str, target: str) -> tuple[str, dict[str, Any]]:
        path = str(self.root / target)
        if self.agent == "codex":
            if kind == "shell":
                return "Bash", {"command": target}
            verb = "Add" if kind == "write" else "Update"
            return "apply_patch", {"command": f"*** Begin Patch\n*** {verb} File: {target}\n"}
        if self.agent == "gemini":
            if kind == "shell":
                return "run_shell_command", {"command": target, "description": "run"}
            if kind == "write":
                return "write_file", {"file_path": path, "content": "..."}
            return "replace", {"file_path": path, "old_string": "a", "new_string": "b"}
        if self.agent == "cursor":
            if kind == "shell":
                return "Shell", {"command": target}
            if kind == "write":
                return "Write", {"path": path, "contents": "..."}
            return "StrReplace", {"path": path, "old_string": "a", "new_string": "b"}
        if kind == "shell":
            return "bash", {"command": target, "description": "run"}
        if kind == "write":
            return "create", {"path": path, "file_text": "..."}
        return "edit", {"path": path, "old_str": "a", "new_str": "b"}


def _install(tb: CLI, agent: str) -> str:
    return tb("hooks", "install", agent, "--project", env={"PATH": "/usr/bin:/bin"}).stdout


def _reply(player: Player, root: Path, *, person: Callable[[], object] | None = None) -> None:
    """One reply: a new file, an edit, a command that changes two files; a person edits
    a file of their own while it runs."""
    player.prompt("Add a greeting, bump the number and build.")
    player.tool("write", "hello.py", lambda: (root / "hello.py").write_text("print('hi')\n"))
    if person is not None:
        person()
    player.tool(
        "edit",
        "app.py",
        lambda: (root / "app.py").write_text("VALUE = 1\nNAME = 'b'\n"),
    )
    player.tool(
        "shell",
        "python build.py",
        lambda: subprocess.run([sys.executable, "build.py"], check=True, cwd=root),
    )
    player.stop()


def _workspace(root: Path) -> None:
    (root / "app.py").write_text("VALUE = 1\nNAME = 'a'\n")
    (root / "build.py").write_text(SCRIPT)
    (root / "notes.txt").write_text("a person's notes\n")


@pytest.mark.parametrize("agent", AGENTS)
def test_a_reply_is_recorded_and_undone_exactly(
    tb: CLI, ws_dir: Path, store_dir: Path, agent: str
) -> None:
    _workspace(ws_dir)
    out = _install(tb, agent)
    assert "Created" in out, out
    s0 = state(ws_dir)
    session = f"{agent}-conv-1"
    player = Player(agent, ws_dir, store_dir, session)

    def person() -> None:
        (ws_dir / "notes.txt").write_text("a person's notes, edited meanwhile\n")

    _reply(player, ws_dir, person=person)
    assert (ws_dir / "out" / "log.txt").exists()
    assert not (store_dir / "hook.log").exists()

    changes = json.loads(tb("changes", "--json").stdout)
    assert changes["session"] == session
    assert {c["path"]: c["status"] for c in changes["changes"]} == {
        "hello.py": "created",
        "app.py": "modified",
        "out": "created",
        "out/log.txt": "created",
    }
    short = session[:8] if len(session) == 36 and session.count("-") == 4 else session
    assert any(
        f"{short} ({agent})" in line and "turn 1" in line for line in tb("log").stdout.splitlines()
    )
    out = tb("undo").stdout
    assert f"Undid turn 1 of session {session!r}." in out, out
    expected = {**s0, "notes.txt": state(ws_dir)["notes.txt"]}
    assert state(ws_dir) == expected
    assert (ws_dir / "notes.txt").read_text() == "a person's notes, edited meanwhile\n"


def test_two_agents_in_one_workspace_each_their_own_session(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    _workspace(ws_dir)
    _install(tb, "codex")
    _install(tb, "gemini")
    s0 = state(ws_dir)
    codex = Player("codex", ws_dir, store_dir, "codex-1")
    gemini = Player("gemini", ws_dir, store_dir, "gemini-1")
    _reply(codex, ws_dir)
    s1 = state(ws_dir)

    gemini.prompt("Add a second file.")
    gemini.tool("write", "second.py", lambda: (ws_dir / "second.py").write_text("x = 2\n"))
    gemini.stop()

    sessions = {s["session"] for s in json.loads(tb("log", "--all", "--json").stdout)}
    assert {"codex-1", "gemini-1"} <= sessions
    with serve_ui(ws_dir, store_dir) as ui:  # the page says which agent each session is
        status, body = request(ui.port, f"/api/timeline?token={ui.token}")
    assert status == 200
    agents = {s["name"]: s["agent"] for s in json.loads(body)["sessions"]}
    assert agents == {"codex-1": "codex", "gemini-1": "gemini"}
    assert "Undid turn 1 of session 'gemini-1'." in tb("undo").stdout
    assert state(ws_dir) == s1  # the newest reply only
    assert "Undid turn 1 of session 'codex-1'." in tb("undo", "--session", "codex-1").stdout
    assert state(ws_dir) == s0


def test_a_command_whose_end_never_comes_ends_with_the_turn(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    _workspace(ws_dir)
    _install(tb, "codex")
    codex = Player("codex", ws_dir, store_dir, "c")
    codex.prompt("Build.")
    pre = {
        **codex._common("PreToolUse"),
        "tool_name": "Bash",
        "tool_use_id": "denied",
        "tool_input": {"command": "python build.py"},
    }
    codex.send("PreToolUse", pre, "Bash")
    subprocess.run([sys.executable, "build.py"], check=True, cwd=ws_dir)  # no PostToolUse
    codex.stop()
    (ws_dir / "notes.txt").write_text("edited after the reply\n")
    changes = json.loads(tb("changes", "--json").stdout)
    assert {c["path"] for c in changes["changes"]} == {"app.py", "out", "out/log.txt"}
    # SPEC ("Take-backs do what they showed"): a step whose end was never seen has
    # changes takeback cannot attribute: conflicts, named, nothing written, unless forced.
    assert all(c["unconfirmed"] for c in changes["changes"])
    refused = tb("undo", check=3)
    assert "app.py changed in a step whose end was never seen" in refused.stderr
    assert (ws_dir / "out").exists()
    tb("undo", "--force")
    assert (ws_dir / "notes.txt").read_text() == "edited after the reply\n"
    assert not (ws_dir / "out").exists()


# -- install and uninstall -------------------------------------------------------------

#: a file a person already has, with a handler of their own in an event takeback uses,
#: one in an event it does not, and keys takeback knows nothing of
PERSONS = {
    "codex": {
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}],
            "PermissionRequest": [{"hooks": [{"type": "command", "command": "notify"}]}],
        }
    },
    "gemini": {
        "general": {"vimMode": True},
        "hooks": {
            "BeforeTool": [
                {"matcher": "write_file", "hooks": [{"type": "command", "command": "lint"}]}
            ],
            "Notification": [{"hooks": [{"type": "command", "command": "notify"}]}],
        },
    },
    "cursor": {
        "version": 1,
        "hooks": {
            "beforeShellExecution": [{"command": "./guard.sh"}],
            "stop": [{"command": "./notify.sh"}],
        },
    },
    "copilot": {
        "version": 1,
        "hooks": {
            "preToolUse": [{"type": "command", "bash": "./guard.sh", "timeoutSec": 5}],
            "sessionEnd": [{"type": "command", "bash": "./bye.sh"}],
        },
    },
}


@pytest.mark.parametrize("agent", AGENTS)
def test_install_keeps_a_persons_handlers_twice_to_the_same_bytes_and_uninstall_only_ours(
    tb: CLI, ws_dir: Path, agent: str
) -> None:
    path = ws_dir / FILES[agent]
    path.parent.mkdir(parents=True)
    original = json.dumps(PERSONS[agent], indent=2) + "\n"
    path.write_text(original)

    _install(tb, agent)
    first = path.read_bytes()
    doc = json.loads(first)
    text = json.dumps(doc)
    for kept in ("lint", "notify", "./guard.sh", "./notify.sh", "./bye.sh", "vimMode"):
        assert (kept in original) == (kept in text), kept
    assert f"takeback hook {agent}" in text
    assert "already in place" in _install(tb, agent)
    assert path.read_bytes() == first

    out = tb("hooks", "uninstall", agent).stdout
    assert "Updated" in out and f"takeback hook {agent}" in out
    assert json.loads(path.read_text()) == PERSONS[agent]
    assert "nothing changed" in tb("hooks", "uninstall", agent).stdout


@pytest.mark.parametrize("agent", AGENTS)
def test_install_into_a_new_file_and_uninstall_leaves_nothing(
    tb: CLI, ws_dir: Path, agent: str
) -> None:
    _install(tb, agent)
    path = ws_dir / FILES[agent]
    doc = json.loads(path.read_text())
    if agent in ("cursor", "copilot"):
        assert doc["version"] == 1
    tb("hooks", "uninstall", agent)
    if agent == "gemini":  # its settings file is the person's, whatever else it holds
        assert json.loads(path.read_text()) == {}
    else:
        assert not path.exists()


@pytest.mark.parametrize("agent", AGENTS)
def test_install_for_the_user_writes_under_home(tb: CLI, ws_dir: Path, agent: str) -> None:
    home = Path(os.environ["HOME"])
    out = tb("hooks", "install", agent, "--user", env={"PATH": "/usr/bin:/bin"}).stdout
    path = home / USER_FILES[agent]
    assert str(path) in out
    assert f"takeback hook {agent}" in path.read_text()
    assert not (ws_dir / FILES[agent]).exists()
    tb("hooks", "uninstall", agent, "--user")
    assert f"takeback hook {agent}" not in (path.read_text() if path.exists() else "")


def test_install_refuses_a_broken_file_and_a_local_scope(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / ".cursor").mkdir()
    (ws_dir / ".cursor" / "hooks.json").write_text("{not json")
    proc = tb("hooks", "install", "cursor", check=2)
    assert "not valid JSON" in proc.stderr
    assert (ws_dir / ".cursor" / "hooks.json").read_text() == "{not json"
    proc = tb("hooks", "install", "codex", "--local", check=2)
    assert "no local hooks" in proc.stderr
    assert not (ws_dir / ".codex").exists()


# -- broken input ----------------------------------------------------------------------

BROKEN: list[bytes] = [
    b"",
    b"not json",
    b"[1, 2]",
    b'{"hook_event_name": "PreToolUse"}',
    b'{"hook_event_name": 7, "session_id": {}}',
    b"\xff\xfe",
]


@pytest.mark.quick
@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("raw", BROKEN, ids=range(len(BROKEN)))
def test_broken_input_exits_0_and_says_nothing_the_agent_would_misread(
    tb: CLI, ws_dir: Path, store_dir: Path, agent: str, raw: bytes
) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    before = state(ws_dir)
    env = dict(os.environ, TAKEBACK_STORE=str(store_dir), PYTHONPATH=SRC)
    proc = subprocess.run(
        [sys.executable, "-m", "takeback", "hook", agent],
        input=raw,
        capture_output=True,
        cwd=ws_dir,
        env=env,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, ANSWER[agent].encode(), b"")
    assert state(ws_dir) == before
    if raw.strip() and agent != "copilot":
        assert agent in (store_dir / "hook.log").read_text()


@pytest.mark.quick
def test_a_codex_patch_touches_every_file_it_names_and_undo_puts_them_back(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "old.py").write_text("old\n")
    (ws_dir / "gone.py").write_text("gone\n")
    (ws_dir / "notes.txt").write_text("notes\n")
    _install(tb, "codex")
    s0 = state(ws_dir)
    codex = Player("codex", ws_dir, store_dir, "c")
    codex.prompt("Move old.py, delete gone.py, add new.py.")
    patch = (
        "*** Begin Patch\n*** Add File: pkg/new.py\n+new\n"
        "*** Update File: old.py\n*** Move to: moved.py\n@@\n-old\n+moved\n"
        "*** Delete File: gone.py\n*** End Patch\n"
    )
    pre = {
        **codex._common("PreToolUse"),
        "tool_name": "apply_patch",
        "tool_use_id": "p1",
        "tool_input": {"command": patch},
    }
    codex.send("PreToolUse", pre, "apply_patch")
    (ws_dir / "pkg").mkdir()
    (ws_dir / "pkg" / "new.py").write_text("new\n")
    (ws_dir / "old.py").rename(ws_dir / "moved.py")
    (ws_dir / "moved.py").write_text("moved\n")
    (ws_dir / "gone.py").unlink()
    (ws_dir / "notes.txt").write_text("a person's edit meanwhile\n")
    codex.send(
        "PostToolUse", {**pre, **codex._common("PostToolUse"), "tool_response": "ok"}, "apply_patch"
    )
    codex.stop()
    changes = json.loads(tb("changes", "--json").stdout)
    assert {c["path"]: c["status"] for c in changes["changes"]} == {
        "pkg/new.py": "created",
        "old.py": "deleted",
        "moved.py": "created",
        "gone.py": "deleted",
    }
    tb("undo")
    after = state(ws_dir)
    assert after.pop("notes.txt")[1] == b"a person's edit meanwhile\n"
    s0.pop("notes.txt")
    assert after == s0


@pytest.mark.parametrize("agent", ["copilot", "gemini"])
def test_with_the_service_running_it_records_each_agents_calls(
    tb: CLI, ws_dir: Path, store_dir: Path, agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call is handed to the workspace's watching service (Copilot's by its --event)."""
    _workspace(ws_dir)
    _install(tb, agent)
    tb("snapshot")
    s0 = state(ws_dir)
    monkeypatch.delenv("TAKEBACK_RELAY", raising=False)
    with running_service(ws_dir, store_dir):
        player = Player(agent, ws_dir, store_dir, f"{agent}-served")
        _reply(player, ws_dir)
        status = json.loads(tb("service", "status", "--json").stdout)
    assert status["calls"] >= player.calls - 1  # every call but the conversation's start
    assert "Undid turn 1" in tb("undo").stdout
    assert state(ws_dir) == s0


@pytest.mark.parametrize("agent", ["codex", "copilot"])
def test_commands_run_side_by_side_each_keep_their_changes(
    tb: CLI, ws_dir: Path, store_dir: Path, agent: str
) -> None:
    """As Codex runs them: both begin, the second ends first, the first writes after that.

    Another tool's call (Copilot's hooks see every tool, a read among them) ends neither.
    """
    _workspace(ws_dir)
    _install(tb, agent)
    s0 = state(ws_dir)
    p = Player(agent, ws_dir, store_dir, f"{agent}-parallel")
    p.prompt("Build both.")
    calls = {}
    for n, cmd in ((1, "make slow"), (2, "make fast")):
        name, args = p._tool("shell", cmd)
        if agent == "copilot":
            calls[n] = {**p._common("preToolUse"), "toolName": name, "toolArgs": args}
        else:
            pre = {**p._common("PreToolUse"), "tool_name": name, "tool_input": args}
            calls[n] = {**pre, "tool_use_id": f"call_{n}"}
    before, after = (
        ("preToolUse", "postToolUse") if agent == "copilot" else ("PreToolUse", "PostToolUse")
    )
    p.send(before, calls[1], "bash" if agent == "copilot" else "Bash")
    p.send(before, calls[2], "bash" if agent == "copilot" else "Bash")
    if agent == "copilot":  # a read beside them
        view = {**p._common("preToolUse"), "toolName": "view", "toolArgs": {"path": "app.py"}}
        p.send("preToolUse", view, "view")
    (ws_dir / "fast.txt").write_text("fast\n")
    ends = {
        n: {**c, **({} if agent == "copilot" else {"hook_event_name": after})}
        for n, c in calls.items()
    }
    p.send(after, ends[2], "bash" if agent == "copilot" else "Bash")
    (ws_dir / "slow.txt").write_text("slow\n")  # the first command, still running
    (ws_dir / "app.py").write_text("VALUE = 9\n")
    p.send(after, ends[1], "bash" if agent == "copilot" else "Bash")
    p.stop()
    changes = json.loads(tb("changes", "--json").stdout)
    assert {c["path"] for c in changes["changes"]} == {"fast.txt", "slow.txt", "app.py"}
    tb("undo")
    assert state(ws_dir) == s0
