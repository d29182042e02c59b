"""bisect: the first turn (or step) after which a command fails, found without touching anything."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

from takeback import Workspace

from .conftest import CLI

#: exits 1 when the workspace's counter has reached the threshold given, else 0
CHECK = "import sys; sys.exit(int(open('counter').read()) >= int(sys.argv[1]))"


def _history(ws_dir: Path, store_dir: Path, turns: int) -> Workspace:
    """A session of ``turns`` turns; turn N writes N into ``counter`` through a command."""
    (ws_dir / "counter").write_text("0")
    (ws_dir / "notes.md").write_text("a person's notes\n")
    ws = Workspace(ws_dir, store=store_dir)
    session = ws.session("agent")
    for n in range(1, turns + 1):
        with session.turn(label=f"reply {n}") as turn, turn.command(f"bump to {n}"):
            (ws_dir / "counter").write_text(str(n))
            (ws_dir / "src").mkdir(exist_ok=True)
            (ws_dir / "src" / f"m{n}.py").write_text(f"x = {n}\n")
    return ws


def _state(root: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = (Path(p).read_bytes(), os.lstat(p).st_mtime_ns)
    return out


@pytest.mark.parametrize(("turns", "first_bad"), [(5, 3), (20, 1), (20, 20), (100, 67)])
def test_it_finds_the_first_bad_turn_in_few_runs(
    ws_dir: Path, store_dir: Path, turns: int, first_bad: int
) -> None:
    ws = _history(ws_dir, store_dir, turns)
    try:
        before = _state(ws_dir)
        meta = ws.open_store().meta
        rows_before = (len(meta.snapshot_rows()), len(meta.all_ops()), len(meta.all_turns()))
        result = ws.bisect(
            [sys.executable, "-c", CHECK, str(first_bad)], session="agent", by="turn"
        )
        assert result.first_bad is not None
        assert (result.first_bad.turn, result.first_bad.label) == (first_bad, f"reply {first_bad}")
        assert len(result.runs) <= math.ceil(math.log2(turns + 1)) + 1
        assert _state(ws_dir) == before  # not a byte, not an mtime
        meta = ws.open_store().meta
        assert (len(meta.snapshot_rows()), len(meta.all_ops()), len(meta.all_turns())) == (
            rows_before
        )
        assert not [p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob("takeback-bisect-*")]
    finally:
        ws.close()


def test_no_bad_turn_and_a_skipped_point(ws_dir: Path, store_dir: Path) -> None:
    ws = _history(ws_dir, store_dir, 8)
    try:
        ok = ws.bisect([sys.executable, "-c", "pass"], session="agent")
        assert ok.first_bad is None and ok.points == 8 and not ok.undecided
        # Turn 6's state cannot be tested (exit 125), and the first bad turn is 4: the
        # skip is stepped around, and the answer is exact.
        skip6 = (
            "import sys; n = int(open('counter').read()); sys.exit(125 if n == 6 else int(n >= 4))"
        )
        got = ws.bisect([sys.executable, "-c", skip6], session="agent")
        assert got.first_bad is not None and got.first_bad.turn == 4
        # Turn 4 itself untestable, first bad 5: it is 4 or 5, and said so.
        skip4 = (
            "import sys; n = int(open('counter').read()); sys.exit(125 if n == 4 else int(n >= 5))"
        )
        got = ws.bisect([sys.executable, "-c", skip4], session="agent")
        assert got.first_bad is None and [p.turn for p in got.undecided] == [4, 5]
        assert [r.verdict for r in got.runs if r.point.turn == 4] == ["skip"]
        # Every point around the answer skipped: a range, not a guess.
        skip_all = "import sys; n = int(open('counter').read()); sys.exit(125 if n >= 3 else 0)"
        vague = ws.bisect([sys.executable, "-c", skip_all], session="agent")
        assert vague.first_bad is None and [p.turn for p in vague.undecided] == [3, 4, 5, 6, 7, 8]
    finally:
        ws.close()


def test_by_step_and_from_a_good_ref(ws_dir: Path, store_dir: Path) -> None:
    ws = _history(ws_dir, store_dir, 6)
    try:
        got = ws.bisect(
            [sys.executable, "-c", CHECK, "5"], session="agent", by="step", good="turn:3"
        )
        assert got.first_bad is not None and (got.first_bad.step, got.first_bad.turn) == (5, 5)
        assert all(r.point.turn is not None and r.point.turn >= 3 for r in got.runs)
    finally:
        ws.close()


def test_the_command_line(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    _history(ws_dir, store_dir, 10).close()
    check = [sys.executable, "-c", CHECK, "7"]
    out = tb("bisect", "--session", "agent", "--", *check)
    assert "First bad turn: 7 (reply 7)" in out.stdout
    assert "takeback undo --turn 7 --merge" in out.stdout
    assert out.stderr.count("\n") == len([ln for ln in out.stderr.splitlines() if ": " in ln])
    doc = json.loads(tb("bisect", "--session", "agent", "--json", "--", *check).stdout)
    assert doc["first_bad"]["turn"] == 7 and doc["first_bad"]["session"] == "agent"
    assert set(doc["first_bad"]) == {"session", "turn", "step", "id", "label"}
    assert all({"exit_code", "turn", "verdict"} <= set(r) for r in doc["runs"])
    none = tb("bisect", "--session", "agent", "--", sys.executable, "-c", "pass", check=1)
    assert "No bad turn found" in none.stdout
    bad_ref = tb("bisect", "--session", "agent", "--good", "nope", "--", "true", check=2)
    assert bad_ref.stderr.count("\n") == 1
    assert tb("bisect", "--session", "agent", check=2).stderr.count("\n") == 1
