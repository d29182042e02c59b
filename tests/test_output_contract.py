"""One output contract: every MCP tool answers with the keys of the CLI's ``--json``.

Both faces render the library's result types through their ``to_json()``; the MCP tools
add only what a tool call needs beside them (``session``, ``message``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from takeback.integrations._mcp_server import ServerConfig, _Tools

from .conftest import CLI


def cli_json(tb: CLI, *args: str) -> dict[str, Any]:
    doc = json.loads(tb(*args, "--json").stdout)
    assert doc.pop("schema") == 1
    return dict(doc)


def same_keys(cli: dict[str, Any], mcp: dict[str, Any], extra: set[str]) -> None:
    assert set(mcp) == set(cli) | extra, sorted(set(cli) ^ set(mcp))


@pytest.mark.quick
def test_each_tool_has_the_keys_of_the_command(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    tools = _Tools(ServerConfig(root=str(ws_dir), store=str(store_dir), session="s"))
    (ws_dir / "a.txt").write_text("a0\n")
    snap = cli_json(tb, "snapshot", "--session", "s")
    same_keys(snap, tools.checkpoint("cp", None), {"label", "ref"})
    tb("turn", "begin", "--session", "s")
    tb("touch", "a.txt", "--session", "s")
    (ws_dir / "a.txt").write_text("a1\n")
    tb("turn", "end", "--session", "s")

    changes = cli_json(tb, "changes", "--session", "s")
    assert changes["state"] == "done"
    same_keys(changes, tools.changes(None, None), set())
    same_keys(
        cli_json(tb, "diff", "start", "--session", "s"),
        tools.diff("start", None, None, False, None),
        {"session", "from", "to"},
    )
    same_keys(
        cli_json(tb, "rewind", "--to", "start", "--dry-run", "--session", "s"),
        tools.rewind("start", None, True, None),
        {"session"},
    )

    undo = cli_json(tb, "undo", "--session", "s")
    assert undo["restored"] == ["a.txt"] and "left" in undo and "conflicts" in undo
    redo = cli_json(tb, "redo", "--session", "s")
    mcp_undo = tools.turn_op("undo", None, False, None)
    same_keys(undo, mcp_undo, {"session", "message"})
    same_keys(redo, tools.turn_op("redo", None, False, None), {"session", "message"})
    same_keys(
        undo, tools.undo_file("a.txt", None), {"session", "message", "path", "action", "pre_rewind"}
    )
    assert (ws_dir / "a.txt").read_text() == "a0\n"


def test_words_are_one_vocabulary(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "gone.txt").write_text("x\n")
    (ws_dir / "kept.txt").write_text("k\n")
    tb("turn", "begin")
    tb("touch", "gone.txt", "kept.txt", "new.txt")
    (ws_dir / "gone.txt").unlink()
    (ws_dir / "kept.txt").write_text("k2\n")
    (ws_dir / "new.txt").write_text("n\n")
    tb("turn", "end")
    changes = cli_json(tb, "changes")
    assert {c["path"]: c["status"] for c in changes["changes"]} == {
        "gone.txt": "deleted",
        "kept.txt": "modified",
        "new.txt": "created",
    }
    assert {c["kind"] for c in changes["changes"]} == {"file"}
    plan = cli_json(tb, "rewind", "--to", "turn:1", "--dry-run")["plan"]
    assert {p["path"]: p["action"] for p in plan} == {
        "gone.txt": "D",
        "kept.txt": "M",
        "new.txt": "A",
    }
