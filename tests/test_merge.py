"""Take-backs that merge: ``--merge``, ``--merge=markers`` and ``--dry-run``.

A turn changed one part of a file and a person another; undo with ``--merge`` takes back
the turn's hunks and keeps the person's. Each test runs the real command (or the library,
or the real MCP server) on real folders and checks what a person would: the bytes on
disk, the exit code, what is printed, and that the snapshot taken before gives it all
back.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

import takeback
from takeback.errors import ConflictError, RestoreError, UsageError
from takeback.ops._merge import merge_text
from takeback.store import FolderStore

from .conftest import CLI, files_state, write
from .test_mcp import Call, serve
from .test_restore_engine import kill_after_first_write, killed_child, recovery, run_printed

LINES = [f"line {i}: something to keep\n" for i in range(1, 21)]
BEFORE = "".join(LINES)


def edit(text: str, n: int, new: str) -> str:
    """``text`` with its line ``n`` (1-based) replaced by ``new`` (its own line end)."""
    lines = text.splitlines(keepends=True)
    lines[n - 1] = new
    return "".join(lines)


AGENT = edit(BEFORE, 3, "line 3: the agent's rewrite\n")
PERSON = edit(AGENT, 17, "line 17: a person's fix\n")
EXPECTED = edit(BEFORE, 17, "line 17: a person's fix\n")


def agent_turn(root: Path, store: Path, files: dict[str, tuple[bytes, bytes]]) -> None:
    """Write each file's first bytes, then record one turn that writes its second."""
    for name, (first, _then) in files.items():
        write(root, name, first)
    with takeback.Workspace(root, store=store) as ws:
        with ws.session("s").turn("the agent's turn") as turn:
            for name, (_first, then) in files.items():
                turn.touch(name)
                write(root, name, then)


def setup_edit(root: Path, store: Path) -> None:
    agent_turn(root, store, {"a.py": (BEFORE.encode(), AGENT.encode())})
    write(root, "a.py", PERSON)


def as_json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(proc.stdout))


def snapshots(tb: CLI) -> int:
    return len(json.loads(tb("log", "--all", "--json").stdout))


# -- the clean case ------------------------------------------------------------------------


def test_undo_refuses_without_merge_and_says_merge_would_keep_the_edit(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    setup_edit(ws_dir, store_dir)
    proc = tb("--session", "s", "undo", check=3)
    assert "a.py changed after turn 1" in proc.stderr
    assert "--merge" in proc.stderr
    assert (ws_dir / "a.py").read_text() == PERSON


def test_dry_run_prints_the_plan_and_the_diff_the_merge_would_write(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    setup_edit(ws_dir, store_dir)
    before, count = files_state(ws_dir), snapshots(tb)
    out = tb("--session", "s", "undo", "--merge", "--dry-run").stdout
    assert out.startswith("Would undo turn 1 of session 's'.")
    assert "M a.py  (merged)" in out
    patch = out[out.index("diff --git") :]
    assert "-line 3: the agent's rewrite\n+line 3: something to keep\n" in patch
    assert "person" not in patch.replace("line 17: a person's fix", "")  # only as context
    assert files_state(ws_dir) == before and snapshots(tb) == count
    # The preview is a patch git applies, and it gives exactly what the undo then writes.
    subprocess.run(["git", "apply", "-"], cwd=ws_dir, input=patch.encode(), check=True)
    assert (ws_dir / "a.py").read_text() == EXPECTED
    write(ws_dir, "a.py", PERSON)
    doc = as_json(tb("--session", "s", "undo", "--merge", "--dry-run", "--json"))
    assert doc["dry_run"] is True and doc["pre"] is None and doc["restored"] == ["a.py"]
    assert doc["actions"] == {"a.py": "M"} and doc["merged"] == ["a.py"]
    assert doc["preview"] == patch
    assert files_state(ws_dir)["a.py"] == ("f", PERSON.encode())


@pytest.mark.quick
def test_undo_merge_keeps_the_persons_edit_and_redo_brings_the_turn_back(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    setup_edit(ws_dir, store_dir)
    count = snapshots(tb)
    proc = tb("--session", "s", "undo", "--merge")
    assert proc.stdout.startswith("Undid turn 1 of session 's'. Files restored: 1. Merged: 1.")
    assert "a.py  (merged: edits made since kept)" in proc.stdout
    assert (ws_dir / "a.py").read_text() == EXPECTED
    # the snapshot before it, as for any undo, and the one of what it wrote
    assert snapshots(tb) == count + 2
    assert tb("--session", "s", "changes", "--json").stdout.count('"undone"') == 1
    proc = tb("--session", "s", "redo")
    assert (ws_dir / "a.py").read_text() == PERSON  # the turn's hunk and the person's
    tb("--session", "s", "undo", "--merge")
    assert (ws_dir / "a.py").read_text() == EXPECTED


def test_the_snapshot_before_a_merged_undo_gives_back_the_persons_file(
    ws_dir: Path, store_dir: Path
) -> None:
    setup_edit(ws_dir, store_dir)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        result = ws.session("s").undo(merge=True)
        assert result.merged == ["a.py"] and result.pre is not None
        assert ws.show(result.pre, "a.py") == PERSON.encode()
        ws.rewind(result.pre)
    assert (ws_dir / "a.py").read_text() == PERSON


def test_redo_after_a_merged_undo_and_a_later_edit_merges_again(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    setup_edit(ws_dir, store_dir)
    tb("--session", "s", "undo", "--merge")
    later = edit(EXPECTED, 10, "line 10: edited after the undo\n")
    write(ws_dir, "a.py", later)
    proc = tb("--session", "s", "redo", check=3)
    assert "a.py changed after the undo of turn 1" in proc.stderr
    assert (ws_dir / "a.py").read_text() == later
    tb("--session", "s", "redo", "--merge")
    assert (ws_dir / "a.py").read_text() == edit(PERSON, 10, "line 10: edited after the undo\n")


def test_a_file_the_person_did_not_touch_is_undone_as_always(ws_dir: Path, store_dir: Path) -> None:
    agent_turn(
        ws_dir,
        store_dir,
        {"a.py": (BEFORE.encode(), AGENT.encode()), "b.txt": (b"b0\n", b"b1\n")},
    )
    write(ws_dir, "a.py", PERSON)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        result = ws.session("s").undo(merge=True)
    assert result.restored == ["a.py", "b.txt"] and result.merged == ["a.py"]
    assert (ws_dir / "b.txt").read_text() == "b0\n"
    assert (ws_dir / "a.py").read_text() == EXPECTED


# -- line ends, a missing final newline, a byte-order mark --------------------------------

BOM = b"\xef\xbb\xbf"


def lines_with(ends: list[bytes], *, last: bool = True, bom: bool = False) -> list[bytes]:
    out = [f"row {i} stays as it is".encode() + ends[i % len(ends)] for i in range(12)]
    if not last:
        out[-1] = out[-1].rstrip(b"\r\n")
    if bom:
        out[0] = BOM + out[0]
    return out


@pytest.mark.parametrize(
    "name, ends, last, bom",
    [
        ("crlf", [b"\r\n"], True, False),
        ("mixed", [b"\r\n", b"\n", b"\r\n", b"\n\n"], True, False),
        ("no final newline", [b"\n"], False, False),
        ("crlf, no final newline", [b"\r\n"], False, False),
        ("bom", [b"\n"], True, True),
        ("bom, crlf, no final newline", [b"\r\n"], False, True),
    ],
)
def test_line_ends_a_missing_final_newline_and_a_bom_survive_the_merge(
    ws_dir: Path, store_dir: Path, name: str, ends: list[bytes], last: bool, bom: bool
) -> None:
    base = lines_with(ends, last=last, bom=bom)
    agent = list(base)
    agent[2] = b"the agent's row\r\n" if ends[0] == b"\r\n" else b"the agent's row\n"
    person = list(agent)
    # The person edits the last row (with or without its end) and keeps the first's BOM.
    person[-1] = person[-1].replace(b"stays as it is", b"a person's edit")
    agent_turn(ws_dir, store_dir, {"f.txt": (b"".join(base), b"".join(agent))})
    write(ws_dir, "f.txt", b"".join(person))
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        session = ws.session("s")
        session.undo(merge=True)
        want = list(base)
        want[-1] = person[-1]
        assert (ws_dir / "f.txt").read_bytes() == b"".join(want), name
        session.redo()
        assert (ws_dir / "f.txt").read_bytes() == b"".join(person), name


# -- conflicting regions ------------------------------------------------------------------

CLASH = edit(AGENT, 3, "line 3: the person rewrote the agent's line\n")


def test_overlapping_edits_refuse_naming_the_file_and_the_lines(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    agent_turn(ws_dir, store_dir, {"a.py": (BEFORE.encode(), AGENT.encode())})
    write(ws_dir, "a.py", edit(CLASH, 17, "line 17: a person's fix\n"))
    before, count = files_state(ws_dir), snapshots(tb)
    proc = tb("--session", "s", "undo", "--merge", check=3)
    assert "a.py changed after turn 1: both changed line 3 " in proc.stderr
    assert "--merge=markers" in proc.stderr
    assert files_state(ws_dir) == before
    doc = as_json(tb("--session", "s", "undo", "--merge", "--json", check=3))
    assert doc["error"] == "ConflictError" and doc["conflicts"] == ["a.py"]
    assert doc["regions"] == {"a.py": [{"now": [3, 3], "record": [3, 3], "target": [3, 3]}]}
    assert files_state(ws_dir) == before
    assert snapshots(tb) == count + 2  # each refused undo took its snapshot first, as today
    # The dry run refuses the same way, and records nothing.
    tb("--session", "s", "undo", "--merge", "--dry-run", check=3)
    assert files_state(ws_dir) == before and snapshots(tb) == count + 2


def test_one_file_that_conflicts_stops_the_whole_undo(ws_dir: Path, store_dir: Path) -> None:
    agent_turn(
        ws_dir,
        store_dir,
        {"a.py": (BEFORE.encode(), AGENT.encode()), "b.py": (BEFORE.encode(), AGENT.encode())},
    )
    write(ws_dir, "a.py", PERSON)  # merges cleanly
    write(ws_dir, "b.py", CLASH)  # does not
    before = files_state(ws_dir)
    with takeback.Workspace(ws_dir, store=store_dir) as ws, pytest.raises(ConflictError) as err:
        ws.session("s").undo(merge=True)
    assert err.value.conflicts == ["b.py"]
    assert list(err.value.regions) == ["b.py"]
    assert files_state(ws_dir) == before


def test_markers_are_written_listed_and_exit_3(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    agent_turn(ws_dir, store_dir, {"a.py": (BEFORE.encode(), AGENT.encode())})
    clash = edit(CLASH, 17, "line 17: a person's fix\n")
    write(ws_dir, "a.py", clash)
    proc = tb("--session", "s", "undo", "--merge=markers", check=3)
    assert "a.py  (conflict markers)" in proc.stdout
    assert "conflict: a.py: lines 3-9 (markers written)" in proc.stdout
    text = (ws_dir / "a.py").read_text()
    assert text == "".join(
        [
            *LINES[:2],
            "<<<<<<< now\n",
            "line 3: the person rewrote the agent's line\n",
            "||||||| turn 1\n",
            "line 3: the agent's rewrite\n",
            "=======\n",
            LINES[2],
            ">>>>>>> before turn 1\n",
            *LINES[3:16],
            "line 17: a person's fix\n",
            *LINES[17:],
        ]
    )
    # Redo gives back the file as it was before the undo, markers and all taken out.
    tb("--session", "s", "redo")
    assert (ws_dir / "a.py").read_text() == clash


def test_markers_in_json(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    agent_turn(ws_dir, store_dir, {"a.py": (BEFORE.encode(), AGENT.encode())})
    write(ws_dir, "a.py", CLASH)
    doc = as_json(tb("--session", "s", "undo", "--merge=markers", "--json", check=3))
    assert doc["restored"] == ["a.py"] and doc["merged"] == ["a.py"]
    assert doc["markers"] == {
        "a.py": [{"now": [3, 3], "record": [3, 3], "target": [3, 3], "markers": [3, 9]}]
    }
    assert doc["pre"] is not None


def test_binary_deleted_and_large_files_stay_conflicts(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    agent_turn(
        ws_dir,
        store_dir,
        {
            "bin.dat": (b"\0binary v1\n", b"\0binary v2\n"),
            "gone.txt": (b"g0\n", b"g1\n"),
            "big.txt": (b"small\n", b"x\n" * 600),
        },
    )
    write(ws_dir, "bin.dat", b"\0binary, a person's\n")
    (ws_dir / "gone.txt").unlink()
    write(ws_dir, "big.txt", b"y\n" + b"x\n" * 600)
    before = files_state(ws_dir)
    proc = tb("--session", "s", "undo", "--merge", "--max-file-bytes", "1000", check=3)
    assert "bin.dat changed after turn 1 (binary: cannot be merged)" in proc.stderr
    assert "gone.txt changed after turn 1 (deleted or created on one side" in proc.stderr
    assert "big.txt changed after turn 1 (over the size limit" in proc.stderr
    assert files_state(ws_dir) == before


def test_merge_and_force_do_not_go_together(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    setup_edit(ws_dir, store_dir)
    tb("--session", "s", "undo", "--merge", "--force", check=2)
    with takeback.Workspace(ws_dir, store=store_dir) as ws, pytest.raises(UsageError):
        ws.session("s").undo(merge=True, force=True)
    tb("--session", "s", "undo", "--merge=theirs", check=2)
    assert (ws_dir / "a.py").read_text() == PERSON


# -- revert, unrevert, one-file undo -------------------------------------------------------


@pytest.mark.quick
def test_revert_and_unrevert_merge(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    setup_edit(ws_dir, store_dir)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        with ws.session("s").turn("a second turn") as turn:
            turn.touch("a.py")
            write(ws_dir, "a.py", edit(PERSON, 8, "line 8: turn 2\n"))
    write(ws_dir, "a.py", edit(edit(PERSON, 8, "line 8: turn 2\n"), 20, "line 20: person\n"))
    tb("--session", "s", "revert", "--to-turn", "0", check=3)
    out = tb("--session", "s", "revert", "--to-turn", "0", "--merge", "--dry-run").stdout
    assert out.startswith("Would revert turns 1, 2 of session 's'.")
    tb("--session", "s", "revert", "--to-turn", "0", "--merge")
    # Back to before turn 1 (the edit made between the turns is turn 2's "before", so it
    # goes too, as in any revert); the edit made after the last turn is kept.
    assert (ws_dir / "a.py").read_text() == edit(BEFORE, 20, "line 20: person\n")
    tb("--session", "s", "unrevert")
    assert (ws_dir / "a.py").read_text() == edit(
        edit(PERSON, 8, "line 8: turn 2\n"), 20, "line 20: person\n"
    )


@pytest.mark.parametrize("how", ["cli", "library"])
def test_one_file_undo_merges(tb: CLI, ws_dir: Path, store_dir: Path, how: str) -> None:
    agent_turn(
        ws_dir,
        store_dir,
        {"a.py": (BEFORE.encode(), AGENT.encode()), "b.txt": (b"b0\n", b"b1\n")},
    )
    write(ws_dir, "a.py", PERSON)
    if how == "cli":
        tb("--session", "s", "undo", "--file", "a.py", check=3)
        tb("--session", "s", "undo", "--file", "a.py", "--merge")
    else:
        with takeback.Workspace(ws_dir, store=store_dir) as ws:
            result = ws.session("s").undo_file("a.py", merge=True)
        assert result.merged == ["a.py"]
    assert (ws_dir / "a.py").read_text() == EXPECTED
    assert (ws_dir / "b.txt").read_text() == "b1\n"
    tb("--session", "s", "redo")
    assert (ws_dir / "a.py").read_text() == PERSON


# -- the MCP tools' merge argument --------------------------------------------------------


def test_mcp_undo_turn_and_redo_take_merge(ws_dir: Path, store_dir: Path) -> None:
    setup_edit(ws_dir, store_dir)

    async def body(_s: ClientSession, call: Call) -> None:
        refused = await call("undo_turn", session="s")
        assert refused.is_error
        done = await call("undo_turn", session="s", merge=True)
        assert not done.is_error
        doc = done.structured_content
        assert doc is not None and doc["merged"] == ["a.py"]
        assert (ws_dir / "a.py").read_text() == EXPECTED
        back = await call("redo", session="s")
        assert not back.is_error
        assert (ws_dir / "a.py").read_text() == PERSON
        write(ws_dir, "a.py", CLASH)
        clash = await call("undo_file", path="a.py", session="s", merge=True)
        assert clash.is_error and clash.structured_content is not None
        assert clash.structured_content["regions"]["a.py"][0]["now"] == [3, 3]
        assert (ws_dir / "a.py").read_text() == CLASH
        marked = await call("undo_file", path="a.py", session="s", merge="markers")
        assert marked.structured_content is not None
        assert "conflict markers" in marked.structured_content["message"]
        assert "<<<<<<< now\n" in (ws_dir / "a.py").read_text()

    serve(ws_dir, store_dir, body)


# -- the engine's rules hold for a merge ---------------------------------------------------


def test_a_merged_undo_killed_half_way_is_finished_by_the_printed_command(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    agent_turn(
        ws_dir,
        store_dir,
        {name: (BEFORE.encode(), AGENT.encode()) for name in ("a.py", "b.py", "c.py")},
    )
    for name in ("a.py", "b.py", "c.py"):
        write(ws_dir, name, PERSON)
    killed_child(kill_after_first_write("merge=True"), str(ws_dir), str(store_dir))
    texts = [(ws_dir / n).read_text() for n in ("a.py", "b.py", "c.py")]
    assert sorted(texts) == [EXPECTED, PERSON, PERSON]  # one merge written
    finish, _back = recovery(tb)
    assert finish[-1] == "--merge"
    run_printed(tb, finish)
    assert [(ws_dir / n).read_text() for n in ("a.py", "b.py", "c.py")] == [EXPECTED] * 3
    tb("--session", "s", "redo")
    assert [(ws_dir / n).read_text() for n in ("a.py", "b.py", "c.py")] == [PERSON] * 3


def test_an_edit_saved_while_the_merge_is_written_is_kept(
    ws_dir: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merged bytes are written only over the file they were merged from: the
    engine's check by hash just before the write sees a save that landed after the merge
    (made here at the one moment between the plan and the writes: the journal's write)."""
    setup_edit(ws_dir, store_dir)
    late = PERSON + "a line saved while the undo ran\n"
    real = FolderStore.write_journal

    def write_journal(self: FolderStore, doc: dict[str, Any]) -> None:
        real(self, doc)
        write(ws_dir, "a.py", late)

    monkeypatch.setattr(FolderStore, "write_journal", write_journal)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        with pytest.raises(RestoreError) as err:
            ws.session("s").undo(merge=True)
    assert err.value.failed == ["a.py"]
    assert err.value.left == {"a.py": "changed during the operation"}
    assert (ws_dir / "a.py").read_text() == late


def test_a_standing_revert_moves_with_merge(ws_dir: Path, store_dir: Path) -> None:
    setup_edit(ws_dir, store_dir)  # turn 1, then the person's line 17
    turn2 = edit(PERSON, 8, "line 8: turn 2\n")
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        session = ws.session("s")
        with session.turn("a second turn") as turn:
            turn.touch("a.py")
            write(ws_dir, "a.py", turn2)
        session.revert(to_turn=1)
        assert (ws_dir / "a.py").read_text() == PERSON
        write(ws_dir, "a.py", edit(PERSON, 20, "line 20: person\n"))
        with pytest.raises(ConflictError):
            session.revert(to_turn=0)
        done = session.revert(to_turn=0, merge=True)
        assert done.merged == ["a.py"]
        assert (ws_dir / "a.py").read_text() == edit(BEFORE, 20, "line 20: person\n")


def test_the_mode_merges_as_the_text_does(ws_dir: Path, store_dir: Path) -> None:
    write(ws_dir, "run.sh", BEFORE, 0o644)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        session = ws.session("s")
        with session.turn("make it runnable") as turn:
            turn.touch("run.sh")
            write(ws_dir, "run.sh", AGENT, 0o755)
        write(ws_dir, "run.sh", PERSON)  # keeps the turn's mode
        session.undo(merge=True)
        assert (ws_dir / "run.sh").read_text() == EXPECTED
        assert (ws_dir / "run.sh").stat().st_mode & 0o777 == 0o644
        session.redo()
        assert (ws_dir / "run.sh").stat().st_mode & 0o777 == 0o755


# -- the merge itself ----------------------------------------------------------------------


def test_markers_in_a_crlf_file_whose_clashing_last_line_has_no_end() -> None:
    base = b"a\r\nb\r\nlast"
    merged = merge_text(base, b"a\r\nb\r\nmine", b"a\r\nb\r\ntheirs", labels=("now", "r", "t"))
    assert merged is not None
    assert merged.data == (
        b"a\r\nb\r\n<<<<<<< now\r\nmine\r\n||||||| r\r\nlast\r\n=======\r\ntheirs\r\n>>>>>>> t\r\n"
    )
    assert [r.to_json() for r in merged.regions] == [
        {"now": [3, 3], "record": [3, 3], "target": [3, 3], "markers": [3, 9]}
    ]
    assert merge_text(b"\0bin", b"x", b"y", labels=("now", "r", "t")) is None


def test_a_region_only_one_side_deleted_and_a_change_both_made_alike_merge_cleanly() -> None:
    base = b"1\n2\n3\n4\n5\n6\n7\n"
    ours = b"1\n2\n3\n4\n5\n6\n7\nmore\n"  # appended
    theirs = b"1\n5\n6\n7\n"  # lines 2-4 gone
    merged = merge_text(base, ours, theirs, labels=("now", "r", "t"))
    assert merged is not None and merged.regions == ()
    assert merged.data == b"1\n5\n6\n7\nmore\n"
    alike = merge_text(
        base, b"1\nX\n3\n4\n5\n6\n7\n", b"1\nX\n3\n4\n5\n6\n", labels=("a", "b", "c")
    )
    assert alike is not None and alike.data == b"1\nX\n3\n4\n5\n6\n"


# -- every take-back that merges takes its snapshot first ----------------------------------


def _merging_ops(session: takeback.Session) -> dict[str, Any]:
    """Each take-back of turn 1 (whose file has a person's edit since), merging."""
    return {
        "undo": lambda: session.undo(merge=True),
        "undo --turn --file": lambda: session.undo(turn=1, file="a.py", merge=True),
        "undo_file": lambda: session.undo_file("a.py", merge=True),
        "revert": lambda: session.revert(to_turn=0, merge=True),
    }


@pytest.mark.parametrize(
    "name", ["undo", "undo --turn --file", "undo_file", "revert", "redo", "unrevert"]
)
def test_each_merging_take_back_is_recorded_with_a_snapshot_before_it(
    ws_dir: Path, store_dir: Path, name: str
) -> None:
    setup_edit(ws_dir, store_dir)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        session = ws.session("s")
        if name in ("redo", "unrevert"):
            first = session.revert(to_turn=0, merge=True) if name == "unrevert" else None
            if first is None:
                session.undo(merge=True)
            write(ws_dir, "a.py", edit(EXPECTED, 10, "line 10: after the take-back\n"))
            op = session.redo if name == "redo" else session.unrevert
            with pytest.raises(ConflictError):
                op()
            result = op(merge=True)
        else:
            result = _merging_ops(session)[name]()
        assert result.merged == ["a.py"]
        assert result.pre is not None
        kept = ws.show(result.pre, "a.py")
        after = (ws_dir / "a.py").read_bytes()
        ws.rewind(result.pre)
        assert (ws_dir / "a.py").read_bytes() == kept != after
