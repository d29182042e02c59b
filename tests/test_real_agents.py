"""The real agents, driven by a scripted model, with takeback's hooks installed.

Each agent published on npm is run as a person runs it, non-interactively, in a scratch
project whose hooks ``takeback hooks install AGENT`` wrote. Its model endpoint is a
scripted server on 127.0.0.1 (``tests/_model_server.py``, the only fake) that answers
with a fixed reply: write a file, edit another, run a command that changes two files,
finish. A person edits a file of their own meanwhile. Then ``takeback undo`` must take
back exactly that reply and leave the person's edit.

The agents are installed by ``.ci/run`` into ``.agents/node_modules`` (git ignores it;
the versions are pinned in ``.agents/package.json``); a test skips, saying why, when node
or its agent is missing. Every other host is sent to a proxy on 127.0.0.1 that does not
exist, so nothing leaves the machine. Each agent's home, config and temporary folders
are in ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ._model_server import Model, Step, scripted_model
from .conftest import CLI, SRC, state

pytestmark = pytest.mark.slow

AGENTS_DIR = Path(__file__).resolve().parent.parent / ".agents"
BIN = AGENTS_DIR / "node_modules" / ".bin"
TIMEOUT = 240


def agent_exe(name: str) -> Path:
    """Return the installed agent's command, or skip the test saying what is missing."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    exe = BIN / name
    if not exe.exists():
        pytest.skip(f"{name} is not installed in {BIN} (npm install --prefix .agents)")
    return exe


def version(exe: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [str(exe), "--version"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    return proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else "?"


def scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Return the project and the environment an agent runs in (all in tmp_path)."""
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "app.py").write_text("VALUE = 1\n")
    (ws / "version.txt").write_text("v1\n")
    (ws / "notes.txt").write_text("a person's notes\n")
    home = Path(os.environ["HOME"])
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "PYTHONPATH": SRC,
        "TAKEBACK_STORE": str(tmp_path / "store"),
        # Only the scripted model is reachable: any other host goes to a dead proxy.
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "NO_COLOR": "1",
        "CI": "1",
    }
    for var in ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "CODEX_HOME", "COPILOT_HOME"):
        env.pop(var, None)
    return ws, env


def script(ws: Path) -> list[Step]:
    return [
        Step("write", str(ws / "hello.py"), "print('hello')\n"),
        Step("edit", str(ws / "app.py"), "VALUE = 2", old="VALUE = 1"),
        Step("shell", text="echo built > build.log && echo v2 > version.txt"),
        Step("done", text="Done: hello.py written, VALUE bumped, built."),
    ]


def person_edits(ws: Path) -> Callable[[int], None]:
    """A person edits their notes while the reply runs (before its command)."""

    def on_step(n: int) -> None:
        if n == 2:
            (ws / "notes.txt").write_text("a person's notes, edited meanwhile\n")

    return on_step


def check_undo(tb: CLI, ws: Path, s0: dict[str, Any], model: Model, agent: str) -> None:
    """The reply was recorded as one turn of the agent's session, and undo takes it back."""
    assert sorted(set(model.answered)) == [0, 1, 2, 3], model.answered
    assert (ws / "build.log").read_text() == "built\n"
    assert (ws / "app.py").read_text() == "VALUE = 2\n"
    log = tb.store / "hook.log"
    assert not log.exists(), log.read_text()
    changes = json.loads(tb("changes", "--json").stdout)
    assert changes["session"] not in ("", "default")  # the agent's conversation id
    assert {c["path"]: c["status"] for c in changes["changes"]} == {
        "hello.py": "created",
        "app.py": "modified",
        "build.log": "created",
        "version.txt": "modified",
    }
    out = tb("undo").stdout
    assert f"of session {changes['session']!r}" in out
    edited = (ws / "notes.txt").read_bytes()
    assert edited == b"a person's notes, edited meanwhile\n"
    assert state(ws) == {**s0, "notes.txt": ("f", edited, s0["notes.txt"][2])}


def install(tb: CLI, agent: str, ws: Path) -> None:
    out = tb("hooks", "install", agent, "--project", env={"PATH": "/usr/bin:/bin"}, cwd=ws).stdout
    assert "Created" in out, out


def run_agent(argv: list[str], ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        argv,
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=TIMEOUT,
        check=False,
        start_new_session=True,
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


# -- Codex -----------------------------------------------------------------------------


def _codex_trust(exe: Path, ws: Path, env: dict[str, str], config: Path) -> int:
    """Do what a person does in Codex's /hooks: trust each hook takeback installed.

    ``codex app-server`` lists the folder's hooks with the hash a trust is keyed to; the
    trust is what accepting them writes into config.toml. Returns how many were trusted.
    """
    with subprocess.Popen(
        [str(exe), "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ws,
        env=env,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            hooks = _hooks_list(proc, ws)
        finally:
            proc.kill()
    with config.open("a") as f:
        for h in hooks:
            f.write(f"\n[hooks.state.{json.dumps(h['key'])}]\n")
            f.write(f"trusted_hash = {json.dumps(h['currentHash'])}\n")
    return len(hooks)


def _hooks_list(proc: subprocess.Popen[str], ws: Path) -> list[dict[str, Any]]:
    """Ask a running ``codex app-server`` for the hooks of a folder (JSON-RPC, a line each)."""
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None

    def say(doc: dict[str, Any]) -> None:
        stdin.write(json.dumps({"jsonrpc": "2.0", **doc}) + "\n")
        stdin.flush()

    def ask(n: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        say({"id": n, "method": method, "params": params})
        for line in stdout:
            doc = json.loads(line)
            if doc.get("id") == n:
                return dict(doc["result"])
        raise AssertionError("codex app-server closed its output")

    ask(1, "initialize", {"clientInfo": {"name": "takeback-tests", "version": "1"}})
    say({"method": "initialized", "params": {}})
    return list(ask(2, "hooks/list", {"cwds": [str(ws)]})["data"][0]["hooks"])


def run_codex(exe: Path, ws: Path, env: dict[str, str], home: Path, model: Model) -> None:
    """Run ``codex exec`` once in ``ws`` against the scripted model (its config in ``home``)."""
    home.mkdir(exist_ok=True)
    env = {**env, "CODEX_HOME": str(home), "TEST_MODEL_KEY": "not-a-key"}
    config = home / "config.toml"
    config.write_text(
        # gpt-5.5: a model Codex knows, so it offers its apply_patch tool
        'model = "gpt-5.5"\nmodel_provider = "scripted"\n'
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "http://127.0.0.1:{model.port}/v1"\n'
        'wire_api = "responses"\nenv_key = "TEST_MODEL_KEY"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n"
        f'[projects.{json.dumps(str(ws))}]\ntrust_level = "trusted"\n'
    )
    assert _codex_trust(exe, ws, env, config) == 5
    run_agent(
        [str(exe), "exec", "--skip-git-repo-check"]
        + ["--dangerously-bypass-approvals-and-sandbox", "Do as you are told."],
        ws,
        env,
    )


def test_codex(tmp_path: Path) -> None:
    exe = agent_exe("codex")
    ws, env = scratch(tmp_path)
    tb = CLI(ws, tmp_path / "store")
    install(tb, "codex", ws)
    s0 = state(ws)
    with scripted_model(script(ws), on_step=person_edits(ws)) as model:
        run_codex(exe, ws, env, tmp_path / "codex-home", model)
    check_undo(tb, ws, s0, model, "codex")


# -- Gemini CLI ------------------------------------------------------------------------


def run_gemini(exe: Path, ws: Path, env: dict[str, str], model: Model) -> str:
    """Run ``gemini -p`` once in ``ws`` against the scripted model; return its stderr."""
    gemini_dir = Path(env["HOME"]) / ".gemini"
    gemini_dir.mkdir(exist_ok=True)
    # What a person's first run sets up: an API key as the way in, the project trusted;
    # telemetry, usage statistics and updates off (nothing may leave the machine).
    (gemini_dir / "settings.json").write_text(
        json.dumps(
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            }
        )
    )
    (gemini_dir / "trustedFolders.json").write_text(json.dumps({str(ws): "TRUST_FOLDER"}))
    env = {
        **env,
        "GEMINI_API_KEY": "not-a-key",
        "GEMINI_TELEMETRY_ENABLED": "false",
        "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{model.port}",
    }
    proc = run_agent(
        [str(exe), "-p", "Do as you are told."]
        + ["--approval-mode", "yolo", "--output-format", "json"],
        ws,
        env,
    )
    return proc.stderr


def test_gemini(tmp_path: Path) -> None:
    exe = agent_exe("gemini")
    ws, env = scratch(tmp_path)
    tb = CLI(ws, tmp_path / "store")
    install(tb, "gemini", ws)
    s0 = state(ws)
    with scripted_model(script(ws), on_step=person_edits(ws)) as model:
        stderr = run_gemini(exe, ws, env, model)
    assert "takeback" in stderr  # Gemini names the project hooks it runs
    check_undo(tb, ws, s0, model, "gemini")


def test_codex_then_gemini_in_one_workspace(tmp_path: Path) -> None:
    """Two agents, one history: two sessions, and undo takes back the newest reply only."""
    codex, gemini = agent_exe("codex"), agent_exe("gemini")
    ws, env = scratch(tmp_path)
    tb = CLI(ws, tmp_path / "store")
    install(tb, "codex", ws)
    install(tb, "gemini", ws)
    s0 = state(ws)
    with scripted_model(script(ws)) as model:
        run_codex(codex, ws, env, tmp_path / "codex-home", model)
    s1 = state(ws)
    second = [
        Step("write", str(ws / "second.py"), "print('second')\n"),
        Step("edit", str(ws / "app.py"), "VALUE = 3", old="VALUE = 2"),
        Step("shell", text="echo again >> build.log && echo v3 > version.txt"),
        Step("done", text="Done again."),
    ]
    with scripted_model(second) as model:
        run_gemini(gemini, ws, env, model)
    assert (ws / "app.py").read_text() == "VALUE = 3\n"
    sessions = {s["session"] for s in json.loads(tb("log", "--all", "--json").stdout)}
    agents = tb("log", "--all").stdout
    assert len(sessions) == 2 and "(codex)" in agents and "(gemini)" in agents
    out = tb("undo").stdout
    assert state(ws) == s1, out  # Gemini's reply, and only it

    def short(s: str) -> str:
        return s[:8] if len(s) == 36 and s.count("-") == 4 else s

    codex_session = next(s for s in sessions if f"{short(s)} (codex)" in agents)
    tb("undo", "--session", codex_session)
    assert state(ws) == s0


# -- Copilot CLI -----------------------------------------------------------------------


def run_copilot(
    exe: Path, ws: Path, env: dict[str, str], tmp_path: Path, model: Model, **provider: str
) -> None:
    """Run ``copilot -p`` once in ``ws`` against the scripted model."""
    # Its own provider settings (bring your own model): an OpenAI-compatible endpoint,
    # and no call to GitHub at all.
    env = {
        **env,
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": "not-a-key",
        "COPILOT_PROVIDER_BASE_URL": f"http://127.0.0.1:{model.port}/v1",
        "COPILOT_OFFLINE": "1",
        "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_PKG_CACHE_HOME": str(tmp_path / "copilot-cache"),
        **provider,
    }
    # Copilot runs a repository's hooks only in a folder the person trusts; answering its
    # question writes the folder here.
    config = Path(env["HOME"]) / ".copilot" / "config.json"
    config.parent.mkdir(exist_ok=True)
    config.write_text(json.dumps({"trusted_folders": [str(ws)]}))
    run_agent([str(exe), "-p", "Do as you are told.", "--allow-all-tools"], ws, env)


def test_copilot(tmp_path: Path) -> None:
    """Its create, edit and bash tools (a model on the Chat Completions API)."""
    exe = agent_exe("copilot")
    ws, env = scratch(tmp_path)
    tb = CLI(ws, tmp_path / "store")
    install(tb, "copilot", ws)
    s0 = state(ws)
    with scripted_model(script(ws), on_step=person_edits(ws)) as model:
        run_copilot(exe, ws, env, tmp_path, model, COPILOT_MODEL="gpt-4.1")
    check_undo(tb, ws, s0, model, "copilot")


def test_copilot_with_patches(tmp_path: Path) -> None:
    """Its apply_patch tool, which it offers a model on the Responses API."""
    exe = agent_exe("copilot")
    ws, env = scratch(tmp_path)
    tb = CLI(ws, tmp_path / "store")
    install(tb, "copilot", ws)
    s0 = state(ws)
    with scripted_model(script(ws), on_step=person_edits(ws)) as model:
        run_copilot(
            exe,
            ws,
            env,
            tmp_path,
            model,
            COPILOT_MODEL="gpt-5.5",
            COPILOT_PROVIDER_WIRE_API="responses",
        )
    assert all(path == "/v1/responses" for path, _body in model.requests)
    check_undo(tb, ws, s0, model, "copilot")


# -- Claude Code (the control: the same reply through the hooks takeback began with) ---


def test_claude_code(tmp_path: Path) -> None:
    exe = agent_exe("claude")
    ws, env = scratch(tmp_path)
    tb = CLI(ws, tmp_path / "store")
    install(tb, "claude-code", ws)
    env.update(
        ANTHROPIC_API_KEY="not-a-key",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
    )
    s0 = state(ws)
    with scripted_model(script(ws), on_step=person_edits(ws)) as model:
        env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{model.port}"
        run_agent(
            [str(exe), "-p", "Write hello.py, bump VALUE, build."]
            + ["--output-format", "stream-json", "--verbose"]
            + ["--permission-mode", "acceptEdits", "--allowedTools", "Bash"],
            ws,
            env,
        )
    check_undo(tb, ws, s0, model, "claude-code")
