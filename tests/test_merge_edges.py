"""Edge cases of take-backs that merge, found by reading the merge as an attacker would.

Each test runs the real command (or the library) on real folders and checks the bytes on
disk a person would look at.
"""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import CLI, write
from .test_merge import AGENT, BEFORE, agent_turn, edit
from .test_restore_engine import kill_after_first_write, killed_child, recovery, run_printed

CLASH = edit(AGENT, 3, "line 3: a person's rewrite of the agent's line\n")


def test_an_interrupted_undo_with_markers_is_finished_without_nesting_them(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    names = ("a.py", "b.py", "c.py")
    agent_turn(ws_dir, store_dir, {n: (BEFORE.encode(), AGENT.encode()) for n in names})
    for n in names:
        write(ws_dir, n, CLASH)
    killed_child(kill_after_first_write('merge="markers"'), str(ws_dir), str(store_dir))
    texts = {n: (ws_dir / n).read_text() for n in names}
    written = [n for n in names if texts[n] != CLASH]
    assert len(written) == 1  # one file got its markers before the kill
    marked = texts[written[0]]
    assert marked.count("<<<<<<< ") == 1
    finish, _back = recovery(tb)
    assert finish[-1] == "--merge=markers"
    run_printed(tb, finish, check=3)
    # Every file holds exactly one marked block: the one that was already written keeps
    # what it got, the others get the same, nothing nested.
    assert [(ws_dir / n).read_text() for n in names] == [marked] * 3
    tb("--session", "s", "redo")
    assert [(ws_dir / n).read_text() for n in names] == [CLASH] * 3


def test_a_dry_run_names_the_regions_that_would_refuse_as_the_refusal_does(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    agent_turn(ws_dir, store_dir, {"a.py": (BEFORE.encode(), AGENT.encode())})
    write(ws_dir, "a.py", CLASH)
    plan = json.loads(
        tb("--session", "s", "undo", "--merge", "--dry-run", "--json", check=3).stdout
    )
    refusal = json.loads(tb("--session", "s", "undo", "--merge", "--json", check=3).stdout)
    assert refusal["regions"] == {"a.py": [{"now": [3, 3], "record": [3, 3], "target": [3, 3]}]}
    assert plan["conflicts"] == refusal["conflicts"] == ["a.py"]
    assert plan["regions"] == refusal["regions"]
    assert (ws_dir / "a.py").read_text() == CLASH
