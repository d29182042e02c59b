"""The page's live updates on a PostgreSQL store: LISTEN/NOTIFY, not a look at local files."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import cast

import pytest

import takeback

from ._postgres import pg_server, pg_url
from ._ui import serve_ui
from .conftest import CLI, write

__all__ = ["pg_server", "pg_url"]

pytestmark = pytest.mark.postgres


def _next_update(sock: socket.socket, seconds: float) -> bool:
    """Read the stream until an ``update`` event comes (True) or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    seen = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        if not chunk:
            return False
        seen += chunk
        if b"event: update" in seen:
            return True
    return False


def test_the_page_hears_of_a_snapshot_taken_by_another_process(
    tb: CLI, ws_dir: Path, pg_url: str
) -> None:
    write(ws_dir, "f.txt", "one\n")
    env = {"TAKEBACK_STORE": pg_url}
    tb("snapshot", env=env)
    with serve_ui(ws_dir, cast(Path, pg_url)) as ui:
        sock = socket.create_connection(("127.0.0.1", ui.port), timeout=0.5)
        try:
            head = f"GET /api/events?token={ui.token} HTTP/1.1\r\nHost: 127.0.0.1:{ui.port}\r\n\r\n"
            sock.sendall(head.encode())
            assert _next_update(sock, 10)  # the first: the page loads what there is
            time.sleep(1)  # the stream is listening
            write(ws_dir, "f.txt", "two\n")
            tb("snapshot", env=env)
            assert _next_update(sock, 10), "no update after a snapshot"
        finally:
            sock.close()


def test_a_listener_hears_only_its_own_workspace(pg_url: str, tmp_path: Path) -> None:
    roots = [tmp_path / "one", tmp_path / "two"]
    for r in roots:
        r.mkdir()
        write(r, "f.txt", f"{r.name}\n")
    data = str(tmp_path / "data")
    with (
        takeback.Workspace(roots[0], store=pg_url, data_dir=data) as one,
        takeback.Workspace(roots[1], store=pg_url, data_dir=data) as two,
    ):
        one.snapshot()
        two.snapshot()
        listener = one.listen()
        assert listener is not None
        try:
            assert not listener.wait(0.2)
            two.snapshot("the other workspace")
            assert not listener.wait(1.0)
            write(roots[0], "f.txt", "changed\n")
            one.snapshot("this one")
            assert listener.wait(5.0)
        finally:
            listener.close()
