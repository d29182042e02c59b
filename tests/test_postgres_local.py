"""What a PostgreSQL workspace keeps on this machine, and for which history.

The scan cache (and the hook's records, the baseline's lock, its log) describe one
history's view of the files: two histories of one folder (two keys, two databases, a
database made again at the same address) never share them, and ``purge --all`` removes
them with the history.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

import psycopg
import pytest

from ._postgres import PgServer, pg_server, pg_url
from .conftest import CLI, write

__all__ = ["pg_server", "pg_url"]

pytestmark = pytest.mark.postgres


def _fill(ws: Path) -> None:
    for d in range(3):
        for f in range(4):
            write(ws, f"d{d}/f{f}.txt", f"{d} {f}\n")


def _history_is_whole(tb: CLI, store: str) -> None:
    """fsck passes and the history's first snapshot can be rewound to."""
    env = {"TAKEBACK_STORE": store}
    proc = tb("fsck", env=env, check=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tb("rewind", "--to", "start", env=env)


def test_one_folder_recorded_under_two_keys_keeps_two_whole_histories(
    tb: CLI, ws_dir: Path, pg_url: str
) -> None:
    _fill(ws_dir)
    tb("snapshot", env={"TAKEBACK_STORE": f"{pg_url}#one"})
    write(ws_dir, "d0/f0.txt", "changed\n")
    tb("snapshot", env={"TAKEBACK_STORE": f"{pg_url}#two"})
    _history_is_whole(tb, f"{pg_url}#two")
    _history_is_whole(tb, f"{pg_url}#one")


def test_one_folder_recorded_in_two_databases_keeps_two_whole_histories(
    tb: CLI, ws_dir: Path, pg_server: PgServer
) -> None:
    one = pg_server.create_db(f"two_dbs_a_{os.getpid()}")
    two = pg_server.create_db(f"two_dbs_b_{os.getpid()}")
    _fill(ws_dir)
    tb("snapshot", env={"TAKEBACK_STORE": one})
    write(ws_dir, "d1/f1.txt", "changed\n")
    tb("snapshot", env={"TAKEBACK_STORE": two})
    _history_is_whole(tb, two)
    _history_is_whole(tb, one)


def test_a_database_made_again_at_the_same_address_is_another_history(
    tb: CLI, ws_dir: Path, pg_server: PgServer
) -> None:
    name = f"again_{os.getpid()}"
    url = pg_server.create_db(name)
    _fill(ws_dir)
    tb("snapshot", env={"TAKEBACK_STORE": url})
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}"'.encode())
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    write(ws_dir, "d2/f2.txt", "changed\n")
    tb("snapshot", env={"TAKEBACK_STORE": url})
    write(ws_dir, "d1/f2.txt", "changed\n")
    tb("snapshot", env={"TAKEBACK_STORE": url})
    _history_is_whole(tb, url)


def _wait_for_baseline(data: Path) -> None:
    """Wait until no detached process holds a baseline lock under ``data``."""
    deadline = time.monotonic() + 60
    for lock in data.rglob("baseline.lock"):
        fd = os.open(lock, os.O_RDONLY)
        try:
            while time.monotonic() < deadline:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(0.05)
        finally:
            os.close(fd)


def test_the_session_start_baseline_goes_to_the_database(
    tb: CLI, ws_dir: Path, pg_url: str, tmp_path: Path
) -> None:
    _fill(ws_dir)
    payload = {
        "hook_event_name": "SessionStart",
        "session_id": "sess-1",
        "source": "startup",
        "cwd": str(ws_dir),
    }
    env = {"TAKEBACK_STORE": pg_url}
    proc = tb("hook", "claude-code", input=json.dumps(payload).encode(), env=env)
    assert proc.returncode == 0
    data = tmp_path / "home" / "data"
    _wait_for_baseline(data)
    # No folder store was made on this machine: no copy of the workspace's files.
    assert not [p for p in tmp_path.rglob("objects.db")], list(tmp_path.rglob("*"))
    log = json.loads(tb("log", "--json", env=env).stdout)
    assert [s["session"] for s in log] == ["sess-1"]


def test_purge_all_removes_what_the_workspace_keeps_on_this_machine(
    tb: CLI, ws_dir: Path, pg_url: str, tmp_path: Path
) -> None:
    _fill(ws_dir)
    env = {"TAKEBACK_STORE": pg_url}
    tb("snapshot", env=env)
    data = tmp_path / "home" / "data"
    assert list(data.rglob("cache.db"))
    tb("purge", "--all", env=env)
    assert not [p for p in data.rglob("*") if p.is_file()], list(data.rglob("*"))


def test_the_watching_service_is_not_started_for_a_database_workspace(
    tb: CLI, ws_dir: Path, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from takeback import Workspace
    from takeback.integrations._service import ensure

    _fill(ws_dir)
    data = tmp_path / "home" / "data" / "takeback"
    with Workspace(ws_dir, store=pg_url, data_dir=str(data)) as ws:
        ws.snapshot()
        assert os.path.isdir(ws.store_path)  # its local folder: a cache, not a store
        # What hooks and watch call on every prompt and Bash call: nothing to start.
        monkeypatch.delenv("TAKEBACK_SERVICE")
        assert ensure(ws.root, ws.store_path, {"TAKEBACK_SERVICE": "1"}) is False
    started = time.monotonic()
    proc = tb("service", "start", env={"TAKEBACK_STORE": pg_url}, check=2)
    assert time.monotonic() - started < 8
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "folder store" in lines[0] and "did not answer" not in lines[0]
    status = tb("service", "status", env={"TAKEBACK_STORE": pg_url}).stdout
    assert "scan in full" in status
