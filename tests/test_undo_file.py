"""One-file undo, the library's and every face's: back to before the session first changed it.

With turns, their change lists say when; without (an agent that only takes checkpoints and
edits with tools of its own), the session's snapshots do. What the record last says of the
file (a turn, an undo, a checkpoint that saw the agent's edit) is checked first: a
person's edit since is a conflict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import takeback
from takeback.integrations._mcp_server import ServerConfig, _Tools

from .conftest import CLI


def tools_for(ws_dir: Path, store_dir: Path) -> _Tools:
    return _Tools(ServerConfig(root=str(ws_dir), store=str(store_dir), session="agent"))


def test_undo_file_after_a_checkpoint_and_an_edit(ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "app.py").write_text("v0\n")
    tools = tools_for(ws_dir, store_dir)
    tools.checkpoint("before editing", None)
    (ws_dir / "app.py").write_text("v1, the agent's\n")  # the agent's own tool
    (ws_dir / "new.py").write_text("made\n")
    r = tools.undo_file("app.py", None)
    assert r["action"] == "M" and r["restored"] == ["app.py"]
    assert (ws_dir / "app.py").read_text() == "v0\n"
    r = tools.undo_file("new.py", None)
    assert r["action"] == "A" and not (ws_dir / "new.py").exists()


def test_a_persons_edit_after_the_checkpoint_that_saw_the_agents_is_a_conflict(
    ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "app.py").write_text("v0\n")
    tools = tools_for(ws_dir, store_dir)
    tools.checkpoint("start", None)
    (ws_dir / "app.py").write_text("v1, the agent's\n")
    tools.checkpoint("after my edit", None)
    (ws_dir / "app.py").write_text("v1, the agent's\nand a person's line\n")
    with pytest.raises(takeback.ConflictError, match="app.py changed after the snapshot"):
        tools.undo_file("app.py", None)
    assert (ws_dir / "app.py").read_text() == "v1, the agent's\nand a person's line\n"
    r = tools.undo_file("app.py", None, force=True)
    assert r["conflicts"] == ["app.py"] and (ws_dir / "app.py").read_text() == "v0\n"
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        assert ws.show(r["pre_rewind"], "app.py") == b"v1, the agent's\nand a person's line\n"


def test_cli_undo_file_goes_back_to_the_first_change_and_redo_returns(
    tb: CLI, ws_dir: Path
) -> None:
    (ws_dir / "a.txt").write_text("a0\n")
    for text in ("a1\n", "a2\n"):
        tb("turn", "begin")
        tb("touch", "a.txt")
        (ws_dir / "a.txt").write_text(text)
        tb("turn", "end")
    out = tb("undo", "--file", "a.txt").stdout
    assert out.startswith("Put back as before turn:1 in session 'default'. Files restored: 1.")
    assert (ws_dir / "a.txt").read_text() == "a0\n"
    assert tb("redo").stdout.startswith("Redid in session 'default'. Files restored: 1.")
    assert (ws_dir / "a.txt").read_text() == "a2\n"
    # With --turn, that turn's change of it: back to what turn 2 found.
    tb("undo", "--file", "a.txt", "--turn", "2")
    assert (ws_dir / "a.txt").read_text() == "a1\n"
