"""A PostgreSQL store never hangs a command or a hook: every wait on the database is bounded.

A silent server is a real socket on 127.0.0.1 that accepts connections and never says a
word; a slow statement is a real one, blocked by a lock the test holds.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from takeback.store import open_store
from takeback.store._pg_schema import LOCK_WORKSPACE

from ._postgres import pg_server, pg_url
from .conftest import CLI, write

__all__ = ["pg_server", "pg_url"]

pytestmark = pytest.mark.postgres


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port where a server accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _addr = listener.accept()
            except OSError:
                continue
            held.append(conn)  # kept open, never read, never written

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_a_silent_server_ends_a_command_in_one_line_within_its_timeout(
    tb: CLI, silent_port: int
) -> None:
    url = f"postgresql://postgres@127.0.0.1:{silent_port}/db?connect_timeout=2"
    started = time.monotonic()
    proc = tb("log", env={"TAKEBACK_STORE": url}, check=2)
    took = time.monotonic() - started
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        f"takeback: error: the database at 127.0.0.1:{silent_port} did not answer in 2 s"
    ]
    assert took < 10, took


def test_a_silent_server_has_a_default_connect_timeout(tb: CLI, silent_port: int) -> None:
    url = f"postgresql://postgres@127.0.0.1:{silent_port}/db"
    started = time.monotonic()
    proc = tb("status", env={"TAKEBACK_STORE": url}, check=2)
    assert "did not answer in 5 s" in proc.stderr
    assert time.monotonic() - started < 20


def test_a_hook_call_on_a_silent_server_fails_open_within_its_bound(
    tb: CLI, silent_port: int, ws_dir: Path, tmp_path: Path
) -> None:
    url = f"postgresql://postgres@127.0.0.1:{silent_port}/db?connect_timeout=2"
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "s1",
        "cwd": str(ws_dir),
        "prompt": "hello",
    }
    started = time.monotonic()
    proc = tb(
        "hook",
        "claude-code",
        input=json.dumps(payload).encode(),
        env={"TAKEBACK_STORE": url, "TAKEBACK_HOOK_TIMEOUT": "30"},
    )
    took = time.monotonic() - started
    assert proc.returncode == 0 and took < 15, took
    logs = list(tmp_path.rglob("hook.log"))
    assert len(logs) == 1
    text = logs[0].read_text().strip().splitlines()
    assert len(text) == 1 and "did not answer in 2 s" in text[0], text


def test_a_statement_the_server_holds_up_ends_in_one_line(
    tb: CLI, ws_dir: Path, pg_url: str
) -> None:
    write(ws_dir, "f.txt", "one\n")
    tb("snapshot", env={"TAKEBACK_STORE": pg_url})
    with psycopg.connect(pg_url) as conn:
        conn.execute(b"LOCK TABLE takeback.snapshots IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        proc = tb("log", env={"TAKEBACK_STORE": pg_url + "?statement_timeout=1"}, check=2)
        took = time.monotonic() - started
        conn.rollback()
    assert proc.stderr.strip().splitlines() == [
        f"takeback: error: the database at 127.0.0.1:{pg_url.split(':')[-1].split('/')[0]} "
        "did not answer in 1 s"
    ]
    assert took < 15


def test_waiting_for_another_servers_restore_is_not_a_timeout(
    tb: CLI, ws_dir: Path, pg_url: str
) -> None:
    write(ws_dir, "f.txt", "one\n")
    tb("snapshot", env={"TAKEBACK_STORE": pg_url})
    write(ws_dir, "f.txt", "two\n")
    url = pg_url + "?statement_timeout=1"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (ws,) = conn.execute(b"SELECT id FROM takeback.workspaces").fetchone() or (0,)
        conn.execute(b"SELECT pg_advisory_lock(%s, %s)", (LOCK_WORKSPACE, ws))
        env = {**_env(tb), "TAKEBACK_STORE": url}
        proc = subprocess.Popen(
            _argv("rewind", "--to", "start"),
            cwd=ws_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(2.5)  # over twice the statement timeout, the lock still held
        assert proc.poll() is None
        conn.execute(b"SELECT pg_advisory_unlock(%s, %s)", (LOCK_WORKSPACE, ws))
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert (ws_dir / "f.txt").read_text() == "one\n"


def test_the_statement_timeout_is_back_after_a_wait_for_a_lock(
    pg_url: str, ws_dir: Path, tmp_path: Path
) -> None:
    store = open_store(
        pg_url + "?statement_timeout=1", str(ws_dir), local=str(tmp_path / "l"), create=True
    )
    try:
        conn = store.meta.pg.conn  # type: ignore[attr-defined]
        with psycopg.connect(pg_url, autocommit=True) as other:
            other.execute(b"SELECT pg_advisory_lock_shared(%s, %s)", (LOCK_WORKSPACE, store.ws))  # type: ignore[attr-defined]
            timer = threading.Timer(
                1.5,
                lambda: other.execute(
                    b"SELECT pg_advisory_unlock_shared(%s, %s)",
                    (LOCK_WORKSPACE, store.ws),  # type: ignore[attr-defined]
                ),
            )
            timer.start()
            with store.lock(exclusive=True):
                shown = conn.execute(b"SHOW statement_timeout").fetchone()
            timer.join()
        assert shown == ("1s",)
    finally:
        store.close()


def _env(tb: CLI) -> dict[str, str]:
    """The environment the ``tb`` command line runs in."""
    import os

    from .conftest import SRC

    return {**os.environ, "TAKEBACK_STORE": str(tb.store), "PYTHONPATH": SRC}


def _argv(*args: str) -> list[str]:
    """The argv of the real ``takeback`` command."""
    import sys

    return [sys.executable, "-m", "takeback", *args]
