"""``takeback ui`` under attack: what another page, a rebinding name or a crafted path gets.

Plain HTTP requests to a real server over a real recorded session. Each refused request
changes nothing; each path the page asks about goes through the library's own checks, so
nothing outside the workspace is ever read, not through ``..``, an absolute path, or a
link inside the workspace that points out of it.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from takeback.integrations._ui_api import UiConfig
from takeback.integrations._ui_server import UiServer

from ._ui import record_three_turns, request, serve_ui

SECRET = "a secret outside the workspace\n"


def tree(root: Path) -> dict[str, bytes]:
    """Every file's bytes and every link's target, links not followed."""
    out: dict[str, bytes] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = os.readlink(path).encode()
            elif path.is_file():
                out[rel] = path.read_bytes()
    return out


@pytest.fixture
def server(ws_dir: Path, store_dir: Path, tmp_path: Path) -> Iterator[UiServer]:
    record_three_turns(ws_dir, store_dir)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    os.symlink(outside, ws_dir / "out")
    srv = UiServer(UiConfig(root=str(ws_dir), store=str(store_dir)))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_a_host_that_only_looks_local_is_refused(server: UiServer) -> None:
    port, token = server.port, server.token
    for host in (
        f"127.0.0.1.evil.example:{port}",  # a name an attacker's DNS points at 127.0.0.1
        f"localhost.evil.example:{port}",
        f"localhost.:{port}",  # the same name, fully qualified: not what the page uses
        f"[::1]:{port}",  # nothing listens there
        f"127.0.0.1:{port}@evil.example",
        "127.0.0.1",  # no port: a different origin
        "",
    ):
        status, body = request(port, f"/api/timeline?token={token}", headers={"Host": host})
        assert (status, body) == (403, b"forbidden\n"), host
    # no Host header at all
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", f"/api/timeline?token={token}", skip_host=True)
        conn.endheaders()
        res = conn.getresponse()
        assert (res.status, res.read()) == (403, b"forbidden\n")
    finally:
        conn.close()


def test_no_answer_lets_another_origin_read_it(server: UiServer) -> None:
    port, token = server.port, server.token
    good = {"X-Takeback-Token": token}
    for path in ("/api/timeline", "/", "/api/events"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", f"{path}?token={token}", headers={"Host": f"127.0.0.1:{port}"})
            res = conn.getresponse()
            assert res.status == 200
            names = {k.lower() for k, _v in res.getheaders()}
            assert not any(n.startswith("access-control-") for n in names), path
        finally:
            conn.close()
    # A preflight (what a browser asks before a cross-site JSON post) is not granted.
    status, body = request(
        port,
        "/api/apply",
        method="OPTIONS",
        headers={
            **good,
            "Origin": "http://evil.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, x-takeback-token",
        },
    )
    assert status >= 400 and b"Access-Control" not in body


def test_paths_outside_the_workspace_are_never_read(
    server: UiServer, ws_dir: Path, tmp_path: Path
) -> None:
    port = server.port
    good = {"X-Takeback-Token": server.token}
    secret = str(tmp_path / "outside" / "secret.txt")
    for path in ("../outside/secret.txt", secret, "out/secret.txt", "src/../../outside/secret.txt"):
        for ask in (f"/api/show?ref=start&path={path}", f"/api/diff?from=start&path={path}"):
            status, body = request(port, ask, headers=good)
            assert SECRET.encode() not in body, ask
            assert status in (200, 400), ask
            if status == 200:
                assert json.loads(body)["files"] == [], ask
    before = tree(ws_dir)
    for path in ("../outside/secret.txt", secret, "out/secret.txt"):
        for op in ("undo-file", "undo-turn-file"):
            status, body = request(
                port,
                "/api/apply",
                method="POST",
                headers={**good, "Content-Type": "application/json"},
                body={"op": op, "file": path, "turn": 1},
            )
            assert status == 400, (op, path, body)
            assert json.loads(body)["exit_code"] == 2
    assert tree(ws_dir) == before
    assert (tmp_path / "outside" / "secret.txt").read_text() == SECRET


def test_bad_input_is_one_json_line_and_the_server_goes_on(server: UiServer) -> None:
    port = server.port
    good = {"X-Takeback-Token": server.token}
    for ask in (
        "/api/turn?turn=x",
        "/api/turn?turn=99",
        "/api/step?step=-1",
        "/api/diff?from=",
        "/api/diff?from=start&to=turn:99",
        "/api/show?ref=nope&path=README.md",
        "/api/show?ref=start&path=a%00b",
    ):
        status, body = request(port, ask, headers=good)
        assert status == 400, ask
        doc = json.loads(body)
        assert doc["exit_code"] == 2 and "\n" not in doc["message"], ask
    post = {**good, "Content-Type": "application/json"}
    for bad in ({"op": "undo", "turn": "1"}, {"op": "undo", "turn": True}, {"op": "nope"}):
        status, body = request(port, "/api/plan", method="POST", headers=post, body=bad)
        assert status == 400, bad
    assert request(port, "/api/timeline", headers=good)[0] == 200


def test_the_live_stream_needs_the_token_and_blocks_nothing(ws_dir: Path, store_dir: Path) -> None:
    record_three_turns(ws_dir, store_dir)
    with serve_ui(ws_dir, store_dir) as ui:
        host = {"Host": f"127.0.0.1:{ui.port}"}
        assert request(ui.port, "/api/events", headers=host)[0] == 403
        streams = []
        for _ in range(3):
            conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=10)
            conn.request("GET", f"/api/events?token={ui.token}", headers=host)
            res = conn.getresponse()
            assert res.status == 200 and res.read1(100).startswith(b"retry:")
            streams.append(conn)
        start = time.monotonic()
        status, _ = request(ui.port, "/api/timeline", headers={"X-Takeback-Token": ui.token})
        assert status == 200 and time.monotonic() - start < 5
        start = time.monotonic()
        # leaving the block sends Ctrl-C; the open streams must not hold the process
    assert ui.proc.returncode == 0
    assert time.monotonic() - start < 5
    for conn in streams:
        conn.close()


def test_a_page_that_goes_away_mid_answer_prints_no_traceback(
    ws_dir: Path, store_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A reload or a closed tab while a big answer is on its way: the browser resets the
    # connection; the server's terminal must not fill with a stack trace for it.
    (ws_dir / "big.txt").write_text("".join(f"line {i} of a long file\n" for i in range(60_000)))
    record_three_turns(ws_dir, store_dir)
    with serve_ui(ws_dir, store_dir) as ui:
        for ask in (f"/api/show?ref=start&path=big.txt&token={ui.token}", "/api/timeline"):
            sock = socket.create_connection(("127.0.0.1", ui.port), timeout=10)
            head = f"GET {ask} HTTP/1.1\r\nHost: 127.0.0.1:{ui.port}\r\n\r\n"
            sock.sendall(head.encode())
            assert sock.recv(100).startswith(b"HTTP/1.1 ")
            # close with a reset (linger on, zero seconds), as a browser drops a tab
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        time.sleep(0.5)
        status, _ = request(ui.port, "/api/timeline", headers={"X-Takeback-Token": ui.token})
        assert status == 200
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
