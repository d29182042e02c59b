"""Take-backs planned before they are done (``dry_run``), a turn's own diff, the ops record.

What the page behind ``takeback ui`` shows before a person confirms is the library's own
plan: the same check, against the files now, writing nothing (not even a snapshot). Each
plan here is compared with what the operation then does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from takeback import ConflictError, Session, TurnOpResult, UsageError, Workspace, summary
from takeback.integrations._ui_api import UiApi, UiConfig

from ._ui import APP_0, APP_1, README_0, README_1, TEST_1, record_three_turns
from .conftest import CLI, files_state, write

Op = Callable[..., TurnOpResult]


def snapshots(ws: Workspace) -> int:
    return len(ws.log())


def plan_then_do(ws: Workspace, root: Path, op: Op, **kwargs: object) -> TurnOpResult:
    before, count = files_state(root), snapshots(ws)
    plan = op(dry_run=True, **kwargs)
    assert plan.dry_run and plan.pre is None
    assert files_state(root) == before and snapshots(ws) == count, "a plan wrote something"
    done = op(**kwargs)
    assert not done.dry_run
    assert (done.kind, done.turns, done.restored, done.actions, done.nothing) == (
        plan.kind,
        plan.turns,
        plan.restored,
        plan.actions,
        plan.nothing,
    )
    return done


def test_each_take_back_does_what_its_plan_said(ws_dir: Path, store_dir: Path) -> None:
    record_three_turns(ws_dir, store_dir)
    with Workspace(ws_dir, store=store_dir) as ws:
        s: Session = ws.session("agent")
        done = plan_then_do(ws, ws_dir, s.undo)
        assert done.turns == [3] and (ws_dir / "README.md").read_text() == README_0
        plan_then_do(ws, ws_dir, s.redo)
        assert (ws_dir / "README.md").read_text() == README_1
        done = plan_then_do(ws, ws_dir, s.undo, turn=2, file="tests/test_app.py")
        assert done.actions == {"tests/test_app.py": "A"} and not (ws_dir / "tests").exists()
        plan_then_do(ws, ws_dir, s.redo)
        done = plan_then_do(ws, ws_dir, s.revert, to_turn=1)
        assert done.turns == [2, 3]
        assert (ws_dir / "src/app.py").read_text() == APP_1
        plan_then_do(ws, ws_dir, s.unrevert)
        assert (ws_dir / "tests/test_app.py").read_text() == TEST_1
        done = plan_then_do(ws, ws_dir, s.undo_file, file="src/app.py")
        assert (ws_dir / "src/app.py").read_text() == APP_0
        # Nothing to do: planned as nothing, and done as nothing.
        plan_then_do(ws, ws_dir, s.unrevert)


def test_a_plan_names_each_conflict_and_why_and_force_plans_over_it(
    ws_dir: Path, store_dir: Path
) -> None:
    record_three_turns(ws_dir, store_dir)
    write(ws_dir, "tests/test_app.py", "# mine\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        before, count = files_state(ws_dir), snapshots(ws)
        plan = s.undo(turn=2, dry_run=True)
        assert plan.conflicts == ["tests/test_app.py"]
        assert plan.why == {"tests/test_app.py": "tests/test_app.py changed after turn 2"}
        assert plan.restored == ["src/app.py"]  # what is not in conflict
        assert summary(plan) == (
            "Would undo turn 2 of session 'agent'. Files it would restore: 1. Conflicts: 1."
        )
        assert plan.to_json()["why"] == plan.why and plan.to_json()["dry_run"] is True
        with pytest.raises(ConflictError) as refused:
            s.undo(turn=2)
        assert refused.value.conflicts == plan.conflicts
        assert files_state(ws_dir) == before
        forced = s.undo(turn=2, force=True, dry_run=True)
        assert forced.conflicts == ["tests/test_app.py"]
        assert forced.restored == ["src/app.py", "tests/test_app.py"]
        assert files_state(ws_dir) == before
        # The refused undo took its snapshot first (as every take-back does); plans none.
        assert snapshots(ws) == count + 1


def test_a_turns_diff_is_its_own_change_list(ws_dir: Path, store_dir: Path) -> None:
    record_three_turns(ws_dir, store_dir)
    write(ws_dir, "src/app.py", "# a person's edit after the turns\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        d = ws.session("agent").turn_diff(2)
        assert [(f.path, f.status, f.added, f.removed) for f in d.files] == [
            ("src/app.py", "M", 2, 0),
            ("tests/test_app.py", "A", 5, 0),
        ]
        assert len(d.parts) == 2 and b"".join(d.parts) == d.patch
        assert d.parts[0].startswith(b"diff --git a/src/app.py b/src/app.py\n")
        assert d.parts[0].endswith(b"+\n+# formatted\n")
        assert b"person" not in d.patch
        only = ws.session("agent").turn_diff(2, paths=["tests"])
        assert [f.path for f in only.files] == ["tests/test_app.py"]
        # The default is the last turn ended.
        assert [f.path for f in ws.session("agent").turn_diff().files] == ["README.md"]


def test_operations_lists_the_take_backs_done_not_those_refused(
    ws_dir: Path, store_dir: Path
) -> None:
    record_three_turns(ws_dir, store_dir)
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        assert s.operations() == []
        undo = s.undo()
        write(ws_dir, "tests/test_app.py", "# mine\n")
        with pytest.raises(ConflictError):
            s.undo(turn=2)
        s.redo(dry_run=True)
        ops = s.operations()
        assert [(o["op"], o["turns"], o["pre"], o["paths"], o["state"]) for o in ops] == [
            ("undo", [3], undo.pre, 1, "active")
        ]
        s.redo()
        assert [(o["op"], o["state"]) for o in s.operations()] == [
            ("undo", "redone"),
            ("redo", "active"),
        ]


def test_the_pages_rewind_and_step_points(ws_dir: Path, store_dir: Path) -> None:
    record_three_turns(ws_dir, store_dir)
    api = UiApi(UiConfig(root=str(ws_dir), store=str(store_dir)))
    before = files_state(ws_dir)
    one = api.take_back("undo-turn-file", {"turn": 2, "file": "tests/test_app.py"}, dry_run=True)
    assert (one["turns"], one["actions"]) == ([2], {"tests/test_app.py": "A"})
    first = api.take_back("undo-file", {"file": "src/app.py"}, dry_run=True)
    assert (first["ref"], first["actions"]) == ("turn:1", {"src/app.py": "M"})
    for op, args in (("undo-turn-file", {"file": "x"}), ("revert", {}), ("nope", {})):
        with pytest.raises(UsageError):
            api.take_back(op, args, dry_run=False)
    plan = api.take_back("rewind", {"ref": "2"}, dry_run=True)
    assert [(i["action"], i["path"]) for i in plan["plan"]] == [
        ("M", "README.md"),
        ("M", "src/app.py"),
        ("A", "tests/"),
        ("A", "tests/test_app.py"),
    ]
    assert plan["summary"] == (
        "Would rewind to before step 2: 2 restored, 2 removed, 0 made again."
    )
    assert files_state(ws_dir) == before
    done = api.take_back("rewind", {"ref": plan["target"]}, dry_run=False)
    assert done["pre_rewind"] and (ws_dir / "src/app.py").read_text() == APP_1
    assert not (ws_dir / "tests").exists() and (ws_dir / "README.md").read_text() == README_0
    tl = api.timeline(None)
    assert [(t["op"], t["pre"]) for t in tl["takebacks"]] == [("rewind", done["pre_rewind"])]
    # A command step compares its own two snapshots; a file-tool step, the next one.
    command = tl["turns"][1]["steps"][1]
    assert command["command"] and command["label"] == "ruff format src tests"
    assert api.step_points(None, command["n"]) == {
        "from": command["before"],
        "to": command["after"],
    }
    first = tl["turns"][0]["steps"][0]
    assert api.step_points(None, first["n"])["to"] == tl["turns"][1]["before"]


def test_the_commands_dry_run_prints_the_plan_and_writes_nothing(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    record_three_turns(ws_dir, store_dir)
    write(ws_dir, "tests/test_app.py", "# mine\n")
    before = files_state(ws_dir)
    # It exits as the real undo would: 3, the conflicts refuse it (after the plan).
    out = tb("undo", "--turn", "2", "--dry-run", "--session", "agent", check=3).stdout
    assert out.splitlines() == [
        "Would undo turn 2 of session 'agent'. Files it would restore: 1. Conflicts: 1.",
        "would restore:",
        "  M src/app.py",
        "  conflict: tests/test_app.py changed after turn 2",
        "dry run: nothing was written"
        " (the conflicts refuse it; --merge keeps both sides' edits, --force overwrites)",
    ]
    planned = json.loads(tb("revert", "--to-turn", "1", "--dry-run", "--json", check=3).stdout)
    assert planned["dry_run"] is True and planned["conflicts"] == ["tests/test_app.py"]
    assert planned["why"] == {"tests/test_app.py": "tests/test_app.py changed after turn 2"}
    for args in (("redo",), ("unrevert",), ("undo", "--file", "README.md")):
        tb(*args, "--dry-run")
    assert files_state(ws_dir) == before
    done = json.loads(tb("undo", "--json").stdout)
    assert set(done) == set(planned) and done["dry_run"] is False


def test_the_pages_answers_have_the_commands_keys(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    record_three_turns(ws_dir, store_dir)
    api = UiApi(UiConfig(root=str(ws_dir), store=str(store_dir)))

    def cli(*args: str) -> set[str]:
        doc = json.loads(tb(*args, "--json", "--session", "agent").stdout)
        assert doc.pop("schema") == 1
        return set(doc)

    assert set(api.take_back("undo", {}, dry_run=True)) == cli("undo", "--dry-run") | {"summary"}
    assert set(api.take_back("rewind", {"ref": "start"}, dry_run=True)) == cli(
        "rewind", "--to", "start", "--dry-run"
    ) | {"op", "session", "summary"}
    turn = api.timeline("agent")["turns"][2]
    assert set(turn) == cli("changes", "--turn", "3") | {"created_at", "steps"}
    assert set(api.take_back("undo", {}, dry_run=False)) == cli("redo") | {"summary"}
