"""Two servers, one history: processes with their own local folders on one database.

A "server" here is the real ``takeback`` command run with a HOME (and so a local data
folder) of its own, on the one workspace folder they share, with ``TAKEBACK_STORE``
naming the one database: what a platform that moves a thread between machines does.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ._postgres import PgServer, pg_server
from .conftest import SRC, state, write

__all__ = ["pg_server"]

pytestmark = pytest.mark.postgres


class Server:
    """One machine: its own HOME and local folders, the shared workspace and database."""

    def __init__(self, name: str, tmp: Path, ws: Path, url: str) -> None:
        self.name = name
        self.ws = ws
        self.url = url
        self.home = tmp / f"home-{name}"
        self.home.mkdir()
        self.env = {
            **os.environ,
            "HOME": str(self.home),
            "XDG_DATA_HOME": str(self.home / "data"),
            "XDG_CACHE_HOME": str(self.home / "cache"),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "XDG_STATE_HOME": str(self.home / "state"),
            "TAKEBACK_STORE": url,
            "PYTHONPATH": SRC,
        }

    def __call__(self, *args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "takeback", *args],
            cwd=self.ws,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check is not None and proc.returncode != check:
            raise AssertionError(
                f"[{self.name}] takeback {' '.join(args)} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def python(self, script: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a Python script as this server (its environment, the workspace's folder)."""
        return subprocess.run(
            [sys.executable, "-c", script, *args],
            cwd=self.ws,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture
def servers(pg_server: PgServer, tmp_path: Path) -> tuple[Server, Server, str]:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = f"servers{os.getpid()}_{tmp_path.name[-24:]}".replace("-", "_").lower()
    url = pg_server.create_db(db)
    return Server("a", tmp_path, ws, url), Server("b", tmp_path, ws, url), db


def no_locks_left(pg: PgServer, db: str) -> bool:
    """Wait (a little) for the database to notice dead sessions; True when none hold a lock."""
    for _ in range(50):
        if pg.held_advisory_locks(db) == 0:
            return True
        time.sleep(0.1)
    return False


def test_a_thread_recorded_on_one_server_is_taken_back_on_another(
    servers: tuple[Server, Server, str], pg_server: PgServer
) -> None:
    a, b, db = servers
    ws = a.ws
    write(ws, "app.py", "x = 1\n")
    write(ws, "README.md", "# demo\n")
    write(ws, "old.txt", "to be deleted\n")
    states = [state(ws)]
    a("turn", "begin", "-m", "one")
    a("touch", "app.py")
    write(ws, "app.py", "x = 2\n")
    a("turn", "end")
    states.append(state(ws))
    a("turn", "begin", "-m", "two")
    a("run", "--", sys.executable, "-c", "import os; os.remove('old.txt')")
    a("turn", "end")
    states.append(state(ws))
    a("turn", "begin", "-m", "three")
    a("touch", "new.py", "README.md")
    write(ws, "new.py", "print('new')\n")
    write(ws, "README.md", "# demo, third turn\n")
    a("turn", "end")
    states.append(state(ws))

    # Server B has never seen this workspace: its local folder is empty.
    assert not (b.home / "data").exists()
    out = b("undo").stdout
    assert out.splitlines()[0] == "Undid turn 3 of session 'default'. Files restored: 2."
    assert state(ws) == states[2]
    b("redo")
    assert state(ws) == states[3]
    b("revert", "--to-turn", "1")
    assert state(ws) == states[1]
    b("unrevert")
    assert state(ws) == states[3]
    # A sees what B did: B's take-backs are in A's log.
    log = a("log").stdout
    assert "before undo of turn 3" in log and "before revert of turn" in log
    assert a("changes", "--turn", "3").stdout.splitlines()[0].startswith("2 files changed")
    assert (a.home / "data").exists() and (b.home / "data").exists()  # local folders each
    assert no_locks_left(pg_server, db)


_KILL_MID_REWIND = """
import os, signal, sys, takeback
target = sys.argv[1]
def on_progress(done, total):
    if done == 3:
        os.kill(os.getpid(), signal.SIGKILL)
with takeback.Workspace(".", store=os.environ["TAKEBACK_STORE"]) as ws:
    ws.rewind(target, on_progress=on_progress)
"""


def recovery(text: str) -> tuple[list[str], list[str]]:
    finish = re.search(r"finish it with `([^`]*)`", text)
    back = re.search(r"take it back with `([^`]*)`", text)
    assert finish is not None and back is not None, text
    return shlex.split(finish.group(1)), shlex.split(back.group(1))


@pytest.mark.parametrize("how", ["finish", "take back"])
def test_a_server_killed_mid_rewind_is_finished_or_taken_back_by_another(
    servers: tuple[Server, Server, str], pg_server: PgServer, how: str
) -> None:
    a, b, db = servers
    ws = a.ws
    for i in range(12):
        write(ws, f"f{i}.txt", f"v1 {i}\n")
    first = a("snapshot", "-m", "v1").stdout.strip()
    for i in range(12):
        write(ws, f"f{i}.txt", f"v2 {i}\n")
    write(ws, "added.txt", "v2 only\n")
    v2 = state(ws)
    proc = a.python(_KILL_MID_REWIND, first)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    half = state(ws)
    assert half not in (v2, {k: v for k, v in v2.items() if k != "added.txt"})

    # Both servers see the journal in the database and print the same commands.
    seen_b = b("status", check=None).stderr
    seen_a = a("status", check=None).stderr
    assert "was interrupted" in seen_b
    assert recovery(seen_b) == recovery(seen_a)
    finish, back = recovery(seen_b)
    assert no_locks_left(pg_server, db)  # the dead server's lock went with its connection
    if how == "finish":
        b(*finish[1:])
        assert state(ws) == {k: v for k, v in v2.items() if k != "added.txt"} | {
            f"f{i}.txt": ("f", f"v1 {i}\n".encode(), v2[f"f{i}.txt"][2]) for i in range(12)
        }
    else:
        b(*back[1:])
        assert state(ws) == v2
    assert "interrupted" not in a("status", check=None).stderr
    assert no_locks_left(pg_server, db)


_HOLD_THE_LOCK = """
import os, sys, time, takeback
ws = takeback.Workspace(".", store=os.environ["TAKEBACK_STORE"])
with ws.open_store().lock(exclusive=True):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_dead_servers_lock_is_released_and_another_restores(
    servers: tuple[Server, Server, str], pg_server: PgServer
) -> None:
    a, b, db = servers
    write(a.ws, "f.txt", "one\n")
    first = a("snapshot").stdout.strip()
    write(a.ws, "f.txt", "two\n")
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD_THE_LOCK],
        cwd=a.ws,
        env=a.env,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            assert pg_server.held_advisory_locks(db) == 1
        finally:
            holder.kill()  # kill -9: no unlock is ever sent
            holder.wait(timeout=30)
    assert no_locks_left(pg_server, db)
    b("rewind", "--to", first)
    assert (a.ws / "f.txt").read_text() == "one\n"


def test_events_are_rows_and_notifications_another_server_sees(
    servers: tuple[Server, Server, str], pg_server: PgServer
) -> None:
    import json

    import psycopg

    a, _b, db = servers
    with psycopg.connect(pg_server.url(db), autocommit=True) as listener:
        listener.execute(b"LISTEN takeback_events")
        write(a.ws, "f.txt", "one\n")
        a("turn", "begin")
        a("touch", "f.txt")
        write(a.ws, "f.txt", "two\n")
        a("turn", "end")
        got = [json.loads(n.payload) for n in listener.notifies(timeout=5, stop_after=3)]
        assert {g["key"] for g in got} == {str(a.ws)}
        names = [g["event"] for g in got]
        assert "snapshot.taken" in names and "file.changed" in names
        rows = listener.execute(b"SELECT data FROM takeback.events ORDER BY id").fetchall()
    events = [json.loads(r[0]) for r in rows]
    changed = [e for e in events if e["event"] == "file.changed"]
    assert changed and changed[0]["path"] == "f.txt"
