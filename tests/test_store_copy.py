"""``takeback store copy FROM TO``: a whole history moves between stores, verified."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from takeback import Workspace, copy_history
from takeback._fs import SafeRoot

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


@pytest.mark.quick
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


def test_a_snapshot_taken_during_the_copy_never_arrives_without_its_objects(
    ws_dir: Path, tmp_path: Path
) -> None:
    """The copy reads its source at one moment: rows, then the objects they name."""
    write(ws_dir, "a.txt", "one\n")
    source, target = tmp_path / "source", tmp_path / "target"
    with Workspace(ws_dir, store=source) as ws:
        ws.snapshot("first")
    taken: list[str] = []

    def meanwhile(done: int, _total: int) -> None:
        if done == 1 and not taken:
            # Another process records while the objects are being copied.
            write(ws_dir, "b.txt", "made during the copy\n")
            with Workspace(ws_dir, store=source) as other:
                taken.append(other.snapshot("during").id)

    result = copy_history(ws_dir, source, target, on_progress=meanwhile)
    assert taken and result.verified == result.objects
    with Workspace(ws_dir, store=target) as ws:
        assert ws.fsck().clean, ws.fsck().problems
        for info in ws.log():
            ws.show(info.id, "a.txt")  # every snapshot copied reads back


def test_a_copy_of_a_store_with_an_interrupted_rewind_says_so_and_keeps_its_journal(
    tb: CLI, ws_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in "abc":
        write(ws_dir, f"{name}.txt", f"{name} v1\n")
    source, target = tmp_path / "source", tmp_path / "target"
    with Workspace(ws_dir, store=source) as ws:
        first = ws.snapshot().id
    for name in "abc":
        write(ws_dir, f"{name}.txt", f"{name} v2\n")
    # The process dies after its first write (a kill cannot be timed from here): the
    # journal stays in the store, as a real kill leaves it.
    real_write = SafeRoot.write_file
    calls = {"n": 0}

    def dies_after_one(self: SafeRoot, rel: str, data: bytes, mode: int) -> None:
        calls["n"] += 1
        if calls["n"] > 1:
            raise KeyboardInterrupt
        real_write(self, rel, data, mode)

    monkeypatch.setattr(SafeRoot, "write_file", dies_after_one)
    with Workspace(ws_dir, store=source) as ws, pytest.raises(KeyboardInterrupt):
        ws.rewind(first)
    monkeypatch.undo()
    env_src, env_dst = {"TAKEBACK_STORE": str(source)}, {"TAKEBACK_STORE": str(target)}
    warned = tb("status", env=env_src).stderr
    assert "rewind was interrupted" in warned
    copied = tb("store", "copy", str(source), str(target), "--root", str(ws_dir))
    assert "rewind that was interrupted" in copied.stderr
    assert tb("status", env=env_dst).stderr == warned
    assert tb("fsck", env=env_dst, check=2).stdout == tb("fsck", env=env_src, check=2).stdout
    doc = json.loads(tb("store", "copy", str(source), str(tmp_path / "again"), "--json").stdout)
    assert doc["interrupted"] == "rewind"
