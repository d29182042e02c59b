"""The library's defaults are the command line's, and its events tell a harness everything.

Without a session name the library uses the session that recorded last; paths are taken
the same way everywhere (relative to the root, or absolute inside it); reading a turn's
changes does not end it; listeners hear every snapshot and every take-back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import takeback

from .conftest import write


def test_without_a_session_name_the_session_that_recorded_last(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, "a.txt", "a0\n")
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        s = ws.session("agent-7")
        with s.turn() as t:
            t.touch("a.txt")
            write(root, "a.txt", "a1\n")
        assert ws.session().name == "agent-7"
        assert ws.rewind("start").restored == ["a.txt"]  # the agent's baseline
        assert (root / "a.txt").read_text() == "a0\n"
        assert ws.resolve("turn:1").snapshot.id == t.session.turns()[0].before


def test_paths_are_taken_the_same_way_everywhere(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, "src/a.txt", "a0\n")
    write(root, "b.txt", "b0\n")
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        first = ws.snapshot().id
        write(root, "src/a.txt", "a1\n")
        write(root, "b.txt", "b1\n")
        assert ws.show(first, root / "src" / "a.txt") == b"a0\n"
        assert [f.path for f in ws.diff(first, paths=[str(root / "src")]).files] == ["src/a.txt"]
        plan = ws.rewind(first, paths=[root / "src" / "a.txt"], dry_run=True).plan
        assert [(i.action, i.path) for i in plan.items] == [("M", "src/a.txt")]
        ws.rewind(first, paths=[str(root / "src")])
    assert (root / "src/a.txt").read_text() == "a0\n" and (root / "b.txt").read_text() == "b1\n"


def test_reading_a_turns_changes_does_not_end_it(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, "a.txt", "a0\n")
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        s = ws.session()
        turn = s.turn("reply")
        turn.touch("a.txt")
        write(root, "a.txt", "a1\n")
        assert [(c.path, c.status) for c in turn.changes] == [("a.txt", "modified")]
        assert s.current_turn() is not None  # still open: the agent goes on
        turn.touch("b.txt")
        write(root, "b.txt", "b\n")
        assert [c.path for c in turn.end()] == ["a.txt", "b.txt"]
        assert s.current_turn() is None


def test_listeners_hear_every_snapshot_and_every_take_back(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write(root, "a.txt", "a0\n")
    write(root, "gone.txt", "g\n")
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        first = ws.snapshot().id
        write(root, "a.txt", "a1\n")
        (root / "gone.txt").unlink()
        write(root, "new.txt", "n\n")
        events: list[dict[str, Any]] = []
        ws.on_event(events.append)
        result = ws.rewind(first)
        after = ws.log(limit=1)[0]
    taken = [e["id"] for e in events if e["event"] == "snapshot.taken"]
    # the pre-rewind snapshot, and the one of what it wrote (status is clean after it)
    assert taken == [result.pre, after.id] and after.kind == "after-rewind"
    assert sorted(
        (e["path"], e["change"], e["op"]) for e in events if e["event"] == "file.changed"
    ) == [
        ("a.txt", "updated", "rewind"),
        ("gone.txt", "created", "rewind"),
        ("new.txt", "deleted", "rewind"),
    ]
    done = [e for e in events if e["event"] == "restore.done"]
    assert len(done) == 1 and done[0]["op"] == "rewind" and done[0]["restored"] == 3
    assert done[0]["pre"] == result.pre


def test_a_step_that_changed_many_files_sends_the_first_and_counts_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        events: list[dict[str, Any]] = []
        ws.on_event(events.append)
        with ws.session().command("a code generator"):
            for i in range(130):
                write(root, f"gen/f{i:03}.txt", f"{i}\n")
    changed = [e for e in events if e["event"] == "file.changed"]
    assert len(changed) == takeback.Workspace.MAX_FILE_EVENTS == 100
    more = [e for e in events if e["event"] == "file.changed.more"]
    assert [m["more"] for m in more] == [30]


def test_exported_types_say_what_and_where_they_are(tmp_path: Path) -> None:
    with takeback.Workspace(tmp_path, store=tmp_path / ".store") as ws:
        s = ws.session("x")
        assert repr(ws) == f"<Workspace {str(tmp_path.resolve())!r}>"
        assert repr(s) == f"<Session 'x' of {str(tmp_path.resolve())!r}>"
    for name in (
        "Workspace",
        "Session",
        "Turn",
        "Step",
        "ConflictError",
        "RewindResult",
        "TurnOpResult",
        "Change",
    ):
        assert getattr(takeback, name).__module__ == "takeback", name
