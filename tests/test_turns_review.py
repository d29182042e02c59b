"""Cases a review found: the earliest state before a turn wins, an interrupted command's
changes belong to its turn, redo brings back only what the undo took back, and the MCP
tools neither overwrite a person's edit nor take back the agent's own open reply."""

from __future__ import annotations

from pathlib import Path

import pytest

import takeback


def test_a_command_finished_late_keeps_the_earliest_state(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "x").write_text("x0\n")
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        session = ws.session("s")
        turn = session.turn("t")
        first = turn.command("cmd 1").begin()  # interrupted: finished only later
        (root / "x").write_text("x1\n")
        (root / "gen.out").write_text("made\n")
        second = turn.command("cmd 2").begin()
        (root / "x").write_text("x2\n")
        (root / "gen.out").write_text("made2\n")
        second.finish(exit_code=0)
        first.finish(exit_code=1)
        changes = {c.path: c.status for c in turn.end()}
        assert changes == {"x": "modified", "gen.out": "created"}
        session.undo()
    assert (root / "x").read_text() == "x0\n"
    assert not (root / "gen.out").exists()


def test_undo_of_a_turn_with_an_interrupted_command_takes_it_back_too(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a").write_text("a0\n")
    (root / "b").write_text("b0\n")
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        turn = ws.session("s").turn("t")
        turn.touch("b")
        (root / "b").write_text("b1\n")
        turn.command("long command").begin()  # the person presses Esc: no after, no end
        (root / "a").write_text("a1\n")
    with takeback.Workspace(root, store=tmp_path / "s") as ws:  # a person, later
        # The command's end was never seen: a is unconfirmed (anyone may have written
        # it while the step was open), a conflict unless forced (SPEC, "Take-backs do
        # what they showed"); forced, the undo takes the command's change back too.
        with pytest.raises(takeback.ConflictError) as refused:
            ws.session("s").undo()
        assert refused.value.conflicts == ["a"]
        result = ws.session("s").undo(force=True)
    assert sorted(result.restored) == ["a", "b"]
    assert (root / "a").read_text() == "a0\n" and (root / "b").read_text() == "b0\n"


def test_redo_brings_back_only_what_the_undo_took_back(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    for name in "ab":
        (root / name).write_text(f"{name}0\n")
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        session = ws.session("s")
        with session.turn("t") as turn:
            for name in "ab":
                turn.touch(name)
                (root / name).write_text(f"{name}1\n")
        session.undo(file="a")
        assert session.undo().restored == ["b"]
        assert session.redo().restored == ["b"]
    assert (root / "a").read_text() == "a0\n" and (root / "b").read_text() == "b1\n"


def test_mcp_undo_file_refuses_a_persons_edit_and_undo_turn_leaves_the_open_reply(
    tmp_path: Path,
) -> None:
    from takeback.integrations._mcp_server import ServerConfig, _Tools

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a").write_text("a0\n")
    store = tmp_path / "s"
    with takeback.Workspace(root, store=store) as ws:
        session = ws.session("s")
        with session.turn("edit a") as turn:
            turn.touch("a")
            (root / "a").write_text("a1\n")
        (root / "a").write_text("a1\nand a person's line\n")
    tools = _Tools(ServerConfig(root=str(root), store=str(store), session="s"))
    with pytest.raises(takeback.ConflictError, match="a changed after turn 1"):
        tools.undo_file("a", None)
    assert (root / "a").read_text() == "a1\nand a person's line\n"
    (root / "a").write_text("a1\n")
    with takeback.Workspace(root, store=store) as ws:
        ws.session("s").turn("please undo what you just did")  # the agent's own reply
    done = tools.turn_op("undo", None, False, None)
    assert done["turns"] == [1]
    assert (root / "a").read_text() == "a0\n"
    with takeback.Workspace(root, store=store) as ws:
        assert ws.session("s").current_turn() is not None  # the asking reply goes on


def test_a_write_through_a_symlink_is_recorded_on_its_target(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "target.txt").write_text("t0\n")
    (root / "link").symlink_to("target.txt")
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        session = ws.session("s")
        with session.turn("edit through the link") as turn:
            turn.touch("link")
            (root / "link").write_text("t1\n")  # writes target.txt
        assert [c.path for c in turn.changes] == ["target.txt"]
        session.undo()
    assert (root / "target.txt").read_text() == "t0\n"
    assert (root / "link").is_symlink()


def test_undo_gives_folders_it_brings_back_their_mode(tmp_path: Path) -> None:
    import shutil
    import stat

    root = tmp_path / "ws"
    (root / "tree" / "sub").mkdir(parents=True)
    (root / "tree" / "sub" / "f").write_text("f\n")
    (root / "tree" / "sub").chmod(0o700)
    (root / "tree").chmod(0o750)
    with takeback.Workspace(root, store=tmp_path / "s") as ws:
        session = ws.session("s")
        with session.turn("rm -rf tree") as turn, turn.command("rm -rf tree"):
            shutil.rmtree(root / "tree")
        session.undo()
    assert (root / "tree" / "sub" / "f").read_text() == "f\n"
    assert stat.S_IMODE((root / "tree").stat().st_mode) == 0o750
    assert stat.S_IMODE((root / "tree" / "sub").stat().st_mode) == 0o700
