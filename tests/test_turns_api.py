"""Turns through the public library API only (``import takeback``).

A harness records turns (one per reply), steps (one per tool batch) and commands; these
tests check the change lists it gets back, and what undo, redo, revert and unrevert do
to the folder: files the turn did not change are never touched, a file someone changed
since is a conflict that writes nothing, and every operation can itself be taken back.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import takeback

from .conftest import state, write

# -- helpers ---------------------------------------------------------------------------


def fingerprint(root: Path) -> dict[str, tuple[int, int, int, int]]:
    """(inode, mtime_ns, ctime_ns, size) of every entry: any write at all changes it."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode):
                continue  # a folder's times move when a sibling file is replaced
            out[os.path.relpath(full, root)] = (
                st.st_ino,
                st.st_mtime_ns,
                st.st_ctime_ns,
                st.st_size,
            )
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def ws(ws_dir: Path, store_dir: Path) -> Iterator[takeback.Workspace]:
    w = takeback.Workspace(ws_dir, store=store_dir)
    yield w
    w.close()


def tool_write(
    turn: takeback.Turn, root: Path, rel: str, data: bytes | str, call: str = "call"
) -> None:
    """What a harness does for a file tool: a step, a touch, then the write."""
    with turn.step(tool_call_ids=[call]) as step:
        step.touch(rel)
        write(root, rel, data)


def by_path(changes: list[takeback.Change]) -> dict[str, takeback.Change]:
    return {c.path: c for c in changes}


# -- the public surface ----------------------------------------------------------------


def test_public_names() -> None:
    for name in (
        "Workspace",
        "Session",
        "Turn",
        "Step",
        "TurnOpResult",
        "Change",
        "ConflictError",
        "PathError",
        "UsageError",
        "TakebackError",
    ):
        assert name in takeback.__all__
        assert getattr(takeback, name) is not None
    assert issubclass(takeback.ConflictError, takeback.TakebackError)
    assert takeback.ConflictError.exit_code == 3


# -- change lists ----------------------------------------------------------------------


def setup_files(root: Path) -> None:
    write(root, "src/app.py", "def main():\n    return 1\n")
    write(root, "README.md", "# demo\n")
    write(root, "old.txt", "to be deleted\n")
    write(root, "logo.bin", b"\x89PNG\0\x01\x02")
    write(root, "run.sh", "#!/bin/sh\necho hi\n", 0o644)
    for i in range(12):
        write(root, f"pkg/m{i}.py", f"x = {i}\n")


def three_turns(ws: takeback.Workspace, root: Path) -> takeback.Session:
    """The session of the issue: file tools, a command rewriting many files, and every
    kind of change (created, modified, deleted, binary, chmod-ed)."""
    session = ws.session("fix")
    with session.turn(label="one") as t1:
        tool_write(t1, root, "src/app.py", "def main():\n    return 2\n\n\nprint(main())\n", "c1")
        tool_write(t1, root, "src/new.py", "NEW = 1\n", "c2")
    with session.turn(label="two") as t2:
        with t2.command("format everything", tool_call_id="c3"):
            for i in range(12):
                write(root, f"pkg/m{i}.py", f"x = {i}  # formatted\n")
            (root / "old.txt").unlink()
    with session.turn(label="three") as t3:
        with t3.step(tool_call_ids=["c4", "c5"]) as step:
            step.touch("logo.bin")
            write(root, "logo.bin", b"\x89PNG\0\x03\x04\x05")
            step.touch("run.sh")
            (root / "run.sh").chmod(0o755)
    return session


def test_change_lists_of_three_turns(ws: takeback.Workspace, ws_dir: Path) -> None:
    setup_files(ws_dir)
    session = three_turns(ws, ws_dir)
    turns = session.turns()
    assert [t.n for t in turns] == [1, 2, 3]
    assert [t.label for t in turns] == ["one", "two", "three"]

    c1 = by_path(session.changes(1))
    assert set(c1) == {"src/app.py", "src/new.py"}
    assert c1["src/app.py"].status == "modified"
    assert (c1["src/app.py"].added, c1["src/app.py"].removed) == (4, 1)
    assert c1["src/app.py"].sha256 == sha((ws_dir / "src/app.py").read_bytes())
    assert c1["src/new.py"].status == "created"
    assert (c1["src/new.py"].added, c1["src/new.py"].removed) == (1, 0)
    assert all(c.undoable for c in c1.values())

    c2 = by_path(session.changes(2))
    assert set(c2) == {f"pkg/m{i}.py" for i in range(12)} | {"old.txt"}
    assert c2["old.txt"].status == "deleted"
    assert c2["old.txt"].sha256 is None
    assert (c2["old.txt"].added, c2["old.txt"].removed) == (0, 1)
    assert c2["pkg/m3.py"].status == "modified"
    assert (c2["pkg/m3.py"].added, c2["pkg/m3.py"].removed) == (1, 1)

    c3 = session.changes()  # default: the last turn
    assert [c.path for c in c3] == ["logo.bin", "run.sh"]
    logo, run = c3
    assert logo.status == "modified" and (logo.added, logo.removed) == (0, 0)
    assert logo.sha256 == sha(b"\x89PNG\0\x03\x04\x05")
    # A chmod alone is a modification: the file's state includes its permission bits.
    assert run.status == "modified" and (run.added, run.removed) == (0, 0)
    assert run.sha256 == sha(b"#!/bin/sh\necho hi\n")
    assert c3[0].to_json()["path"] == "logo.bin"


def test_turn_changes_property_and_end_are_the_same_list(
    ws: takeback.Workspace, ws_dir: Path
) -> None:
    session = ws.session()
    turn = session.turn("t")
    tool_write(turn, ws_dir, "a.txt", "a\n")
    ended = turn.end()
    assert [c.path for c in ended] == ["a.txt"]
    assert turn.changes == ended
    assert turn.end() == ended  # ending twice is harmless
    assert session.current_turn() is None


def test_file_back_where_it_began_is_dropped(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "same\n")
    write(ws_dir, "b.txt", "other\n")
    session = ws.session()
    with session.turn() as turn:
        tool_write(turn, ws_dir, "a.txt", "changed\n")
        tool_write(turn, ws_dir, "a.txt", "same\n")
        tool_write(turn, ws_dir, "tmp.txt", "scratch\n")
        with turn.step() as step:
            step.touch("tmp.txt")
            (ws_dir / "tmp.txt").unlink()
        tool_write(turn, ws_dir, "b.txt", "other!\n")
    assert [c.path for c in turn.changes] == ["b.txt"]


def test_first_touch_in_a_turn_keeps_the_state(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "v0\n")
    session = ws.session()
    with session.turn() as turn:
        with turn.step() as step:
            assert step.touch("a.txt") is True
            write(ws_dir, "a.txt", "v1\n")
            assert step.touch("a.txt") is False  # later touches are ignored
            write(ws_dir, "a.txt", "v2\n")
        with turn.step() as step:
            assert step.touch(ws_dir / "a.txt") is False
            write(ws_dir, "a.txt", "v3\n")
    assert session.undo().restored == ["a.txt"]
    assert (ws_dir / "a.txt").read_text() == "v0\n"
    # A new turn keeps the state afresh.
    with session.turn() as turn2, turn2.step() as step:
        assert step.touch("a.txt") is True
        write(ws_dir, "a.txt", "v4\n")
    session.undo()
    assert (ws_dir / "a.txt").read_text() == "v0\n"


def test_touch_with_text_is_the_callers_view(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "on disk\n")
    session = ws.session()
    with session.turn() as turn, turn.step() as step:
        step.touch("a.txt", text="unsaved buffer\n")
        write(ws_dir, "a.txt", "written by the tool\n")
    c = turn.changes[0]
    assert (c.added, c.removed) == (1, 1)
    session.undo()
    assert (ws_dir / "a.txt").read_text() == "unsaved buffer\n"


def test_touch_with_text_keeps_a_bom_as_it_was_on_disk(
    ws: takeback.Workspace, ws_dir: Path
) -> None:
    bom = b"\xef\xbb\xbf"
    write(ws_dir, "with.txt", bom + b"hello\n")
    write(ws_dir, "without.txt", b"hello\n")
    write(ws_dir, "kept.txt", bom + b"hello\n")
    session = ws.session()
    with session.turn() as turn, turn.step() as step:
        # An editor's buffer usually has no BOM even when the file does, and the other
        # way round; what the disk has wins.
        step.touch("with.txt", text="buffer\n")
        step.touch("without.txt", text="\ufeffbuffer\n")
        step.touch("kept.txt", text="\ufeffbuffer\n")
        for name in ("with.txt", "without.txt", "kept.txt"):
            write(ws_dir, name, "tool\n")
    session.undo()
    assert (ws_dir / "with.txt").read_bytes() == bom + b"buffer\n"
    assert (ws_dir / "without.txt").read_bytes() == b"buffer\n"
    assert (ws_dir / "kept.txt").read_bytes() == bom + b"buffer\n"


def test_touch_outside_the_root_raises_path_error(
    ws: takeback.Workspace, ws_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("x\n")
    session = ws.session()
    with session.turn() as turn, turn.step() as step:
        with pytest.raises(takeback.PathError):
            step.touch(outside)
        with pytest.raises(takeback.PathError):
            step.touch("../outside.txt")
        with pytest.raises(takeback.PathError):
            turn.touch(str(outside))
    assert turn.changes == []


def test_touch_of_out_of_scope_paths_is_not_recorded(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, ".gitignore", "*.log\n")
    write(ws_dir, "debug.log", "a\n")
    write(ws_dir, ".env", "SECRET=1\n")
    session = ws.session()
    with session.turn() as turn, turn.step() as step:
        assert step.touch("debug.log") is False
        assert step.touch(".env") is False
        write(ws_dir, "debug.log", "b\n")
        write(ws_dir, ".env", "SECRET=2\n")
    assert turn.changes == []
    assert session.undo().restored == []
    assert (ws_dir / ".env").read_text() == "SECRET=2\n"


def test_large_files_are_listed_and_not_undoable(ws_dir: Path, store_dir: Path) -> None:
    ws = takeback.Workspace(ws_dir, store=store_dir, max_file_bytes=100)
    write(ws_dir, "big.dat", b"a" * 200)
    session = ws.session()
    with session.turn() as turn, turn.step() as step:
        step.touch("big.dat")
        write(ws_dir, "big.dat", b"b" * 300)
        step.touch("new-big.dat")
        write(ws_dir, "new-big.dat", b"c" * 300)
    c = by_path(turn.changes)
    assert c["big.dat"].status == "modified" and c["big.dat"].undoable is False
    assert c["big.dat"].sha256 == sha(b"b" * 300)
    # Undoing a creation needs no kept copy: the file is removed.
    assert c["new-big.dat"].status == "created" and c["new-big.dat"].undoable is True
    result = session.undo()
    assert result.not_restored == ["big.dat"]
    assert result.restored == ["new-big.dat"]
    assert (ws_dir / "big.dat").read_bytes() == b"b" * 300
    assert not (ws_dir / "new-big.dat").exists()
    ws.close()


def test_large_file_changed_in_place_is_still_listed(ws_dir: Path, store_dir: Path) -> None:
    ws = takeback.Workspace(ws_dir, store=store_dir, max_file_bytes=100)
    write(ws_dir, "big.dat", b"a" * 200)
    write(ws_dir, "same.dat", b"s" * 200)
    session = ws.session()
    with session.turn() as turn, turn.step() as step:
        step.touch("big.dat")
        step.touch("same.dat")
        write(ws_dir, "big.dat", b"b" * 200)  # same size, same mode, other bytes
        write(ws_dir, "same.dat", b"s" * 200)  # rewritten as it was
    assert [(c.path, c.status, c.undoable) for c in turn.changes] == [
        ("big.dat", "modified", False)
    ]
    assert turn.changes[0].sha256 == sha(b"b" * 200)
    ws.close()


def test_a_write_that_fails_part_way_says_what_was_done(
    ws: takeback.Workspace, ws_dir: Path, tmp_path: Path
) -> None:
    write(ws_dir, "a.txt", "a0\n")
    session = ws.session()
    with session.turn() as turn:
        tool_write(turn, ws_dir, "a.txt", "a1\n")
        tool_write(turn, ws_dir, "d/x.txt", "x1\n")
    session.undo()
    assert not (ws_dir / "d").exists()
    # A person puts a symlink where the turn's folder was: redo must not write through it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, ws_dir / "d")
    with pytest.raises(takeback.RestoreError) as info:
        session.redo()
    assert info.value.restored == ["a.txt"] and info.value.failed == ["d/x.txt"]
    assert info.value.exit_code == 1
    assert list(elsewhere.iterdir()) == []
    assert (ws_dir / "a.txt").read_text() == "a1\n"
    assert ws.show(info.value.undo_id, "a.txt") == b"a0\n"
    # Not done: the redo can be finished once the way is clear.
    assert [t.state for t in session.turns()] == ["undone"]
    os.unlink(ws_dir / "d")
    r = session.redo()
    assert r.restored == ["d/x.txt"] and (ws_dir / "d/x.txt").read_text() == "x1\n"
    assert [t.state for t in session.turns()] == ["done"]


# -- undo and redo ---------------------------------------------------------------------


def test_undo_redo_walk_the_three_turns(ws: takeback.Workspace, ws_dir: Path) -> None:
    setup_files(ws_dir)
    start = state(ws_dir)
    session = three_turns(ws, ws_dir)
    after: list[Any] = [start, None, None, state(ws_dir)]
    r = session.undo()
    assert (r.kind, r.turns, r.nothing) == ("undo", [3], False)
    assert sorted(r.restored) == ["logo.bin", "run.sh"]
    assert (ws_dir / "logo.bin").read_bytes() == b"\x89PNG\0\x01\x02"
    assert stat.S_IMODE((ws_dir / "run.sh").stat().st_mode) == 0o644
    after[2] = state(ws_dir)
    r = session.undo()
    assert r.turns == [2] and len(r.restored) == 13
    assert (ws_dir / "old.txt").read_text() == "to be deleted\n"
    after[1] = state(ws_dir)
    r = session.undo()
    assert r.turns == [1]
    assert not (ws_dir / "src/new.py").exists()
    assert state(ws_dir) == start
    r = session.undo()
    assert r.nothing and r.turns == [] and r.restored == []

    for n in (1, 2, 3):
        r = session.redo()
        assert (r.kind, r.turns) == ("redo", [n])
        assert state(ws_dir) == after[n]
    assert state(ws_dir) == after[3]
    assert session.redo().nothing
    assert [t.state for t in session.turns()] == ["done", "done", "done"]


def test_undo_leaves_other_files_alone(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "a0\n")
    write(ws_dir, "mine.txt", "mine0\n")
    session = ws.session()
    with session.turn() as turn:
        tool_write(turn, ws_dir, "a.txt", "a1\n")
        write(ws_dir, "during.txt", "a person, during the turn\n")
    write(ws_dir, "mine.txt", "a person, after the turn\n")
    r = session.undo()
    assert r.restored == ["a.txt"]
    assert (ws_dir / "a.txt").read_text() == "a0\n"
    assert (ws_dir / "mine.txt").read_text() == "a person, after the turn\n"
    assert (ws_dir / "during.txt").read_text() == "a person, during the turn\n"


def test_conflict_writes_nothing_and_force_overwrites(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "src/app.ts", "let a = 1;\n")
    write(ws_dir, "b.txt", "b0\n")
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "b.txt", "b1\n")
    with session.turn() as t2:
        tool_write(t2, ws_dir, "src/app.ts", "let a = 2;\n")
        tool_write(t2, ws_dir, "b.txt", "b2\n")
        tool_write(t2, ws_dir, "c.txt", "c2\n")
    write(ws_dir, "src/app.ts", "let a = 3; // a person\n")
    before, prints = state(ws_dir), fingerprint(ws_dir)
    with pytest.raises(takeback.ConflictError) as info:
        session.undo()
    assert info.value.conflicts == ["src/app.ts"]
    assert "src/app.ts changed after turn 2" in str(info.value)
    assert info.value.exit_code == 3
    # Nothing at all was written: not b.txt or c.txt, which had no conflict either.
    assert state(ws_dir) == before and fingerprint(ws_dir) == prints
    assert [t.state for t in session.turns()] == ["done", "done"]
    assert session.redo().nothing

    r = session.undo(force=True)
    assert sorted(r.restored) == ["b.txt", "c.txt", "src/app.ts"]
    assert r.conflicts == ["src/app.ts"]
    assert (ws_dir / "src/app.ts").read_text() == "let a = 1;\n"
    assert (ws_dir / "b.txt").read_text() == "b1\n"
    assert not (ws_dir / "c.txt").exists()
    # The person's edit is not lost: the snapshot taken before the undo has it.
    assert r.pre is not None
    assert ws.show(r.pre, "src/app.ts") == b"let a = 3; // a person\n"


def test_chmod_by_a_person_is_a_conflict(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "a.sh", "echo\n", 0o644)
    session = ws.session()
    with session.turn() as turn:
        tool_write(turn, ws_dir, "a.sh", "echo hi\n")
    (ws_dir / "a.sh").chmod(0o755)
    with pytest.raises(takeback.ConflictError):
        session.undo()
    assert (ws_dir / "a.sh").read_text() == "echo hi\n"


def test_a_later_turn_is_a_conflict_for_undo_of_an_earlier_one(
    ws: takeback.Workspace, ws_dir: Path
) -> None:
    write(ws_dir, "a.txt", "0\n")
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "1\n")
    with session.turn() as t2:
        tool_write(t2, ws_dir, "a.txt", "2\n")
    with pytest.raises(takeback.ConflictError) as info:
        session.undo(turn=1)
    assert str(info.value).splitlines()[0] == "a.txt changed after turn 1"
    assert (ws_dir / "a.txt").read_text() == "2\n"


def test_redo_conflict_writes_nothing(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "0\n")
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "1\n")
        tool_write(t1, ws_dir, "b.txt", "b\n")
    session.undo()
    write(ws_dir, "a.txt", "a person\n")
    prints = fingerprint(ws_dir)
    with pytest.raises(takeback.ConflictError) as info:
        session.redo()
    assert info.value.conflicts == ["a.txt"]
    assert fingerprint(ws_dir) == prints
    r = session.redo(force=True)
    assert r.turns == [1] and (ws_dir / "a.txt").read_text() == "1\n"
    assert (ws_dir / "b.txt").read_text() == "b\n"


def test_new_turn_clears_redo(ws: takeback.Workspace, ws_dir: Path) -> None:
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "1\n")
    with session.turn() as t2:
        tool_write(t2, ws_dir, "b.txt", "2\n")
    session.undo()
    with session.turn() as t3:
        tool_write(t3, ws_dir, "c.txt", "3\n")
    assert session.redo().nothing
    assert not (ws_dir / "b.txt").exists()
    # Undo goes on walking back through what is still done: turn 3, then turn 1.
    assert session.undo().turns == [3]
    assert session.undo().turns == [1]
    assert session.undo().nothing
    assert state(ws_dir) == {}


def test_undo_of_one_turn_or_one_file(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "a0\n")
    write(ws_dir, "b.txt", "b0\n")
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "a1\n")
    with session.turn() as t2:
        tool_write(t2, ws_dir, "b.txt", "b1\n")
        tool_write(t2, ws_dir, "sub/c.txt", "c1\n")
    r = session.undo(turn=1)
    assert r.turns == [1] and r.restored == ["a.txt"]
    assert (ws_dir / "b.txt").read_text() == "b1\n"
    assert [t.state for t in session.turns()] == ["undone", "done"]
    with pytest.raises(takeback.UsageError):
        session.undo(turn=1)  # already undone
    with pytest.raises(takeback.UsageError):
        session.undo(turn=7)
    with pytest.raises(takeback.UsageError):
        session.undo(file="a.txt")  # the last done turn (2) did not change it

    r = session.undo(file=ws_dir / "sub" / "c.txt")
    assert r.turns == [2] and r.restored == ["sub/c.txt"]
    assert not (ws_dir / "sub").exists()  # the folder the turn made goes with the file
    assert (ws_dir / "b.txt").read_text() == "b1\n"
    r = session.redo()
    assert r.restored == ["sub/c.txt"] and (ws_dir / "sub/c.txt").read_text() == "c1\n"
    r = session.redo()
    assert r.turns == [1] and (ws_dir / "a.txt").read_text() == "a1\n"


def test_undo_and_redo_are_recorded_and_can_be_taken_back(
    ws: takeback.Workspace, ws_dir: Path
) -> None:
    write(ws_dir, "a.txt", "0\n")
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "1\n")
    write(ws_dir, "mine.txt", "a person\n")
    r = session.undo()
    kinds = {s.id: s.kind for s in ws.log()}
    assert r.pre is not None and kinds[r.pre] == "pre-undo"
    ws.rewind(to=r.pre)
    assert (ws_dir / "a.txt").read_text() == "1\n"
    assert (ws_dir / "mine.txt").read_text() == "a person\n"


def test_undo_while_a_turn_is_open_ends_it_first(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "0\n")
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "1\n")
    turn = session.turn("interrupted")
    tool_write(turn, ws_dir, "a.txt", "2\n")
    events: list[dict[str, Any]] = []
    ws.on_event(events.append)
    r = session.undo()
    assert r.turns == [2]
    assert (ws_dir / "a.txt").read_text() == "1\n"
    assert session.current_turn() is None
    assert [c.path for c in turn.changes] == ["a.txt"]
    # It was ended like any other turn: its change list was announced; then the undo
    # announced the file it wrote, and itself.
    assert [
        (e["path"], e.get("turn"), e.get("op")) for e in events if e["event"] == "file.changed"
    ] == [("a.txt", 2, None), ("a.txt", None, "undo")]
    assert [
        (e["op"], e["turns"], e["restored"]) for e in events if e["event"] == "restore.done"
    ] == [("undo", [2], 1)]
    turn.end()  # the harness's own end, later, is harmless
    assert session.undo().turns == [1]
    assert (ws_dir / "a.txt").read_text() == "0\n"


def test_commands_created_folders_links_and_deletions(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "keep/x.txt", "x\n")
    write(ws_dir, "gone.txt", "gone\n")
    os.symlink("keep/x.txt", ws_dir / "old-link")
    start = state(ws_dir)
    session = ws.session()
    with session.turn() as turn:
        with turn.command("generate", tool_call_id="c1") as cmd:
            write(ws_dir, "gen/deep/out.txt", "generated\n")
            os.symlink("gen/deep/out.txt", ws_dir / "link")
            (ws_dir / "gone.txt").unlink()
            os.unlink(ws_dir / "old-link")
            os.symlink("gone.txt", ws_dir / "old-link")
    assert sorted(cmd.changed) == [
        ("gen/deep/out.txt", "created"),
        ("gone.txt", "deleted"),
        ("link", "created"),
        ("old-link", "updated"),
    ]
    c = by_path(turn.changes)
    # The folders the command made are changes of the turn too (undo removes them).
    assert set(c) == {"gen", "gen/deep", "gen/deep/out.txt", "gone.txt", "link", "old-link"}
    assert c["gen"].kind == "folder" and c["gen"].status == "created"
    assert c["link"].status == "created" and c["old-link"].status == "modified"
    session.undo()
    assert state(ws_dir) == start
    after_redo = session.redo()
    assert sorted(after_redo.restored) == sorted(p + "/" if c[p].kind == "folder" else p for p in c)
    assert os.readlink(ws_dir / "link") == "gen/deep/out.txt"


def test_a_file_that_becomes_a_folder_and_back(ws: takeback.Workspace, ws_dir: Path) -> None:
    write(ws_dir, "config", "key = 1\n")
    write(ws_dir, "pkg/mod/a.py", "a\n")
    start = state(ws_dir)
    session = ws.session()
    with session.turn() as turn, turn.command("restructure"):
        (ws_dir / "config").unlink()
        write(ws_dir, "config/main.toml", "key = 2\n")
        shutil.rmtree(ws_dir / "pkg/mod")
        write(ws_dir, "pkg/mod", "a module now\n")
    c = by_path(turn.changes)
    assert set(c) == {"config", "config/main.toml", "pkg/mod", "pkg/mod/a.py"}
    assert c["config"].status == "deleted" and c["config/main.toml"].status == "created"
    assert c["pkg/mod"].status == "created" and c["pkg/mod/a.py"].status == "deleted"
    after = state(ws_dir)
    session.undo()
    assert state(ws_dir) == start
    session.redo()
    assert {k: v for k, v in state(ws_dir).items() if v[0] != "d"} == {
        k: v for k, v in after.items() if v[0] != "d"
    }
    assert (ws_dir / "config").is_dir()


def test_a_command_outside_a_turn_is_a_turn_of_its_own(
    ws: takeback.Workspace, ws_dir: Path
) -> None:
    session = ws.session()
    with session.command("touch a") as cmd:
        write(ws_dir, "a.txt", "a\n")
    assert cmd.changed == [("a.txt", "created")]
    assert cmd.before is not None and cmd.after is not None
    [turn] = session.turns()
    assert (turn.label, turn.state, turn.before) == ("touch a", "done", cmd.before.id)
    assert [(c.path, c.status) for c in turn.changes] == [("a.txt", "created")]
    assert session.undo().turns == [1] and not (ws_dir / "a.txt").exists()
    assert session.redo().turns == [1] and (ws_dir / "a.txt").read_text() == "a\n"


# -- revert and unrevert ---------------------------------------------------------------


def test_revert_and_unrevert_across_a_restart(ws_dir: Path, store_dir: Path) -> None:
    write(ws_dir, "a.txt", "a0\n")
    write(ws_dir, "b.txt", "b0\n")
    ws = takeback.Workspace(ws_dir, store=store_dir)
    session = ws.session("s")
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "a1\n")
    after1 = state(ws_dir)
    with session.turn() as t2:
        tool_write(t2, ws_dir, "a.txt", "a2\n")
        tool_write(t2, ws_dir, "b.txt", "b2\n")
    with session.turn() as t3:
        tool_write(t3, ws_dir, "a.txt", "a3\n")
        tool_write(t3, ws_dir, "new.txt", "n3\n")
        with t3.step() as step:
            step.touch("b.txt")
            (ws_dir / "b.txt").unlink()
    after3 = state(ws_dir)
    write(ws_dir, "mine.txt", "a person's file\n")
    ws.close()

    ws = takeback.Workspace(ws_dir, store=store_dir)
    r = ws.session("s").revert(to_turn=1)
    assert (r.kind, r.turns) == ("revert", [2, 3])
    assert sorted(r.restored) == ["a.txt", "b.txt", "new.txt"]
    assert state(ws_dir) == {**after1, "mine.txt": ("f", b"a person's file\n", 0o644)}
    assert [t.state for t in ws.session("s").turns()] == ["done", "reverted", "reverted"]
    ws.close()

    ws = takeback.Workspace(ws_dir, store=store_dir)
    r = ws.session("s").unrevert()
    assert (r.kind, r.turns) == ("unrevert", [2, 3])
    assert state(ws_dir) == {**after3, "mine.txt": ("f", b"a person's file\n", 0o644)}
    assert [t.state for t in ws.session("s").turns()] == ["done", "done", "done"]
    assert ws.session("s").unrevert().nothing
    ws.close()


def test_unrevert_brings_back_edits_made_before_the_revert(
    ws: takeback.Workspace, ws_dir: Path
) -> None:
    write(ws_dir, "a.txt", "a0\n")
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "a1\n")
    write(ws_dir, "a.txt", "a1 and a person's edit\n")
    with pytest.raises(takeback.ConflictError) as info:
        session.revert(to_turn=0)
    assert info.value.conflicts == ["a.txt"]
    assert (ws_dir / "a.txt").read_text() == "a1 and a person's edit\n"
    session.revert(to_turn=0, force=True)
    assert (ws_dir / "a.txt").read_text() == "a0\n"
    session.unrevert()
    assert (ws_dir / "a.txt").read_text() == "a1 and a person's edit\n"


def test_unrevert_conflict_and_new_turn_makes_revert_final(
    ws: takeback.Workspace, ws_dir: Path
) -> None:
    write(ws_dir, "a.txt", "a0\n")
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "a1\n")
    with session.turn() as t2:
        tool_write(t2, ws_dir, "a.txt", "a2\n")
    session.revert(to_turn=1)
    assert (ws_dir / "a.txt").read_text() == "a1\n"
    write(ws_dir, "a.txt", "a person\n")
    prints = fingerprint(ws_dir)
    with pytest.raises(takeback.ConflictError) as info:
        session.unrevert()
    assert "a.txt changed after the revert" in str(info.value)
    assert fingerprint(ws_dir) == prints
    write(ws_dir, "a.txt", "a1\n")
    with session.turn() as t3:
        tool_write(t3, ws_dir, "b.txt", "b3\n")
    assert session.unrevert().nothing
    assert (ws_dir / "a.txt").read_text() == "a1\n"
    assert [t.state for t in session.turns()] == ["done", "reverted", "done"]
    # A reverted turn is not something undo walks back to.
    assert session.undo().turns == [3]
    assert session.undo().turns == [1]


def test_revert_arguments(ws: takeback.Workspace, ws_dir: Path) -> None:
    session = ws.session()
    with session.turn() as t1:
        tool_write(t1, ws_dir, "a.txt", "a1\n")
    assert session.revert(to_turn=1).nothing
    with pytest.raises(takeback.UsageError):
        session.revert(to_turn=5)
    with pytest.raises(takeback.UsageError):
        session.revert(to_turn=-1)
    assert session.revert(to_turn=0).turns == [1]
    assert state(ws_dir) == {}
    assert session.revert(to_turn=0).nothing


# -- events ----------------------------------------------------------------------------


def read_events(store_dir: Path) -> list[dict[str, Any]]:
    path = store_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_events_reach_callbacks_and_the_log(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path
) -> None:
    write(ws_dir, "a.txt", "a0\n")
    write(ws_dir, "gone.txt", "g\n")
    seen: list[dict[str, Any]] = []
    ws.on_event(seen.append)
    session = ws.session()
    with session.turn() as turn:
        tool_write(turn, ws_dir, "a.txt", "a1\n", call="call_1")
        with turn.command("rm gone.txt", tool_call_id="call_2"):
            (ws_dir / "gone.txt").unlink()
            write(ws_dir, "made.txt", "m\n")
        with turn.step(tool_call_ids=["call_3"]) as step:
            step.touch("a.txt")  # a.txt was touched by call_1 first: two calls made it
            write(ws_dir, "a.txt", "a3\n")
    taken = [e for e in seen if e["event"] == "snapshot.taken"]
    assert taken and all(set(e) >= {"id", "files", "duration_ms"} for e in taken)
    ids = {s.id for s in ws.log()}
    assert all(e["id"] in ids for e in taken)
    changed = {e["path"]: e for e in seen if e["event"] == "file.changed"}
    # One event per file the turn changed, each with what happened to it.
    assert sorted(e["path"] for e in seen if e["event"] == "file.changed") == [
        "a.txt",
        "gone.txt",
        "made.txt",
    ]
    assert changed["gone.txt"]["change"] == "deleted"
    assert changed["gone.txt"]["tool_call_id"] == "call_2"
    assert changed["made.txt"]["change"] == "created"
    assert changed["a.txt"]["change"] == "updated"
    assert changed["a.txt"]["tool_call_id"] is None
    logged = read_events(store_dir)
    logged_taken = {e["id"] for e in logged if e["event"] == "snapshot.taken"}
    assert {e["id"] for e in taken} <= logged_taken
    logged_changed = [e for e in logged if e["event"] == "file.changed"]
    assert sorted(e["path"] for e in logged_changed) == ["a.txt", "gone.txt", "made.txt"]
    assert not [e for e in seen if e["event"] == "snapshot.failed"]

    r = session.undo()
    assert any(e["event"] == "snapshot.taken" and e["id"] == r.pre for e in seen)


def test_one_call_id_per_file_tool(ws: takeback.Workspace, ws_dir: Path) -> None:
    seen: list[dict[str, Any]] = []
    ws.on_event(seen.append)
    session = ws.session()
    with session.turn() as turn:
        tool_write(turn, ws_dir, "a.txt", "a\n", call="call_a")
        with turn.step(tool_call_ids=["x", "y"]) as step:
            step.touch("b.txt")  # a batch of two calls: which one wrote is unknown
            write(ws_dir, "b.txt", "b\n")
    ids = {e["path"]: e["tool_call_id"] for e in seen if e["event"] == "file.changed"}
    assert ids == {"a.txt": "call_a", "b.txt": None}


def test_a_failing_callback_does_not_stop_recording(ws: takeback.Workspace, ws_dir: Path) -> None:
    def boom(event: dict[str, Any]) -> None:
        raise RuntimeError("listener bug")

    ws.on_event(boom)
    session = ws.session()
    with session.turn() as turn:
        tool_write(turn, ws_dir, "a.txt", "a\n")
    assert [c.path for c in turn.changes] == ["a.txt"]


def break_the_lock(store_dir: Path) -> None:
    """A real fault: the store's lock file is a folder, so no snapshot can take the lock.

    (Tests run as root, so permission bits cannot make the store unwritable.)
    """
    lock = store_dir / "lock"
    if lock.exists():
        lock.unlink()
    lock.mkdir()


def test_failed_snapshots_never_stop_the_agent(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path
) -> None:
    write(ws_dir, "a.txt", "a0\n")
    seen: list[dict[str, Any]] = []
    ws.on_event(seen.append)
    session = ws.session()
    session.start()
    break_the_lock(store_dir)
    ran = []
    with session.turn("no snapshots") as turn:
        with turn.step(tool_call_ids=["c1"]) as step:
            ran.append("step")
            step.touch("a.txt")
            write(ws_dir, "a.txt", "a1\n")
        assert step.before is None
        with turn.command("make b", tool_call_id="c2") as cmd:
            ran.append("command")
            write(ws_dir, "b.txt", "b\n")
        assert cmd.before is None and cmd.after is None
    assert ran == ["step", "command"]
    failed = [e for e in seen if e["event"] == "snapshot.failed"]
    assert len(failed) >= 4  # the turn's, the step's, and the command's two
    assert all(e["reason"] for e in failed)
    # The file tool's touch needs no snapshot: the turn still knows what it changed.
    assert [c.path for c in turn.changes] == ["a.txt"]
    logged = read_events(store_dir)
    assert len([e for e in logged if e["event"] == "snapshot.failed"]) == len(failed)


def test_failed_baseline_never_stops_the_agent(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path
) -> None:
    seen: list[dict[str, Any]] = []
    ws.on_event(seen.append)
    ws.snapshot()  # the store exists, but this session has no baseline yet
    break_the_lock(store_dir)
    session = ws.session("new")
    ran = []
    with session.turn() as turn:
        with turn.step() as step:
            step.touch("a.txt")
            write(ws_dir, "a.txt", "a\n")
            ran.append("step")
        with turn.command("cmd"):
            ran.append("command")
    assert ran == ["step", "command"]
    assert any(e["event"] == "snapshot.failed" for e in seen)
    assert turn.changes == []


def test_root_removed_mid_way_is_a_failed_snapshot(tmp_path: Path, store_dir: Path) -> None:
    root = tmp_path / "vanishing"
    root.mkdir()
    write(root, "a.txt", "a\n")
    ws = takeback.Workspace(root, store=store_dir)
    seen: list[dict[str, Any]] = []
    ws.on_event(seen.append)
    session = ws.session()
    ran = []
    with session.turn() as turn:
        with turn.step():
            shutil.rmtree(root)
        with turn.step():
            ran.append("after")
    assert ran == ["after"]
    assert [e["event"] for e in seen if e["event"] == "snapshot.failed"] == ["snapshot.failed"]
    ws.close()


def test_a_step_begun_in_one_process_is_finished_in_another(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f.txt").write_text("before\n")
    with takeback.Workspace(root, store=tmp_path / "store") as ws:
        turn = ws.session("s").turn("t")
        step = turn.command("fmt", tool_call_id="call_9").begin()
        n = step.n
    (root / "f.txt").write_text("formatted\n")  # the command runs between the two hooks
    with takeback.Workspace(root, store=tmp_path / "store") as ws:
        session = ws.session("s")
        resumed = session.resume_step(n, tool_call_id="call_9")
        assert resumed is not None and resumed.before is not None
        resumed.finish(exit_code=0)
        assert session.resume_step(n) is None  # finished: nothing to resume
        changes = session.current_turn().end()  # type: ignore[union-attr]
    assert [(c.path, c.status) for c in changes] == [("f.txt", "modified")]


def test_a_file_whose_name_is_not_utf8_is_undone(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    name = os.fsdecode(b"caf\xe9.txt")
    (root / name).write_text("before\n")
    with takeback.Workspace(root, store=tmp_path / "store") as ws:
        session = ws.session("s")
        with session.turn() as turn:
            turn.touch(name)
            (root / name).write_text("after\n")
        assert [c.path for c in turn.changes] == [name]
        session.undo()
    assert (root / name).read_text() == "before\n"
