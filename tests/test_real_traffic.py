"""Real agent traffic: undo takes back exactly the right reply.

Each test is a fault seen with real agents (several conversations in one workspace, hooks
running in parallel, names that are not UTF-8, the agent's own take-backs), first shown
failing and kept so that it stays fixed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pydantic_core
from mcp import ClientSession

import takeback
from takeback.integrations._mcp_server import ServerConfig, _Tools

from .conftest import CLI
from .test_mcp import Call, ok, serve

#: a file name that is not UTF-8 (Latin-1 "café.txt")
ODD = os.fsdecode(b"caf\xe9.txt")


def encodes(doc: dict[str, Any]) -> dict[str, Any]:
    """Check that a tool's result goes over the wire as the MCP SDK sends it."""
    json.dumps(doc, ensure_ascii=False).encode("utf-8")
    pydantic_core.to_json(doc)
    return doc


def odd_turn(ws_dir: Path, store_dir: Path) -> None:
    """A turn of session ``agent`` that creates a file whose name is not UTF-8."""
    (ws_dir / "a.txt").write_text("a\n")
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        with ws.session("agent").turn("odd") as turn:
            turn.touch(ODD)
            turn.touch("a.txt")
            (ws_dir / ODD).write_text("made\n")
            (ws_dir / "a.txt").write_text("b\n")


def test_mcp_tools_answer_for_a_name_that_is_not_utf8(ws_dir: Path, store_dir: Path) -> None:
    odd_turn(ws_dir, store_dir)
    tools = _Tools(ServerConfig(root=str(ws_dir), store=str(store_dir), session="agent"))
    ch = encodes(tools.changes(None, None))
    assert {c["path"] for c in ch["changes"]} == {"a.txt", "caf\\xe9.txt"}
    encodes(tools.diff("turn:1", None, None, False, None))
    u = encodes(tools.turn_op("undo", None, False, None))
    assert u["turns"] == [1] and not (ws_dir / ODD).exists()
    assert (ws_dir / "a.txt").read_text() == "a\n"
    r = encodes(tools.rewind(u["pre"], None, False, None))
    assert (ws_dir / ODD).read_text() == "made\n"
    assert r["pre_rewind"]


def test_real_mcp_server_answers_for_a_name_that_is_not_utf8(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    odd_turn(ws_dir, store_dir)

    async def body(session: ClientSession, call: Call) -> None:
        ch = ok(await call("changes"))
        assert len(ch["changes"]) == 2
        ok(await call("diff", from_ref="turn:1"))
        u = ok(await call("undo_turn"))
        assert u["turns"] == [1]
        # The write was done, and the answer says so.
        assert not (ws_dir / ODD).exists()
        ok(await call("rewind", ref=u["pre"], dry_run=False))
        assert (ws_dir / ODD).read_text() == "made\n"

    serve(ws_dir, store_dir, body, "--session", "agent")
