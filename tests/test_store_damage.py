"""A damaged store is refused, whatever the damage, and never "repaired" by opening it.

A real store is made by the real command, then damaged on disk the ways disks and people
damage files: emptied, cut short, overwritten with garbage, a table dropped, a marker
that is not a store's. Every command must then exit 2 with one line, and leave the
damaged files exactly as they were (no new history started over an old one, no empty
tables created in a file that lost them).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from takeback import Workspace
from takeback.errors import StoreCorruptError

from .conftest import CLI


def _emptied(name: str) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        (store / name).write_bytes(b"")

    return damage


def _truncated(name: str, keep: float) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        p = store / name
        os.truncate(p, int(p.stat().st_size * keep))

    return damage


def _garbage(name: str, start: int) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        p = store / name
        data = bytearray(p.read_bytes())
        data[start:] = bytes((i * 37 + 11) % 256 for i in range(len(data) - start))
        p.write_bytes(bytes(data))

    return damage


def _dropped(name: str, table: str) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        conn = sqlite3.connect(store / name)
        conn.execute(f"DROP TABLE {table}")
        conn.commit()
        conn.close()

    return damage


def _marker(text: str) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        (store / "store.json").write_text(text)

    return damage


DAMAGE = {
    "meta.db empty": _emptied("meta.db"),
    "objects.db empty": _emptied("objects.db"),
    "meta.db cut in half": _truncated("meta.db", 0.5),
    "objects.db cut in half": _truncated("objects.db", 0.5),
    "meta.db cut by a few bytes": _truncated("meta.db", 0.99),
    "meta.db all garbage": _garbage("meta.db", 0),
    "objects.db all garbage": _garbage("objects.db", 0),
    "meta.db garbage after its first page": _garbage("meta.db", 4096),
    "meta.db without snapshots": _dropped("meta.db", "snapshots"),
    "meta.db without its meta table": _dropped("meta.db", "meta"),
    "objects.db without objects": _dropped("objects.db", "objects"),
    "store.json empty": _marker(""),
    "store.json not JSON": _marker("{not json"),
    "store.json a list": _marker("[1, 2]"),
    "store.json without a root": _marker('{"format": 1}'),
    "store.json with a bad format": _marker('{"format": "one", "root": "/x"}'),
}

COMMANDS = [
    ["log"],
    ["log", "--all"],
    ["snapshot"],
    ["status"],
    ["diff"],
    ["changes"],
    ["rewind", "--to", "start"],
    ["undo"],
    ["show", "start:a.txt"],
    ["run", "--", "true"],
    ["touch", "a.txt"],
]


def _files(store: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes() for p in store.iterdir() if p.name not in ("lock", "events.jsonl")
    }


@pytest.fixture
def recorded(tb: CLI, ws_dir: Path) -> CLI:
    """A store with a session, two turns and a few snapshots."""
    (ws_dir / "a.txt").write_text("a1\n" * 500)
    tb("turn", "begin", "-m", "one")
    tb("touch", "a.txt")
    (ws_dir / "a.txt").write_text("a2\n" * 500)
    tb("turn", "end")
    tb("run", "--", "sh", "-c", "echo b > b.txt")
    for i in range(30):
        (ws_dir / f"f{i}.txt").write_text(f"file {i}\n" * (50 + i))
    tb("snapshot", "-m", "many")
    return tb


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_every_command_refuses_a_damaged_store_and_changes_nothing(
    recorded: CLI, ws_dir: Path, kind: str
) -> None:
    tb = recorded
    DAMAGE[kind](tb.store)
    before = _files(tb.store)
    for args in COMMANDS:
        proc = tb(*args, check=None)
        assert proc.returncode == 2, (kind, args, proc.stdout, proc.stderr)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("takeback: error: "), (
            kind,
            args,
            proc.stderr,
        )
        assert proc.stdout == "", (kind, args)
        assert _files(tb.store) == before, (kind, args)
    proc = tb("log", "--json", check=2)
    assert json.loads(proc.stdout)["error"] in ("StoreCorruptError", "StoreError")


@pytest.mark.quick
def test_the_library_refuses_an_emptied_meta_db_without_touching_it(
    recorded: CLI, ws_dir: Path
) -> None:
    (recorded.store / "meta.db").write_bytes(b"")
    with pytest.raises(StoreCorruptError):
        Workspace(ws_dir, store=recorded.store).log()
    with pytest.raises(StoreCorruptError):
        Workspace(ws_dir, store=recorded.store).snapshot()
    assert (recorded.store / "meta.db").read_bytes() == b""
    assert sorted(p.name for p in recorded.store.iterdir() if p.name.startswith("meta.db")) == [
        "meta.db"
    ]


def test_a_store_without_a_marker_is_made_only_by_commands_that_record(
    tb: CLI, ws_dir: Path
) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    for args in (["log"], ["status"], ["changes"], ["undo"], ["rewind", "--to", "start"]):
        tb(*args, check=2)
        assert not tb.store.exists()
    tb("snapshot")
    assert (tb.store / "store.json").exists()
    assert [s["kind"] for s in json.loads(tb("log", "--json").stdout)] == ["manual", "baseline"]
