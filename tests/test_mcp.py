"""``takeback mcp``: the real server as a subprocess, driven by the MCP SDK's own client.

One server is started per test (about a second each, the SDK's import): the tools are
listed, and then called the way an agent would call them, checking the structured
results, the files, and that a bad ref is a tool error with the command line's message.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from .conftest import CLI, SRC, files_state

TOOLS = {"checkpoint", "history", "changes", "diff", "undo_file", "undo_turn", "redo", "rewind"}

Call = Callable[..., Awaitable[CallToolResult]]


def text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def serve(
    root: Path, store: Path, body: Callable[[ClientSession, Call], Awaitable[None]], *args: str
) -> None:
    """Start ``takeback mcp`` in ``root`` and run ``body`` against it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "takeback", "mcp", *args],
        cwd=str(root),
        env={
            "PYTHONPATH": SRC,
            "TAKEBACK_STORE": str(store),
            "HOME": os.environ["HOME"],
            "XDG_DATA_HOME": os.environ["XDG_DATA_HOME"],
            "PYTHONWARNINGS": "error",
        },
    )

    async def go() -> None:
        with tempfile.TemporaryFile("w+") as errlog:
            try:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()

                        async def call(name: str, **arguments: Any) -> CallToolResult:
                            return await session.call_tool(name, arguments)

                        await body(session, call)
            except BaseException:
                errlog.seek(0)
                print("server stderr:\n" + errlog.read(), file=sys.stderr)
                raise
            errlog.seek(0)
            assert "Traceback" not in errlog.read()

    anyio.run(go)


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return dict(result.structured_content)


def test_tools_say_which_read_and_which_take_back(ws_dir: Path, store_dir: Path) -> None:
    """Annotations let a client ask the person before a take-back, and not before a look."""

    async def body(session: ClientSession, call: Call) -> None:
        hints = {}
        for t in (await session.list_tools()).tools:
            a = t.annotations
            assert a is not None, t.name
            hints[t.name] = (a.read_only_hint, a.destructive_hint, a.idempotent_hint)
        assert hints == {
            "history": (True, None, None),
            "changes": (True, None, None),
            "diff": (True, None, None),
            "checkpoint": (False, False, False),
            "undo_file": (False, True, False),
            "undo_turn": (False, True, False),
            "redo": (False, True, False),
            "rewind": (False, True, False),
        }

    serve(ws_dir, store_dir, body)


def test_tool_descriptions_read_as_written_without_the_source_indentation(
    ws_dir: Path, store_dir: Path
) -> None:
    """A client shows a tool's description to the model and to people: no line of it
    starts with the indentation of the docstring it came from."""

    async def body(session: ClientSession, call: Call) -> None:
        tools = (await session.list_tools()).tools
        for t in tools:
            text = t.description or ""
            assert text.strip(), t.name
            indented = [line for line in text.splitlines() if line.startswith(" ")]
            assert indented == [], (t.name, indented)
        undo = next(t for t in tools if t.name == "undo_turn")
        assert "\nFiles changed since the turn are conflicts" in (undo.description or "")

    serve(ws_dir, store_dir, body)


def test_tools_checkpoint_diff_rewind(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    (ws_dir / "b.txt").write_text("bee\n")

    async def body(session: ClientSession, call: Call) -> None:
        tools = (await session.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        assert all(t.output_schema is not None and t.description for t in tools)
        by_name = {t.name: t for t in tools}
        assert by_name["rewind"].input_schema["properties"]["dry_run"]["default"] is True

        cp = ok(await call("checkpoint", label="before the edits"))
        assert cp["step"] == 1 and cp["session"] == "default" and len(cp["id"]) == 64
        s0 = files_state(ws_dir)

        (ws_dir / "a.txt").write_text("one\ntwo\n")
        (ws_dir / "b.txt").unlink()
        (ws_dir / "c").mkdir()
        (ws_dir / "c" / "new.txt").write_text("new\n")
        s1 = files_state(ws_dir)

        d = ok(await call("diff", from_ref=cp["id"][:10]))
        assert {(f["path"], f["status"]) for f in d["files"]} == {
            ("a.txt", "M"),
            ("b.txt", "D"),
            ("c/new.txt", "A"),
        }
        assert "+two" in d["patch"] and not d["truncated"]
        d = ok(await call("diff", from_ref="1", paths=["a.txt"], stat_only=True))
        assert [(f["path"], f["added"], f["removed"]) for f in d["files"]] == [("a.txt", 1, 0)]

        plan = ok(await call("rewind", ref="1"))  # dry_run defaults to true
        assert plan["dry_run"] is True and plan["pre_rewind"] is None
        assert {(i["action"], i["path"]) for i in plan["plan"]} >= {
            ("M", "a.txt"),
            ("D", "b.txt"),
            ("A", "c/new.txt"),
        }
        assert files_state(ws_dir) == s1

        cli = tb("rewind", "--to", "deadbeef", check=2).stderr.strip()
        assert cli.startswith("takeback: error: ")
        bad_ref_message = cli.removeprefix("takeback: error: ")
        bad = await call("rewind", ref="deadbeef", dry_run=False)
        assert bad.is_error and text(bad) == bad_ref_message
        assert bad.structured_content is not None
        assert bad.structured_content["error"] == "RefError"
        assert bad.structured_content["exit_code"] == 2
        bad = await call("diff", from_ref="turn:99")
        assert bad.is_error and "no turn 99" in text(bad)
        assert files_state(ws_dir) == s1

        done = ok(await call("rewind", ref="1", dry_run=False))
        assert done["dry_run"] is False and done["pre_rewind"]
        assert files_state(ws_dir) == s0
        ok(await call("rewind", ref=done["pre_rewind"], dry_run=False))
        assert files_state(ws_dir) == s1
        ok(await call("rewind", ref=cp["id"], paths=["b.txt"], dry_run=False))
        assert (ws_dir / "b.txt").read_text() == "bee\n" and (ws_dir / "c").exists()

        hist = ok(await call("history"))
        assert [s["name"] for s in hist["sessions"]] == ["default"]
        assert [(s["n"], s["label"]) for s in hist["steps"]] == [(1, "before the edits")]
        assert {s["kind"] for s in hist["snapshots"]} >= {"baseline", "step", "pre-rewind"}

    serve(ws_dir, store_dir, body)


def test_undo_file_undo_turn_redo(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "app.py").write_text("v1\n")
    (ws_dir / "keep.txt").write_text("keep\n")
    s = ("--session", "agent")
    # Turn 1, recorded the way a hook records it: touch before each write.
    tb("turn", "begin", "-m", "first", *s)
    tb("touch", "app.py", "new/deep/made.txt", *s)
    (ws_dir / "app.py").write_text("v2\n")
    (ws_dir / "new" / "deep").mkdir(parents=True)
    (ws_dir / "new" / "deep" / "made.txt").write_text("made\n")
    tb("turn", "end", *s)
    # Turn 2 changes app.py again; it is still open when the agent asks.
    tb("turn", "begin", "-m", "second", *s)
    tb("touch", "app.py", *s)
    (ws_dir / "app.py").write_text("v3\n")
    (ws_dir / "keep.txt").write_text("a person's edit\n")

    async def body(session: ClientSession, call: Call) -> None:
        ch = ok(await call("changes", session="agent"))
        assert ch["turn"] == 1 and {c["path"] for c in ch["changes"]} == {
            "app.py",
            "new/deep/made.txt",
        }

        r = ok(await call("undo_file", path="new/deep/made.txt"))  # newest session: agent
        assert r["session"] == "agent" and r["action"] == "A" and r["ref"] == "turn:1"
        assert not (ws_dir / "new").exists()
        r = ok(await call("undo_file", path=str(ws_dir / "app.py"), session="agent"))
        assert r["action"] == "M" and r["ref"] == "turn:1"
        assert (ws_dir / "app.py").read_text() == "v1\n"
        assert (ws_dir / "keep.txt").read_text() == "a person's edit\n"

        bad = await call("undo_file", path="keep.txt", session="agent")
        assert bad.is_error and text(bad) == "session 'agent' did not change keep.txt"
        bad = await call("undo_file", path="../outside.txt")
        assert bad.is_error and "outside the workspace root" in text(bad)

        # Put it all back with the pre-rewind snapshot, end turn 2 and undo it.
        ok(await call("rewind", ref=r["pre_rewind"], dry_run=False))
        assert (ws_dir / "app.py").read_text() == "v3\n"

    serve(ws_dir, store_dir, body)
    tb("turn", "end", "--session", "agent")

    async def body2(session: ClientSession, call: Call) -> None:
        u = ok(await call("undo_turn"))
        # Turn 2 holds the agent's own take-backs made during it: undo_file removed
        # new/deep/made.txt inside reply 2, so undo of reply 2 brings it back.
        assert (
            u["turns"] == [2]
            and u["message"] == "Undid turn 2 of session 'agent'. Files restored: 2."
        )
        assert u["restored"] == ["app.py", "new/deep/made.txt"]
        assert (ws_dir / "app.py").read_text() == "v2\n"
        assert (ws_dir / "new/deep/made.txt").read_text() == "made\n"
        r = ok(await call("redo"))
        assert r["turns"] == [2] and (ws_dir / "app.py").read_text() == "v3\n"
        assert not (ws_dir / "new/deep/made.txt").exists()
        # Redo walks on through the one-file undos: app.py's was brought back by the
        # rewind already (nothing to write: it says so, and records no operation);
        # new/deep/made.txt's brings the file back.
        r = ok(await call("redo"))
        assert r["message"] == (
            "Nothing to redo: app.py already holds what it held before its undo "
            "(a rewind brought it back)."
        )
        assert r["nothing"] is True and r["restored"] == [] and r["pre"] is None
        r = ok(await call("redo"))
        assert r["restored"] == ["new/deep/made.txt"]
        assert (ws_dir / "new/deep/made.txt").read_text() == "made\n"
        assert ok(await call("redo"))["message"] == "Nothing to redo."
        (ws_dir / "app.py").write_text("edited by a person\n")
        bad = await call("undo_turn", turn=2)
        assert bad.is_error and text(bad).startswith("app.py changed after turn 2")
        assert bad.structured_content is not None
        assert bad.structured_content["conflicts"] == ["app.py"]
        assert bad.structured_content["exit_code"] == 3

    serve(ws_dir, store_dir, body2, "--session", "agent")


def test_no_store_is_a_tool_error_and_a_bad_root_is_an_exit(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    async def body(session: ClientSession, call: Call) -> None:
        bad = await call("history")
        assert bad.is_error and "no takeback store" in text(bad)
        assert not store_dir.exists()

    serve(ws_dir, store_dir, body)
    proc = tb("mcp", "--root", str(tmp_path / "missing"), check=2)
    assert proc.stdout == "" and "not a folder" in proc.stderr


@pytest.mark.parametrize("bad", [b"not json\n", b'{"jsonrpc": "2.0", "id": 1}\n'])
def test_garbage_on_stdin_does_not_print_junk(tb: CLI, ws_dir: Path, bad: bytes) -> None:
    import subprocess

    env = dict(os.environ, PYTHONPATH=SRC, TAKEBACK_STORE=str(tb.store))
    proc = subprocess.run(
        [sys.executable, "-m", "takeback", "mcp"],
        input=bad,
        cwd=ws_dir,
        env=env,
        capture_output=True,
        timeout=60,
    )
    for line in proc.stdout.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"
