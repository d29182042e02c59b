"""A take-back that finds nothing to write says why, records no operation, and exits 0.

Seen on the command line: ``undo`` after ``rewind --to 2`` had taken turn 2 back printed
"Undid turn 2 … Files restored: 0." and recorded an operation that wrote nothing. Now it
says in one line why there is nothing to write, takes no snapshot, records no operation,
and the stack walks on (the next undo goes to the turn before; the next redo to the undo
before), as if the take-back were done: the workspace already holds what it would write.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from takeback import Workspace, summary

from .conftest import CLI, files_state


def _py(code: str) -> list[str]:
    return ["run", "--", sys.executable, "-c", code]


def _doc(out: str) -> dict[str, Any]:
    got = json.loads(out)
    assert isinstance(got, dict)
    return got


def _kinds(tb: CLI) -> list[str]:
    return [s["kind"] for s in json.loads(tb("log", "--json").stdout)]


def test_undo_after_a_rewind_took_the_turn_back_says_so(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    tb(*_py("open('a.txt', 'w').write('two\\n')"))  # turn 1
    tb(*_py("open('b.txt', 'w').write('bee\\n')"))  # turn 2
    tb("rewind", "--to", "turn:2")
    assert not (ws_dir / "b.txt").exists()
    before, kinds = files_state(ws_dir), _kinds(tb)

    planned = tb("undo", "--dry-run")
    line = "Nothing to undo: turn 2's changes are not in the workspace (a rewind took them back)."
    assert planned.stdout == line + "\n"
    done = tb("undo")  # exit 0: nothing to do is not an error
    assert done.stdout == line + "\n" and done.stderr == ""
    assert files_state(ws_dir) == before
    assert _kinds(tb) == kinds  # no snapshot taken, nothing recorded
    assert "Files restored: 0" not in done.stdout

    # The stack walks on: turn 2 counts as taken back, the next undo takes back turn 1.
    again = _doc(tb("undo", "--json").stdout)
    assert again["nothing"] is False and again["turns"] == [1]
    assert (ws_dir / "a.txt").read_text() == "one\n"
    # Redo brings back turn 1, then has nothing of turn 2 to bring back (it wrote nothing).
    assert _doc(tb("redo", "--json").stdout)["turns"] == [1]
    assert tb("redo").stdout == "Nothing to redo.\n"


def test_the_json_of_nothing_to_write_names_the_turn_and_why(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    tb(*_py("open('a.txt', 'w').write('two\\n')"))
    tb("rewind", "--to", "start")
    for args in (("undo", "--dry-run", "--json"), ("undo", "--json")):
        doc = _doc(tb(*args).stdout)
        assert doc["nothing"] is True and doc["turns"] == [1] and doc["restored"] == []
        assert doc["reason"] == (
            "turn 1's changes are not in the workspace (a rewind took them back)"
        )
        assert doc["pre"] is None and doc["token"] is None
    assert all(not k.startswith(("pre-undo", "after-undo")) for k in _kinds(tb))


def test_an_undo_a_person_already_did_by_hand_says_so(ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        s.start()
        with s.turn("edit") as turn, turn.step() as step:
            step.touch("a.txt")
            (ws_dir / "a.txt").write_text("two\n")
        (ws_dir / "a.txt").write_text("one\n")  # a person puts it back by hand
        log = len(ws.log())
        got = s.undo()
        assert got.nothing and got.turns == [1] and got.pre is None and got.restored == []
        assert got.reason == (
            "turn 1's changes are not in the workspace (its files are already as before it)"
        )
        assert summary(got) == f"Nothing to undo: {got.reason}."
        assert len(ws.log()) == log and s.operations() == []
        assert [t.state for t in s.turns()] == ["undone"]
        assert s.undo().nothing and s.undo().reason is None  # nothing left at all


def test_redo_revert_and_unrevert_with_nothing_to_write_record_nothing(
    ws_dir: Path, store_dir: Path
) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        s.start()
        for text in ("two\n", "three\n"):
            with s.turn("edit") as turn, turn.step() as step:
                step.touch("a.txt")
                (ws_dir / "a.txt").write_text(text)
        assert s.undo().turns == [2]
        (ws_dir / "a.txt").write_text("three\n")  # a person brings turn 2 back by hand
        redo = s.redo()
        assert redo.nothing and redo.turns == [2]
        assert redo.reason == (
            "turn 2's changes are already in the workspace (its files already hold what it left)"
        )
        assert [op["state"] for op in s.operations()] == ["redone"]  # walked on, no new op
        assert [t.state for t in s.turns()] == ["done", "done"]

        ws.rewind("turn:1")
        revert = s.revert(to_turn=0)
        assert revert.nothing and revert.turns == [1, 2]
        assert revert.reason == (
            "turns 1, 2's changes are not in the workspace (a rewind took them back)"
        )
        assert [t.state for t in s.turns()] == ["done", "done"] and len(s.operations()) == 1

        (ws_dir / "a.txt").write_text("three\n")
        assert s.revert(to_turn=1).turns == [2]
        (ws_dir / "a.txt").write_text("three\n")  # a person brings turn 2 back by hand
        unrevert = s.unrevert()
        assert unrevert.nothing and unrevert.turns == [2]
        assert unrevert.reason == redo.reason
        assert [op["state"] for op in s.operations()] == ["redone", "unreverted"]
        assert [t.state for t in s.turns()] == ["done", "done"]


def test_one_file_undo_with_nothing_to_write_says_so(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    tb(*_py("open('a.txt', 'w').write('two\\n')"))
    (ws_dir / "a.txt").write_text("one\n")
    got = tb("undo", "--file", "a.txt")
    assert got.stdout == "Nothing to undo-file: a.txt is already as before turn:1.\n"
    got = tb("undo", "--turn", "1", "--file", "a.txt")
    assert got.stdout == (
        "Nothing to undo: turn 1's change to a.txt is not in the workspace "
        "(it is already as before the turn).\n"
    )
    assert all("undo" not in k for k in _kinds(tb))
