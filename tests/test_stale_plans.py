"""An operation confirmed from a plan does that plan, or refuses and writes nothing.

The page's Confirm, ``--plan TOKEN`` on the command line and ``plan=`` in the library
carry the plan a person saw to the write: when a path it names, or the history it was
decided from, changed since, the operation refuses (``StalePlanError``, exit 3) and the
workspace is left as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from takeback import ConflictError, StalePlanError, Workspace
from takeback.integrations._ui_api import UiApi, UiConfig

from ._ui import request, serve_ui
from .conftest import CLI, files_state, write


def _three_turns(root: Path, store: Path) -> None:
    write(root, "a.txt", "a0\n")
    write(root, "notes.txt", "n0\n")
    with Workspace(root, store=store) as ws:
        s = ws.session("agent")
        s.start()
        for n in (1, 2, 3):
            with s.turn(f"turn {n}") as t, t.command("edit"):
                write(root, "a.txt", f"a{n}\n")
                if n == 2:
                    write(root, "notes.txt", "n2\n")


def test_a_plan_confirmed_unchanged_is_done_as_planned(ws_dir: Path, store_dir: Path) -> None:
    _three_turns(ws_dir, store_dir)
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        plan = s.undo(dry_run=True)
        assert plan.token
        done = s.undo(plan=plan)
        assert (done.turns, done.restored, done.token) == (plan.turns, plan.restored, plan.token)
        rewind = ws.rewind("start", session="agent", dry_run=True)
        assert rewind.token and ws.rewind("start", session="agent", plan=rewind.token).restored


def test_a_rewind_refuses_when_a_person_edited_a_path_the_plan_did_not_show(
    ws_dir: Path, store_dir: Path
) -> None:
    write(ws_dir, "a.txt", "a0\n")
    write(ws_dir, "notes.txt", "mine\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        start = ws.snapshot(session="agent")
        write(ws_dir, "a.txt", "a1\n")
        plan = ws.rewind(start.id, session="agent", dry_run=True)
        assert [i.path for i in plan.plan.items] == ["a.txt"]
        write(ws_dir, "notes.txt", "a person's edit\n")
        before, count = files_state(ws_dir), len(ws.log())
        with pytest.raises(StalePlanError) as e:
            ws.rewind(start.id, session="agent", plan=plan)
        assert e.value.exit_code == 3 and e.value.reason == "workspace"
        assert files_state(ws_dir) == before
        assert (ws_dir / "notes.txt").read_text() == "a person's edit\n"
        assert len(ws.log()) == count + 1  # the snapshot before it, and nothing else


def test_a_redo_refuses_when_another_undo_landed_since_its_plan(
    ws_dir: Path, store_dir: Path
) -> None:
    _three_turns(ws_dir, store_dir)
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        s.undo()  # turn 3
        plan = s.redo(dry_run=True)
        assert plan.turns == [3]
        s.undo()  # turn 2 lands first
        before = files_state(ws_dir)
        with pytest.raises(StalePlanError) as e:
            s.redo(plan=plan)
        assert isinstance(e.value, ConflictError) and e.value.reason == "history"
        assert files_state(ws_dir) == before
        assert [t.state for t in s.turns()] == ["done", "undone", "undone"]
        # Planned again, it does what it shows now.
        again = s.redo(dry_run=True)
        assert again.turns == [2] and s.redo(plan=again).turns == [2]


def test_the_command_line_refuses_a_stale_plan_with_exit_3(tb: CLI, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "a0\n")
    write(ws_dir, "notes.txt", "mine\n")
    tb("snapshot")
    tb("run", "--", "sh", "-c", "echo a1 > a.txt")
    plan = json.loads(tb("undo", "--dry-run", "--json").stdout)
    shown = tb("undo", "--dry-run").stdout
    assert f"--plan {plan['token']}" in shown
    write(ws_dir, "a.txt", "a person's edit\n")
    before = files_state(ws_dir)
    proc = tb("undo", "--plan", plan["token"], "--json", check=3)
    assert json.loads(proc.stdout)["error"] == "StalePlanError"
    assert files_state(ws_dir) == before
    rewind = json.loads(tb("rewind", "--to", "start", "--dry-run", "--json").stdout)
    write(ws_dir, "notes.txt", "edited again\n")
    tb("rewind", "--to", "start", "--plan", rewind["token"], check=3)
    assert (ws_dir / "notes.txt").read_text() == "edited again\n"


def test_the_page_refuses_a_stale_plan_and_plans_again(ws_dir: Path, store_dir: Path) -> None:
    _three_turns(ws_dir, store_dir)
    api = UiApi(UiConfig(str(ws_dir), str(store_dir), "agent"))
    planned = api.take_back("rewind", {"ref": "turn:3"}, dry_run=True)
    assert [i["path"] for i in planned["plan"]] == ["a.txt"]
    write(ws_dir, "notes.txt", "a person's edit\n")
    before = files_state(ws_dir)
    with pytest.raises(StalePlanError):
        api.take_back("rewind", {"ref": "turn:3", "plan": planned["token"]}, dry_run=False)
    assert files_state(ws_dir) == before
    # Over HTTP: 409, the error named, so that the page shows the new plan.
    with serve_ui(ws_dir, store_dir) as srv:
        headers = {"X-Takeback-Token": srv.token, "Content-Type": "application/json"}
        status, body = request(
            srv.port, "/api/plan", method="POST", headers=headers, body={"op": "redo"}
        )
        assert status == 200 and json.loads(body)["nothing"]
        status, body = request(
            srv.port, "/api/plan", method="POST", headers=headers, body={"op": "undo"}
        )
        undo = json.loads(body)
        assert status == 200 and undo["turns"] == [3]
        write(ws_dir, "a.txt", "another edit\n")
        status, body = request(
            srv.port,
            "/api/apply",
            method="POST",
            headers=headers,
            body={"op": "undo", "turn": 3, "plan": undo["token"]},
        )
        assert status == 409 and json.loads(body)["error"] == "StalePlanError"
    assert (ws_dir / "a.txt").read_text() == "another edit\n"
