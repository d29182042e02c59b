"""``takeback store copy FROM TO``: a whole history moves between stores, verified."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from ._postgres import PgServer, pg_server
from .conftest import CLI, state, write

__all__ = ["pg_server"]


def history(tb: CLI, ws: Path) -> None:
    """Turns, a command, an undo and a redo, binary bytes and a name that is not UTF-8."""
    write(ws, "a.txt", "one\n")
    write(ws, "bin.dat", bytes(range(256)) * 64)
    tb("turn", "begin", "-m", "first")
    tb("touch", "a.txt", os.fsdecode(b"caf\xe9.txt"))
    write(ws, "a.txt", "two\n")
    (ws / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 name\n")
    tb("turn", "end")
    tb("turn", "begin", "-m", "second")
    data = bytes(range(256)) * 64
    tb("run", "--", "python3", "-c", "open('bin.dat','ab').write(b'tail')")
    tb("turn", "end")
    assert (ws / "bin.dat").read_bytes() == data + b"tail"
    tb("undo")
    tb("redo")


def seen(tb: CLI, store: str) -> dict[str, Any]:
    """What a person can read of a history: the log, each turn's changes, the turns."""
    env = {"TAKEBACK_STORE": store}
    log = json.loads(tb("log", "--json", env=env).stdout)
    changes = [
        json.loads(tb("changes", "--turn", str(n), "--json", env=env).stdout) for n in (1, 2)
    ]
    return {"log": log, "changes": changes}


@pytest.fixture(params=["folder", pytest.param("postgres", marks=pytest.mark.postgres)])
def middle(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store a history is copied into and out of again."""
    if request.param == "folder":
        return str(tmp_path / "middle")
    server: PgServer = request.getfixturevalue("pg_server")
    return server.create_db(f"copy{os.getpid()}_{tmp_path.name[-20:]}".lower().replace("-", "_"))


def test_a_history_goes_there_and_back_whole(
    tb: CLI, ws_dir: Path, tmp_path: Path, middle: str
) -> None:
    history(tb, ws_dir)
    before = seen(tb, str(tb.store))
    now = state(ws_dir)
    out = tb("store", "copy", str(tb.store), middle).stdout
    assert "Verified: all" in out
    assert seen(tb, middle) == before
    back = tmp_path / "back"
    doc = json.loads(tb("store", "copy", middle, str(back), "--json").stdout)
    assert doc["verified"] == doc["objects"] > 0
    assert doc["rows"]["turns"] == 2 and doc["rows"]["ops"] == 2
    assert seen(tb, str(back)) == before
    # The copy works like the original: undo from it gives the state before turn 2.
    tb("undo", env={"TAKEBACK_STORE": middle})
    assert (ws_dir / "bin.dat").read_bytes() == bytes(range(256)) * 64
    tb("redo", env={"TAKEBACK_STORE": middle})
    assert state(ws_dir) == now
    # A store that holds a history already is refused, and so is a copy onto itself.
    err = tb("store", "copy", str(tb.store), str(back), check=2).stderr
    assert "already holds a history" in err
    assert "same store" in tb("store", "copy", str(tb.store), str(tb.store), check=2).stderr


def test_a_damaged_object_stops_the_copy_before_any_row(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    write(ws_dir, "f.txt", "precious\n")
    tb("snapshot")
    with closing(sqlite3.connect(tb.store / "objects.db")) as db:
        db.execute("UPDATE objects SET data=? WHERE kind='blob'", (b"\x00rot",))
        db.commit()
    target = tmp_path / "target"
    err = tb("store", "copy", str(tb.store), str(target), check=2).stderr
    assert "fails its hash check" in err or "damaged" in err
    # The target has the objects that were whole, and no row: no history at all.
    assert json.loads(tb("log", "--json", env={"TAKEBACK_STORE": str(target)}).stdout) == []
