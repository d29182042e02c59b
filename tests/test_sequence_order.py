"""What is newest is the store's sequence, never the clock: gc and "the last turn".

A clock set back (by a person, by NTP after a suspend) made gc keep an old turn whose
time looked new and remove a snapshot taken a second ago. A clock cannot be set back in
a test without owning the machine, so the library's reading of it is moved instead.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from takeback import Workspace

from .conftest import CLI, write

YEAR = 365 * 86400.0


def test_gc_after_the_clock_went_back_keeps_the_newest_turns_and_snapshots(
    ws_dir: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = time.time
    ahead = [YEAR]  # the clock runs a year ahead, then is set right
    monkeypatch.setattr(time, "time", lambda: real() + ahead[0])
    write(ws_dir, "a.txt", "0\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        s.start()
        with s.turn("one") as t, t.command("edit"):
            write(ws_dir, "a.txt", "1\n")
        ws.snapshot("old, a year ahead")
        ws.snapshot("old too")
        ahead[0] = 0.0
        for n in (2, 3):
            with s.turn(f"turn {n}") as t, t.command("edit"):
                write(ws_dir, "a.txt", f"{n}\n")
        mine = ws.snapshot("a person's, a second ago")
        ws.gc(keep_turns=2, keep_days=0)
        assert [t.n for t in s.turns()] == [2, 3]
        assert mine.id in {i.id for i in ws.log()}
        assert ws.status() == []


@pytest.mark.quick
def test_gc_keeps_the_turn_that_ended_last_and_undo_still_takes_it_back(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    write(ws_dir, "a.txt", "a0\n")
    write(ws_dir, "b.txt", "b0\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        other = ws.session("other")
        other.start()
        with other.turn("b") as t, t.command("edit b"):
            write(ws_dir, "b.txt", "b1\n")
        agent = ws.session("agent")
        agent.start()
        with agent.turn("a") as t, t.command("edit a"):
            write(ws_dir, "a.txt", "a1\n")
        agent.turn("the next prompt")  # opened, nothing written yet
    tb("gc", "--keep-turns", "1", "--keep-days", "0")
    done = json.loads(tb("undo", "--json").stdout)
    assert done["session"] == "agent" and done["turns"] == [1]
    assert (ws_dir / "a.txt").read_text() == "a0\n"
    assert (ws_dir / "b.txt").read_text() == "b1\n"
