"""Real agent traffic: undo takes back exactly the right reply.

Each test is a fault seen with real agents (several conversations in one workspace, hooks
running in parallel, names that are not UTF-8, the agent's own take-backs), first shown
failing and kept so that it stays fixed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pydantic_core
from mcp import ClientSession

import takeback
from takeback.integrations._mcp_server import ServerConfig, _Tools

from .conftest import CLI, SRC
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


def test_plain_undo_takes_back_the_reply_that_ended_last(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a0\n")
    (ws_dir / "b.txt").write_text("b0\n")
    # A's reply, then B's reply; then A's person types the next prompt (A's snapshot is
    # the newest), and the other person asks for a plain undo of what just happened.
    tb("turn", "begin", "--session", "A")
    tb("touch", "a.txt", "--session", "A")
    (ws_dir / "a.txt").write_text("a1\n")
    tb("turn", "end", "--session", "A")
    tb("turn", "begin", "--session", "B")
    tb("touch", "b.txt", "--session", "B")
    (ws_dir / "b.txt").write_text("b1\n")
    tb("turn", "end", "--session", "B")
    tb("turn", "begin", "--session", "A")
    with takeback.Workspace(ws_dir, store=tb.store) as ws:
        assert ws.active_session() == "B"
    out = tb("undo", "--json").stdout
    doc = json.loads(out)
    assert doc["session"] == "B" and doc["turns"] == [1]
    assert (ws_dir / "b.txt").read_text() == "b0\n"
    assert (ws_dir / "a.txt").read_text() == "a1\n"
    # The person's line names the session and the turn too.
    tb("redo", "--session", "B")
    line = tb("undo").stdout.splitlines()[0]
    assert line == "Undid turn 1 of session 'B'. Files restored: 1."


def test_without_an_ended_turn_the_newest_snapshot_says_which_session(
    ws_dir: Path, store_dir: Path
) -> None:
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        ws.session("A").start()
        ws.session("B").start()
        ws.snapshot("a checkpoint", session="A")
        assert ws.active_session() == "A"


def test_parallel_touches_with_no_open_turn_open_exactly_one(tb: CLI, ws_dir: Path) -> None:
    names = [f"f{i}.txt" for i in range(6)]
    tb("turn", "begin")
    tb("turn", "end")
    env = dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)
    for round in range(3):
        for name in names:
            (ws_dir / name).write_text(f"{name} {round}\n")
        # Parallel PreToolUse hooks, each with no open turn when it starts.
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "takeback", "touch", name],
                cwd=ws_dir,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for name in names
        ]
        for p in procs:
            _out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        with takeback.Workspace(ws_dir, store=tb.store) as ws:
            turns = ws.session("default").turns()
            assert [t.n for t in turns if t.state == "open"] == [round + 2]
            assert len(turns) == round + 2
            turn = ws.session("default").current_turn()
            assert turn is not None
            for name in names:
                (ws_dir / name).write_text("changed\n")
            assert sorted(c.path for c in turn.end()) == names


def test_a_file_another_session_claimed_during_a_command_is_not_the_commands(
    ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "a.txt").write_text("a0\n")
    (ws_dir / "x.txt").write_text("x0\n")
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        a, b = ws.session("A"), ws.session("B")
        with a.turn("build") as ta:
            step = ta.command("make").begin()
            (ws_dir / "a.txt").write_text("a1\n")  # what A's command does
            with b.turn("edit") as tb_:
                tb_.touch("x.txt")  # B's file tool, while A's command runs
                (ws_dir / "x.txt").write_text("x1, B's\n")
            step.finish(0)
        assert [c.path for c in a.changes()] == ["a.txt"]
        assert [c.path for c in b.changes()] == ["x.txt"]
        a.undo()
        assert (ws_dir / "a.txt").read_text() == "a0\n"
        assert (ws_dir / "x.txt").read_text() == "x1, B's\n"


def mcp_tools(ws_dir: Path, store_dir: Path) -> _Tools:
    return _Tools(ServerConfig(root=str(ws_dir), store=str(store_dir), session="agent"))


def test_the_agents_own_rewind_and_undo_file_belong_to_its_reply(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "a.txt").write_text("a0\n")
    (ws_dir / "b.txt").write_text("b0\n")
    s = ("--session", "agent")
    tb("turn", "begin", *s)
    tb("touch", "a.txt", "b.txt", *s)
    (ws_dir / "a.txt").write_text("a1\n")
    (ws_dir / "b.txt").write_text("b1\n")
    tb("turn", "end", *s)
    # Reply 2: the agent rewinds a.txt and undoes b.txt with its own tools, then edits.
    tb("turn", "begin", *s)
    tools = mcp_tools(ws_dir, store_dir)
    tools.rewind("turn:1", ["a.txt"], False, None)
    assert (ws_dir / "a.txt").read_text() == "a0\n"
    r = tools.undo_file("b.txt", None)
    assert r["action"] == "M" and (ws_dir / "b.txt").read_text() == "b0\n"
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        open_turn = ws.session("agent").current_turn()
        assert open_turn is not None and open_turn.n == 2  # undo_file did not end it
    tb("touch", "c.txt", *s)
    (ws_dir / "c.txt").write_text("c\n")
    tb("turn", "end", *s)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        agent = ws.session("agent")
        assert [t.n for t in agent.turns()] == [1, 2]
        assert sorted(c.path for c in agent.changes(2)) == ["a.txt", "b.txt", "c.txt"]
    # Undo of reply 2 takes back what the rewind and the one-file undo wrote, too.
    tb("undo", *s)
    assert (ws_dir / "a.txt").read_text() == "a1\n"
    assert (ws_dir / "b.txt").read_text() == "b1\n"
    assert not (ws_dir / "c.txt").exists()


def test_mcp_undo_turn_inside_a_reply_belongs_to_it(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a0\n")
    s = ("--session", "agent")
    tb("turn", "begin", *s)
    tb("touch", "a.txt", *s)
    (ws_dir / "a.txt").write_text("a1\n")
    tb("turn", "end", *s)
    tb("turn", "begin", *s)
    u = mcp_tools(ws_dir, store_dir).turn_op("undo", None, False, None)
    assert u["turns"] == [1] and (ws_dir / "a.txt").read_text() == "a0\n"
    tb("turn", "end", *s)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        assert [c.path for c in ws.session("agent").changes(2)] == ["a.txt"]


def test_mcp_undo_file_keeps_a_persons_save_before_the_agents_edit(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "a.txt").write_text("a0\n")
    s = ("--session", "agent")
    tb("turn", "begin", *s)
    (ws_dir / "a.txt").write_text("a person's save\n")  # after the prompt, before the edit
    tb("touch", "a.txt", *s)
    (ws_dir / "a.txt").write_text("the agent's edit\n")
    tb("turn", "end", *s)
    r = mcp_tools(ws_dir, store_dir).undo_file("a.txt", None)
    assert r["action"] == "M" and r["ref"] == "turn:1"
    assert (ws_dir / "a.txt").read_text() == "a person's save\n"


def gen_turn(ws_dir: Path, store_dir: Path) -> takeback.Workspace:
    """A turn that creates gen/out.txt, then adds gen/ to .gitignore."""
    (ws_dir / ".gitignore").write_text("*.log\n")
    ws = takeback.Workspace(ws_dir, store=store_dir)
    with ws.session("agent").turn("generate") as turn:
        turn.touch("gen/out.txt")
        (ws_dir / "gen").mkdir()
        (ws_dir / "gen" / "out.txt").write_text("generated\n")
        turn.touch(".gitignore")
        (ws_dir / ".gitignore").write_text("*.log\ngen/\n")
    return ws


def test_undo_removes_a_file_the_turn_created_and_then_ignored(
    ws_dir: Path, store_dir: Path
) -> None:
    with gen_turn(ws_dir, store_dir) as ws:
        r = ws.session("agent").undo()
        assert (ws_dir / ".gitignore").read_text() == "*.log\n"
        assert not (ws_dir / "gen").exists(), r.left
        assert "gen/out.txt" in r.restored and r.actions["gen/out.txt"] == "A"


def test_a_created_then_ignored_file_changed_since_is_left_and_named(
    ws_dir: Path, store_dir: Path
) -> None:
    with gen_turn(ws_dir, store_dir) as ws:
        (ws_dir / "gen" / "out.txt").write_text("a person's edit\n")
        r = ws.session("agent").undo()
        assert (ws_dir / ".gitignore").read_text() == "*.log\n"
        assert (ws_dir / "gen" / "out.txt").read_text() == "a person's edit\n"
        assert "gen/out.txt" in r.left


def run_tb(cwd: Path, *args: str, store: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line, with the default store unless ``store`` is given."""
    env = {k: v for k, v in os.environ.items() if k != "TAKEBACK_STORE"}
    env["PYTHONPATH"] = SRC
    if store is not None:
        env["TAKEBACK_STORE"] = str(store)
    return subprocess.run(
        [sys.executable, "-m", "takeback", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def a_recorded_project(tmp_path: Path, store: Path | None = None) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("a0\n")
    for args in (("turn", "begin"), ("touch", "a.txt")):
        assert run_tb(proj, *args, store=store).returncode == 0
    (proj / "a.txt").write_text("a1\n")
    assert run_tb(proj, "turn", "end", store=store).returncode == 0
    return proj


def test_a_moved_workspace_is_recognized_and_adopts_its_history(tmp_path: Path) -> None:
    proj = a_recorded_project(tmp_path)
    moved = tmp_path / "renamed"
    proj.rename(moved)
    proc = run_tb(moved, "undo")
    assert proc.returncode == 2
    assert f"this folder looks like {proj}, moved: adopt its history with `takeback adopt " in (
        proc.stderr
    )
    assert (moved / "a.txt").read_text() == "a1\n"
    proc = run_tb(moved, "adopt", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["root"] == str(moved.resolve())
    assert not any(p.name.startswith("proj-") for p in Path(doc["store"]).parent.iterdir())
    proc = run_tb(moved, "undo")
    assert proc.returncode == 0, proc.stderr
    assert (moved / "a.txt").read_text() == "a0\n"
    # Nothing was written in the workspace but the undo's own file.
    assert sorted(p.name for p in moved.iterdir()) == ["a.txt"]


def test_a_moved_workspace_with_its_own_store_is_told_to_adopt_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proj = a_recorded_project(tmp_path, store)
    moved = tmp_path / "elsewhere"
    proj.rename(moved)
    proc = run_tb(moved, "undo", store=store)
    assert proc.returncode != 0
    assert f"looks like {proj}, moved: adopt its history with `takeback adopt {store}`" in (
        proc.stderr
    )
    assert run_tb(moved, "adopt", str(store), store=store).returncode == 0
    proc = run_tb(moved, "undo", store=store)
    assert proc.returncode == 0, proc.stderr
    assert (moved / "a.txt").read_text() == "a0\n"


def test_a_copy_does_not_adopt_the_history_of_a_folder_that_still_exists(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    a_recorded_project(tmp_path, store)
    copy = tmp_path / "copy"
    copy.mkdir()
    proc = run_tb(copy, "adopt", str(store), store=store)
    assert proc.returncode == 2 and "still exists" in proc.stderr


def test_a_new_folder_that_got_a_deleted_projects_inode_does_not_adopt_its_history(
    tmp_path: Path,
) -> None:
    # An inode number is reused: after a project is deleted, a new folder nearby often
    # gets it. Its device and inode are written into the store's marker here, as if the
    # kernel had handed it the old project's.
    proj = a_recorded_project(tmp_path)
    found = list((tmp_path / "home").rglob("store.json"))
    assert len(found) == 1
    store = found[0].parent
    shutil.rmtree(proj)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "mine.txt").write_text("a new project's own file\n")
    info = json.loads((store / "store.json").read_text())
    st = os.stat(fresh)
    info.update(dev=st.st_dev, ino=st.st_ino)
    (store / "store.json").write_text(json.dumps(info))
    dry = run_tb(fresh, "adopt", "--dry-run")
    assert dry.returncode == 2 and "does not look like" in dry.stderr
    assert "0 of 1 files" in dry.stderr and "--force" in dry.stderr
    refused = run_tb(fresh, "adopt")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert (store / "store.json").exists()  # nothing moved
    assert json.loads((store / "store.json").read_text())["root"] == str(proj)
    assert run_tb(fresh, "rewind", "--to", "start").returncode == 2  # no history here
    assert (fresh / "mine.txt").read_text() == "a new project's own file\n"
    forced = run_tb(fresh, "adopt", "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["alike"] is False


def test_adopt_dry_run_shows_what_it_would_attach_and_changes_nothing(tmp_path: Path) -> None:
    proj = a_recorded_project(tmp_path)
    moved = tmp_path / "renamed"
    proj.rename(moved)
    dry = run_tb(moved, "adopt", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Would adopt" in dry.stdout and "1 of 1 files" in dry.stdout
    assert run_tb(moved, "undo").returncode == 2  # still not adopted
    assert run_tb(moved, "adopt").returncode == 0
    assert run_tb(moved, "undo").returncode == 0
