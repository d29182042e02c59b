"""What a hook call and a snapshot import: only what they run, never the heavy parts.

Every hook call and every ``takeback snapshot`` is a new Python process, and with the
watching service running its start-up and imports are most of what it costs. These tests
run the real command in a subprocess, on a real workspace with the service running, and
read ``sys.modules`` when it is done: no timing, so they hold on a busy machine too. Each
also checks that the call did its work (a hook call that failed early would import
nothing and prove nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import platformdirs
import pytest

from takeback.integrations._data_dir import user_data_dir
from takeback.store import default_store_path
from tests._service import running_service

#: Imported by no hook call and no snapshot: the merge, the UI, the MCP server, the
#: PostgreSQL driver, the watcher (inotify, loaded by the service process alone).
NEVER = {
    "merge3",
    "rich",
    "mcp",
    "psycopg",
    "inotify_simple",
    "takeback.ops._merge",
    "takeback.ops._takeback",
    "takeback.ops._rewind",
    "takeback.ops._copy",
    "takeback.ops._diff",
    "takeback.scan._watcher",
    "takeback.store._pg",
    "takeback.integrations.claude_code._settings",
    "takeback.integrations._agent_settings",
    "takeback.integrations._mcp_server",
    "takeback.integrations._ui_api",
    "takeback.integrations._ui_server",
    "takeback.integrations._watch",
}
#: Besides, a hook call needs no argument parser and no diff text.
NOT_IN_HOOKS = NEVER | {"argparse", "takeback.cli._app", "takeback.ops._patch"}

_RUN = """
import os, sys
from takeback.cli import main
code = main(sys.argv[1:])
loaded = sorted(sys.modules)
with open(os.environ["TB_MODULES_OUT"], "w") as f:
    f.write("\\n".join(loaded))
sys.exit(code)
"""


def _run(
    argv: list[str],
    store: Path | None,
    tmp_path: Path,
    stdin: bytes = b"",
    *,
    cwd: Path | None = None,
    relay: bool = False,
) -> tuple[subprocess.CompletedProcess[bytes], set[str]]:
    """Run ``takeback *argv`` in a new process; return it and the modules it had loaded.

    ``store`` None: the workspace's default store, in the XDG data folder. ``relay``
    False: the command runs in this process even with the service running.
    """
    out = tmp_path / "modules.txt"
    env = {**os.environ, "TAKEBACK_HOOK_DEBUG": "1", "TB_MODULES_OUT": str(out)}
    env["TAKEBACK_RELAY"] = "1" if relay else "0"
    if store is not None:
        env["TAKEBACK_STORE"] = str(store)
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, *argv],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=cwd,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    modules = set(out.read_text().splitlines())
    out.unlink()
    return proc, modules


def _hook(
    ws: Path, store: Path, tmp_path: Path, payload: dict[str, Any], *, relay: bool = False
) -> tuple[str, set[str]]:
    """Make a hook call; return what it logged that it did, and the modules it loaded."""
    log = store / "hook.log"
    before = log.read_text() if log.exists() else ""
    doc = {"session_id": "s", "cwd": str(ws), **payload}
    _proc, modules = _run(
        ["hook", "claude-code"], store, tmp_path, json.dumps(doc).encode(), relay=relay
    )
    added = log.read_text()[len(before) :]
    return added, modules


def test_hook_calls_and_snapshots_load_only_what_they_run(tmp_path: Path) -> None:
    ws, store = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    for i in range(20):
        (ws / f"f{i}.txt").write_text(f"{i}\n")
    _run(["snapshot", "--root", str(ws)], store, tmp_path)
    with running_service(ws, store):
        _run(["snapshot", "--root", str(ws)], store, tmp_path)  # the service's first mark

        proc, modules = _run(["snapshot", "--root", str(ws), "--json"], store, tmp_path)
        assert json.loads(proc.stdout)["scan"]["mode"] == "service"
        assert "takeback._service_client" in modules
        assert sorted(modules & NEVER) == []

        _hook(ws, store, tmp_path, {"hook_event_name": "UserPromptSubmit", "prompt": "go"})
        bash = {"tool_name": "Bash", "tool_use_id": "b1", "tool_input": {"command": "make"}}
        done, modules = _hook(ws, store, tmp_path, {"hook_event_name": "PreToolUse", **bash})
        assert "ok in" in done and "step" in done and "begun" in done, done
        assert "takeback.ops._snapshot" in modules
        assert sorted(modules & NOT_IN_HOOKS) == []
        # Nothing changed since the prompt's snapshot: nothing to compress or write.
        assert sorted(modules & {"zstandard", "concurrent.futures"}) == []

        (ws / "f1.txt").write_text("changed\n")
        (ws / "new.txt").write_text("new\n")
        done, modules = _hook(ws, store, tmp_path, {"hook_event_name": "PostToolUse", **bash})
        assert "ok in" in done and "2 path(s) changed" in done, done
        # A created path is checked against the ignore rules of the step's start, whose
        # scope the rewind module builds: that much of it is needed here.
        assert sorted(modules & NOT_IN_HOOKS) == ["takeback.ops._rewind"]

        write = {
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_use_id": "w1",
            "tool_input": {"file_path": str(ws / "f2.txt"), "content": "x"},
        }
        done, modules = _hook(ws, store, tmp_path, write)
        assert "ok in" in done and "touched f2.txt" in done, done
        assert sorted(modules & NOT_IN_HOOKS) == []
        # A file tool's call reads one file: no snapshot, no service client, no engine.
        assert sorted(modules & {"takeback._service_client", "takeback.ops._engine"}) == []


#: Besides, a snapshot in a process of its own (no service) makes no plan, no take-back's
#: result and no patch: what it prints is its record and its scan's counts; and its
#: argument parser finds the terminal's width without shutil.
NOT_IN_SNAPSHOTS = NEVER | {
    "takeback.model._plan",
    "takeback.model._results",
    "takeback.ops._patch",
    # argparse asks shutil for the terminal's width (shutil loads bz2 and lzma)
    "shutil",
}


def test_a_snapshot_without_the_service_loads_no_plan_and_no_patch(tmp_path: Path) -> None:
    ws, store = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    for i in range(20):
        (ws / f"f{i}.txt").write_text(f"{i}\n")
    for argv in (["snapshot"], ["snapshot", "--json"]):
        (ws / "f1.txt").write_text(f"{argv}\n")
        proc, modules = _run([*argv, "--root", str(ws)], store, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "takeback.ops._snapshot" in modules and "takeback.cli._app" in modules
        assert sorted(modules & NOT_IN_SNAPSHOTS) == []
    assert json.loads(proc.stdout)["scan"]["mode"] == "full"


#: All that a command the service runs may load in the caller's process (the relay): no
#: store, no scan, no argument parser; a hook call adds its entry point and its bound.
#: (The data folder's module only when no store is named.)
RELAY = {
    "takeback",
    "takeback._service_client",
    "takeback._where",
    "takeback._wire",
    "takeback.cli",
    "takeback.cli._argv",
    "takeback.cli._relay",
    "takeback.integrations",
    "takeback.integrations._data_dir",
}
RELAY_HOOK = RELAY | {
    "takeback.cli.hook_cmd",
    "takeback.errors",
    "takeback.integrations.claude_code",
    "takeback.integrations.claude_code._call",
    "takeback.integrations.claude_code._deadline",
    # loaded with the bound, so that its expiry (a signal) never has to import
    "takeback.integrations.claude_code._log",
}


#: Not even the standard library's heavier parts: argument parsing, SQLite, OpenSSL,
#: the socket module's enum tables, typing.
RELAY_NEVER = {"argparse", "sqlite3", "hashlib", "socket", "zstandard", "typing", "dataclasses"}


#: Not loaded by a hook call the service runs, besides: what its payload and its bound
#: need is in C modules of their own.
HOOK_NEVER = {"json", "re", "signal", "enum", "collections"}


def test_a_call_the_service_runs_loads_only_the_relay(tmp_path: Path) -> None:
    ws, store = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    _run(["snapshot", "--root", str(ws)], store, tmp_path)
    with running_service(ws, store):
        _run(["snapshot", "--root", str(ws)], store, tmp_path, relay=True)
        proc, modules = _run(["snapshot", "--root", str(ws), "--json"], store, tmp_path, relay=True)
        assert json.loads(proc.stdout)["scan"]["mode"] == "service"
        assert "takeback.cli._relay" in modules
        assert sorted(m for m in modules if m.startswith("takeback") and m not in RELAY) == []
        assert sorted(modules & RELAY_NEVER) == []
        # Its frames need no json.
        assert "json" not in modules
        first = json.loads(proc.stdout)["id"]
        proc, modules = _run(["status", "--root", str(ws)], store, tmp_path, relay=True)
        assert proc.stdout == b""  # nothing changed since the snapshot
        assert "takeback.cli._relay" in modules
        assert sorted(m for m in modules if m.startswith("takeback") and m not in RELAY) == []
        assert sorted(modules & RELAY_NEVER) == []
        # A take-back the service runs: the caller loads no more than for a snapshot.
        (ws / "a.txt").write_text("b\n")
        proc, modules = _run(
            ["rewind", "--root", str(ws), "--to", first], store, tmp_path, relay=True
        )
        assert (ws / "a.txt").read_text() == "a\n"
        assert "takeback.cli._relay" in modules
        assert sorted(m for m in modules if m.startswith("takeback") and m not in RELAY) == []
        assert sorted(modules & RELAY_NEVER) == []

        done, modules = _hook(
            ws, store, tmp_path, {"hook_event_name": "UserPromptSubmit", "prompt": "go"}, relay=True
        )
        assert "ok in" in done and "turn 1 begun" in done, done
        assert "takeback.cli._relay" in modules
        assert sorted(m for m in modules if m.startswith("takeback") and m not in RELAY_HOOK) == []
        assert sorted(modules & RELAY_NEVER) == []
        # Its payload is read by the C scanner and its bound set by the C signal module:
        # neither json's regular expressions nor signal's enums, 4 ms of a hook call.
        assert sorted(modules & HOOK_NEVER) == []
        status = json.loads(
            subprocess.run(
                [sys.executable, "-m", "takeback", "service", "status", "--root", str(ws)]
                + ["--store", str(store), "--json"],
                capture_output=True,
                check=True,
            ).stdout
        )
        assert status["calls"] == 5


def test_version_and_the_cli_package_import_almost_nothing(tmp_path: Path) -> None:
    proc, modules = _run(["--version"], tmp_path / "store", tmp_path)
    assert proc.stdout.decode().startswith("takeback ")
    assert sorted(m for m in modules if m.startswith("takeback")) == ["takeback", "takeback.cli"]
    assert sorted(modules & {"argparse", "sqlite3", "dataclasses", "json"}) == []


def test_a_default_store_is_found_without_platformdirs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    _run(["snapshot", "--root", str(ws)], None, tmp_path)
    proc, modules = _run(["status", "--json"], None, tmp_path, cwd=ws)
    assert json.loads(proc.stdout)["changes"] == []
    assert "platformdirs" not in modules
    store = Path(default_store_path(str(ws), platformdirs.user_data_dir("takeback", False)))
    assert (store / "store.json").is_file()

    doc = {"session_id": "s", "cwd": str(ws), "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    _proc, modules = _run(["hook", "claude-code"], None, tmp_path, json.dumps(doc).encode())
    assert "turn 1 begun" in (store / "hook.log").read_text()
    assert "platformdirs" not in modules


@pytest.mark.parametrize(
    "env",
    [
        {"XDG_DATA_HOME": "/x/data", "HOME": "/home/u"},
        {"XDG_DATA_HOME": "/x/data/", "HOME": "/home/u"},
        {"XDG_DATA_HOME": "", "HOME": "/home/u"},
        {"HOME": "/home/u"},
        {"HOME": "/home/u/"},
        {"HOME": "/"},
        {"HOME": "//"},
    ],
)
def test_the_data_folder_read_quickly_is_the_one_platformdirs_gives(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("XDG_DATA_HOME", "HOME", "ANDROID_DATA"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    got = user_data_dir(env, "linux")
    assert got is not None
    if sys.platform == "linux":
        assert got == platformdirs.user_data_dir("takeback", appauthor=False)


@pytest.mark.parametrize(
    ("env", "platform"),
    [
        ({"XDG_DATA_HOME": "relative", "HOME": "/home/u"}, "linux"),
        ({"XDG_DATA_HOME": " /x", "HOME": "/home/u"}, "linux"),
        ({"HOME": "relative"}, "linux"),
        ({}, "linux"),
        ({"HOME": "/home/u", "ANDROID_DATA": "/data"}, "linux"),
        ({"HOME": "/home/u"}, "darwin"),
        ({"HOME": "/home/u"}, "win32"),
    ],
)
def test_other_cases_are_left_to_platformdirs(env: dict[str, str], platform: str) -> None:
    assert user_data_dir(env, platform) is None


def test_another_agents_hook_call_loads_its_own_reader_alone(tmp_path: Path) -> None:
    ws, store = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    _run(["snapshot", "--root", str(ws)], store, tmp_path)
    doc = {"session_id": "s", "cwd": str(ws), "hook_event_name": "BeforeAgent", "prompt": "go"}
    _proc, modules = _run(["hook", "gemini"], store, tmp_path, json.dumps(doc).encode())
    assert "turn 1 begun" in (store / "hook.log").read_text()
    assert "takeback.integrations._gemini" in modules
    others = {f"takeback.integrations._{a}" for a in ("codex", "cursor", "copilot")}
    assert sorted(modules & (NOT_IN_HOOKS | others)) == []
