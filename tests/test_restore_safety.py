"""A restore never destroys what no snapshot keeps: ignored files in the way, files over
the size limit, and writes that land while the restore runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import takeback
from takeback.errors import RestoreError

from .conftest import CLI


def snap(tb: CLI) -> str:
    return str(json.loads(tb("snapshot", "--json").stdout)["id"])


def test_an_ignored_file_in_the_way_is_left_and_the_undo_keeps_it(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "keep.log").write_text("v1\n")
    (ws_dir / "a.txt").write_text("hi\n")
    first = snap(tb)
    (ws_dir / ".gitignore").write_text("*.log\n")
    (ws_dir / "keep.log").write_text("precious local log\n")
    snap(tb)
    out = tb("rewind", "--to", first).stdout
    assert "left as is: keep.log (out of scope (ignored) and in the way)" in out
    assert (ws_dir / "keep.log").read_text() == "precious local log\n"
    assert not (ws_dir / ".gitignore").exists()
    pre = out.split("takeback rewind --to ")[1].split(")")[0]
    tb("rewind", "--to", pre)
    assert (ws_dir / "keep.log").read_text() == "precious local log\n"
    assert (ws_dir / ".gitignore").read_text() == "*.log\n"


def test_undo_never_writes_over_a_file_that_became_ignored(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "app.log").write_text("old log\n")
    tb("turn", "begin")
    tb("touch", "app.log")
    (ws_dir / "app.log").unlink()
    tb("turn", "end")
    (ws_dir / ".gitignore").write_text("*.log\n")
    (ws_dir / "app.log").write_text("new precious log\n")
    out = tb("undo", "--force").stdout
    assert "left as is: app.log" in out
    assert (ws_dir / "app.log").read_text() == "new precious log\n"


def test_a_file_over_the_size_limit_is_left_by_a_rewind(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    snap(tb)
    (ws_dir / "dataset.bin").write_bytes(b"d" * 3000)
    (ws_dir / "a.txt").write_text("b\n")
    out = tb("rewind", "--to", "start", "--max-file-bytes", "1000").stdout
    assert "left as is: dataset.bin (over the size limit, never kept)" in out
    assert (ws_dir / "dataset.bin").read_bytes() == b"d" * 3000
    assert (ws_dir / "a.txt").read_text() == "a\n"
    dry = tb("rewind", "--to", "start", "--dry-run", "--max-file-bytes", "1000").stdout
    assert "left as is: dataset.bin" in dry


def test_a_write_during_the_rewind_is_never_overwritten(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    for name in "abc":
        (root / name).write_text(f"{name} v1\n")
    with takeback.Workspace(root, store=tmp_path / "store") as ws:
        first = ws.snapshot()
        for name in "abc":
            (root / name).write_text(f"{name} v2\n")

        def another_writer(done: int, total: int) -> None:
            if done == 1:
                (root / "c").write_text("c v3, written by someone else mid-rewind\n")

        with pytest.raises(RestoreError) as err:
            ws.rewind(first.id, on_progress=another_writer)
    assert err.value.failed == ["c"]
    assert (root / "c").read_text() == "c v3, written by someone else mid-rewind\n"
    assert (root / "a").read_text() == "a v1\n" and (root / "b").read_text() == "b v1\n"
