"""A connection to the database lost in the middle of an operation (``pg_terminate_backend``).

Each ends in a consistent history and a workspace that is untouched, finished, or taken
back; a take-back that had begun writing says so (exit 1, what was written, the snapshot
that undoes it), never that it was refused before writing anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

import takeback
from takeback.errors import RestoreError, StoreError

from ._postgres import pg_server, pg_url
from .conftest import SRC, state, write

__all__ = ["pg_server", "pg_url"]

pytestmark = pytest.mark.postgres


def _kill(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(b"SELECT pg_terminate_backend(%s)", (pid,))


def _backend(ws: takeback.Workspace) -> int:
    store: Any = ws.open_store()
    return int(store.meta.pg.conn.info.backend_pid)


def _fill(ws: Path, text: str, n: int = 20) -> None:
    for i in range(n):
        write(ws, f"d{i % 3}/f{i}.txt", f"{text} {i}\n")


def _cli(ws_dir: Path, data: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TAKEBACK_STORE": url,
        "PYTHONPATH": SRC,
        "XDG_DATA_HOME": str(data),
    }
    return subprocess.run(
        [sys.executable, "-m", "takeback", *args],
        cwd=ws_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _interrupted_rewind(ws_dir: Path, data: Path, url: str) -> tuple[Any, Any, RestoreError]:
    """Record two states, then lose the connection half way through a rewind to the first."""
    _fill(ws_dir, "first")
    with takeback.Workspace(ws_dir, store=url, data_dir=str(data)) as ws:
        first = ws.snapshot("first")
    before = state(ws_dir)
    _fill(ws_dir, "second")
    after = state(ws_dir)
    with takeback.Workspace(ws_dir, store=url, data_dir=str(data)) as ws:
        ws.snapshot("second")
        pid = _backend(ws)

        def progress(done: int, total: int) -> None:
            if done == total // 2:
                _kill(url, pid)

        with pytest.raises(RestoreError) as caught:
            ws.rewind(first.id, on_progress=progress)
    assert state(ws_dir) in (before, after) or caught.value.restored
    return before, after, caught.value


def test_a_rewind_that_loses_its_connection_while_writing_says_what_it_wrote(
    pg_url: str, ws_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    _before, _after, e = _interrupted_rewind(ws_dir, data, pg_url)
    assert e.exit_code == 1 and e.restored and e.undo_id
    assert "connection" in e.message or "store" in e.message


def test_the_next_command_finishes_an_interrupted_rewind_from_the_journal(
    pg_url: str, ws_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    before, _after, _e = _interrupted_rewind(ws_dir, data, pg_url)
    proc = _cli(ws_dir, tmp_path / "xdg", pg_url, "status")
    assert "a rewind was interrupted: finish it with `" in proc.stderr, proc.stderr
    finish = proc.stderr.split("finish it with `")[1].split("`")[0]
    assert finish.startswith("takeback rewind --to ")
    done = _cli(ws_dir, tmp_path / "xdg", pg_url, *finish.split()[1:])
    assert done.returncode == 0, done.stderr
    assert state(ws_dir) == before
    assert "interrupted" not in _cli(ws_dir, tmp_path / "xdg", pg_url, "status").stderr
    assert _cli(ws_dir, tmp_path / "xdg", pg_url, "fsck").returncode == 0


def test_an_interrupted_rewind_can_be_taken_back_from_the_journal(
    pg_url: str, ws_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    _before, after, e = _interrupted_rewind(ws_dir, data, pg_url)
    proc = _cli(ws_dir, tmp_path / "xdg", pg_url, "status")
    back = proc.stderr.split("take it back with `")[1].split("`")[0]
    assert e.undo_id.startswith(back.split("--to ")[1].split()[0])
    done = _cli(ws_dir, tmp_path / "xdg", pg_url, *back.split()[1:])
    assert done.returncode == 0, done.stderr
    assert state(ws_dir) == after


def test_the_command_line_exits_1_with_the_way_back(
    pg_url: str, ws_dir: Path, tmp_path: Path
) -> None:
    """The real command, its connection ended from outside while it writes."""
    _fill(ws_dir, "first", n=400)
    data = tmp_path / "xdg"
    first = _cli(ws_dir, data, pg_url, "snapshot", "-m", "first").stdout.strip()
    _fill(ws_dir, "second", n=400)
    _cli(ws_dir, data, pg_url, "snapshot", "-m", "second")
    # The command's connection is ended when its journal appears (it is writing then).
    script = (
        "import sys, time, psycopg\n"
        "url = sys.argv[1]\n"
        "with psycopg.connect(url, autocommit=True) as c:\n"
        "    for _ in range(6000):\n"
        "        if c.execute(b'SELECT count(*) FROM takeback.journals').fetchone()[0]:\n"
        '            c.execute(b"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "\n'
        "                      b\"WHERE application_name = 'takeback'\")\n"
        "            break\n"
        "        time.sleep(0.001)\n"
    )
    killer = subprocess.Popen([sys.executable, "-c", script, pg_url])
    proc = _cli(ws_dir, data, pg_url, "rewind", "--to", first)
    killer.wait(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the rewind finished before its connection was ended")
    assert proc.returncode == 1, proc.stderr
    assert "refused before writing" not in proc.stderr
    assert "put it all back with: takeback rewind --to " in proc.stderr


def test_a_snapshot_that_loses_its_connection_leaves_a_whole_history(
    pg_url: str, ws_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    _fill(ws_dir, "first", n=60)
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=str(data)) as ws:
        ws.snapshot("first")
    _fill(ws_dir, "second", n=60)
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=str(data)) as ws:
        pid = _backend(ws)
        ws.on_event(lambda ev: None)
        store: Any = ws.open_store()
        original = store.objects.flush

        def flush_then_lose() -> None:
            _kill(pg_url, pid)
            original()

        store.objects.flush = flush_then_lose
        with pytest.raises(StoreError):
            ws.snapshot("second")
    proc = _cli(ws_dir, tmp_path / "xdg", pg_url, "fsck")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _cli(ws_dir, tmp_path / "xdg", pg_url, "snapshot", "-m", "again")
    assert proc.returncode == 0, proc.stderr
    assert _cli(ws_dir, tmp_path / "xdg", pg_url, "fsck").returncode == 0


def _turn(ws: takeback.Workspace, ws_dir: Path, text: str) -> None:
    session = ws.session("agent")
    with session.turn(label=text) as turn, turn.step() as step:
        for i in range(6):
            step.touch(f"d{i % 3}/f{i}.txt")
            write(ws_dir, f"d{i % 3}/f{i}.txt", f"{text} {i}\n")


def test_an_undo_that_loses_its_connection_before_it_is_recorded_gives_the_way_back(
    pg_url: str, ws_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    _fill(ws_dir, "first", n=6)
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=str(data)) as ws:
        _turn(ws, ws_dir, "second")
    after = state(ws_dir)
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=str(data)) as ws:
        pid = _backend(ws)
        store: Any = ws.open_store()
        original = store.clear_journal

        def clear_then_lose() -> None:
            original()
            _kill(pg_url, pid)

        store.clear_journal = clear_then_lose
        with pytest.raises(RestoreError) as caught:
            ws.session("agent").undo()
    e = caught.value
    assert e.exit_code == 1 and e.undo_id and len(e.restored) == 6
    back = _cli(ws_dir, tmp_path / "xdg", pg_url, "rewind", "--to", e.undo_id)
    assert back.returncode == 0, back.stderr
    assert state(ws_dir) == after
    assert _cli(ws_dir, tmp_path / "xdg", pg_url, "fsck").returncode == 0


@pytest.mark.parametrize("at", ["rewrite", "history", "objects", "reclaim"])
def test_gc_that_loses_its_connection_at_each_step_loses_nothing_kept(
    pg_url: str, ws_dir: Path, tmp_path: Path, at: str
) -> None:
    from takeback.ops._keep import plan
    from takeback.ops._policy import Policy

    from ._gc import build_history

    data = str(tmp_path / "data")
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=data) as ws:
        rec = build_history(ws, ws_dir, turns=6, files=12)
        doomed = set(plan(ws.open_store(), Policy(keep_turns=2, keep_days=0.0)).snapshots)
        must_keep = {s.id for s in ws.log()} - doomed
    assert doomed and must_keep
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=data) as ws:
        pid = _backend(ws)

        def pause(name: str) -> None:
            if name == at:
                _kill(pg_url, pid)

        try:
            ws.gc(keep_turns=2, keep_days=0, pause=pause)
        except StoreError:
            pass  # the step after the kill needed the database
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=data) as ws:
        check = ws.fsck(read_data=True)
        assert check.clean, (at, check.problems)
        assert must_keep <= set(rec.check(ws)), at
        ws.gc(keep_turns=2, keep_days=0)
        assert ws.fsck(read_data=True).clean
        assert {s.id for s in ws.log()} == must_keep
        rec.check(ws)


def test_a_store_copy_that_loses_its_connection_can_be_made_again(
    pg_url: str, ws_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "folder-store"
    _fill(ws_dir, "first", n=40)
    with takeback.Workspace(ws_dir, store=folder) as ws:
        ws.snapshot("first")
        _fill(ws_dir, "second", n=40)
        ws.snapshot("second")
        ids = [s.id for s in ws.log()]

    def lose_half_way(done: int, total: int) -> None:
        if done == total // 2:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(
                    b"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    b"WHERE application_name = 'takeback' AND datname = current_database()"
                )

    data = str(tmp_path / "data")
    with pytest.raises(StoreError):
        takeback.copy_history(ws_dir, folder, pg_url, data_dir=data, on_progress=lose_half_way)
    # Nothing of the history's rows was written: the database holds none of it yet.
    result = takeback.copy_history(ws_dir, folder, pg_url, data_dir=data)
    assert result.verified == result.objects
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=data) as ws:
        assert [s.id for s in ws.log()] == ids
        assert ws.fsck(read_data=True).clean
        ws.rewind(ids[-1])
    assert (ws_dir / "d0" / "f0.txt").read_text() == "first 0\n"


_KILL_WHEN_JOURNALED = (
    "import sys, time, psycopg\n"
    "with psycopg.connect(sys.argv[1], autocommit=True) as c:\n"
    "    for _ in range(20000):\n"
    "        if c.execute(b'SELECT count(*) FROM takeback.journals').fetchone()[0]:\n"
    '            c.execute(b"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "\n'
    "                      b\"WHERE application_name = 'takeback'\")\n"
    "            break\n"
    "        time.sleep(0.0005)\n"
)


def test_an_undo_cut_off_while_writing_is_finished_by_the_next_command(
    pg_url: str, ws_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "xdg"
    _fill(ws_dir, "first", n=400)
    _cli(ws_dir, data, pg_url, "snapshot")
    before = state(ws_dir)
    assert _cli(ws_dir, data, pg_url, "turn", "begin", "-m", "t").returncode == 0
    _cli(ws_dir, data, pg_url, "touch", *[f"d{i % 3}/f{i}.txt" for i in range(400)])
    _fill(ws_dir, "second", n=400)
    assert _cli(ws_dir, data, pg_url, "turn", "end").returncode == 0
    killer = subprocess.Popen([sys.executable, "-c", _KILL_WHEN_JOURNALED, pg_url])
    proc = _cli(ws_dir, data, pg_url, "undo")
    killer.wait(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the undo finished before its connection was ended")
    assert proc.returncode == 1, proc.stderr
    assert "refused before writing" not in proc.stderr
    status = _cli(ws_dir, data, pg_url, "status")
    assert "an undo was interrupted: finish it with `" in status.stderr, status.stderr
    finish = status.stderr.split("finish it with `")[1].split("`")[0]
    done = _cli(ws_dir, data, pg_url, *finish.split()[1:])
    assert done.returncode == 0, done.stderr
    assert state(ws_dir) == before
    assert "interrupted" not in _cli(ws_dir, data, pg_url, "status").stderr
    assert _cli(ws_dir, data, pg_url, "fsck").returncode == 0
