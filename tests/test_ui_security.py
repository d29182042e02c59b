"""``takeback ui`` answers only its own page: token, Host, Origin, loopback, all checked.

Plain HTTP requests, each with exactly the headers a hostile page (or another machine)
could send; a refused request is answered 403 and changes nothing: not a file of the
workspace, not the store's history.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from takeback import Workspace
from takeback.integrations._ui_api import UiConfig
from takeback.integrations._ui_server import UiServer

from ._ui import README_1, record_three_turns, request, serve_ui
from .conftest import CLI, files_state, write


@pytest.fixture
def server(ws_dir: Path, store_dir: Path) -> Iterator[UiServer]:
    record_three_turns(ws_dir, store_dir)
    srv = UiServer(UiConfig(root=str(ws_dir), store=str(store_dir)))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def history(ws_dir: Path, store_dir: Path) -> tuple[int, list[str]]:
    with Workspace(ws_dir, store=store_dir) as ws:
        return len(ws.log()), [t.state for t in ws.session("agent").turns()]


def test_every_way_in_without_the_token_or_from_elsewhere_is_refused(
    server: UiServer, ws_dir: Path, store_dir: Path
) -> None:
    port, token = server.port, server.token
    before_files, before_history = files_state(ws_dir), history(ws_dir, store_dir)
    good = {"X-Takeback-Token": token, "Content-Type": "application/json"}
    undo = {"op": "undo"}
    refused = [
        # no token, a wrong one, a token of the right length but not this one
        ("GET", "/", {}, None),
        ("GET", "/static/app.js", {}, None),
        ("GET", "/api/timeline", {}, None),
        ("GET", "/api/events", {}, None),
        ("GET", "/api/timeline?token=wrong", {}, None),
        ("GET", f"/api/timeline?token={'x' * len(token)}", {}, None),
        ("GET", "/api/show?ref=start&path=README.md", {"X-Takeback-Token": "wrong"}, None),
        ("POST", "/api/apply", {"Content-Type": "application/json"}, undo),
        ("POST", "/api/apply", {**good, "X-Takeback-Token": "wrong"}, undo),
        # the token in the address is for reading: a take-back needs the header
        ("POST", f"/api/apply?token={token}", {"Content-Type": "application/json"}, undo),
        # a form can post text/plain across sites: not accepted
        ("POST", "/api/apply", {**good, "Content-Type": "text/plain"}, undo),
        # a foreign Host (DNS rebinding), with the right token
        ("GET", f"/api/timeline?token={token}", {"Host": "evil.example"}, None),
        ("GET", f"/api/timeline?token={token}", {"Host": f"evil.example:{port}"}, None),
        ("GET", f"/api/timeline?token={token}", {"Host": "127.0.0.1:1"}, None),
        ("POST", "/api/apply", {**good, "Host": f"evil.example:{port}"}, undo),
        # a foreign Origin (another page in the same browser), with the right token
        ("GET", f"/api/timeline?token={token}", {"Origin": "http://evil.example"}, None),
        ("POST", "/api/apply", {**good, "Origin": "http://evil.example"}, undo),
        ("POST", "/api/apply", {**good, "Origin": f"http://127.0.0.1:{port + 1}"}, undo),
        ("POST", "/api/apply", {**good, "Origin": "null"}, undo),
        ("POST", "/api/apply", {**good, "Sec-Fetch-Site": "cross-site"}, undo),
    ]
    for method, path, headers, body in refused:
        status, data = request(port, path, method=method, headers=headers, body=body)
        assert (status, data) == (403, b"forbidden\n"), (method, path, headers)
    assert files_state(ws_dir) == before_files
    assert history(ws_dir, store_dir) == before_history

    # The same requests, as the page makes them, are answered: the refusals above were
    # for what they lacked, not for anything else.
    status, data = request(port, f"/api/timeline?token={token}")
    assert status == 200 and [t["turn"] for t in json.loads(data)["turns"]] == [1, 2, 3]
    status, _ = request(port, f"/?token={token}", headers={"Host": f"localhost:{port}"})
    assert status == 200
    origin = {"Origin": f"http://127.0.0.1:{port}"}
    status, data = request(port, "/api/apply", method="POST", headers={**good, **origin}, body=undo)
    assert status == 200 and json.loads(data)["turns"] == [3]
    assert (ws_dir / "README.md").read_text() == "# Demo\n\nA small app.\n"


def test_the_page_is_served_with_a_strict_policy(server: UiServer) -> None:
    conn_status, page = request(server.port, f"/?token={server.token}")
    assert conn_status == 200
    assert server.token.encode() in page and b"https://" not in page and b"http://" not in page
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", f"/static/app.js?token={server.token}")
    res = conn.getresponse()
    res.read()
    conn.close()
    csp = res.getheader("Content-Security-Policy") or ""
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert res.getheader("Referrer-Policy") == "no-referrer"


def non_loopback_address() -> str | None:
    """An address of this machine that is not loopback (None when it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent by a UDP connect
            ip = str(s.getsockname()[0])
        except OSError:
            return None
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


def listening_addresses(port: int) -> list[str]:
    """The local addresses that listen on ``port``, from /proc/net/tcp and tcp6."""
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, hex_port = local.split(":")
            if int(hex_port, 16) == port and state == "0A":  # 0A: LISTEN
                found.append(addr)
    return found


def test_the_command_listens_on_127_0_0_1_only(ws_dir: Path, store_dir: Path) -> None:
    record_three_turns(ws_dir, store_dir)
    with serve_ui(ws_dir, store_dir) as ui:
        assert ui.url.startswith(f"http://127.0.0.1:{ui.port}/?token=")
        if Path("/proc/net/tcp").exists():
            # 0100007F is 127.0.0.1 as the kernel writes it: one socket, nothing else
            assert listening_addresses(ui.port) == ["0100007F"]
        status, _ = request(ui.port, f"/api/timeline?token={ui.token}")
        assert status == 200
        other = non_loopback_address()
        if other is not None:
            with pytest.raises(OSError):
                request(ui.port, f"/api/timeline?token={ui.token}", address=other)
        with pytest.raises(OSError):
            request(ui.port, f"/api/timeline?token={ui.token}", address="127.0.0.2")


@pytest.mark.quick
def test_a_port_in_use_or_out_of_range_is_refused(tb: CLI) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = tb("ui", "--no-open", "--port", str(port), check=2)
        assert out.stderr.startswith(f"takeback: error: cannot listen on 127.0.0.1:{port}: ")
    assert "bad port: 70000" in tb("ui", "--no-open", "--port", "70000", check=2).stderr


def test_a_merge_is_checked_as_any_take_back_and_its_field_is_validated(
    server: UiServer, ws_dir: Path, store_dir: Path
) -> None:
    port, token = server.port, server.token
    # A person's edit on line 1 of the README; turn 3 changed line 3 and after.
    write(ws_dir, "README.md", README_1.replace("# Demo\n", "# Demo (mine)\n"))
    before_files, before_history = files_state(ws_dir), history(ws_dir, store_dir)
    good = {"X-Takeback-Token": token, "Content-Type": "application/json"}
    merge = {"op": "undo", "merge": True}
    refused = [
        ("/api/apply", {"Content-Type": "application/json"}),
        ("/api/apply", {**good, "X-Takeback-Token": "wrong"}),
        (f"/api/apply?token={token}", {"Content-Type": "application/json"}),
        ("/api/apply", {**good, "Content-Type": "text/plain"}),
        ("/api/apply", {**good, "Host": f"evil.example:{port}"}),
        ("/api/apply", {**good, "Origin": "http://evil.example"}),
        ("/api/plan", {**good, "Sec-Fetch-Site": "cross-site"}),
    ]
    for path, headers in refused:
        status, data = request(port, path, method="POST", headers=headers, body=merge)
        assert (status, data) == (403, b"forbidden\n"), (path, headers)
    # Only false, true and "markers" are a merge; merge with force, or a rewind that
    # merges, is refused as the library refuses them.
    bads: list[object] = [1, 0, "yes", "true", "MARKERS", [], {}, {"merge": True}]
    for bad in bads:
        for path in ("/api/plan", "/api/apply"):
            status, data = request(
                port, path, method="POST", headers=good, body={"op": "undo", "merge": bad}
            )
            assert status == 400, bad
            assert json.loads(data)["message"] == "bad 'merge': false, true or \"markers\""
    for body in ({**merge, "force": True}, {"op": "rewind", "ref": "start", "merge": True}):
        status, data = request(port, "/api/apply", method="POST", headers=good, body=body)
        assert status == 400, body
    assert files_state(ws_dir) == before_files
    assert history(ws_dir, store_dir) == before_history

    # As the page sends it: planned, then done, the person's line kept.
    status, data = request(port, "/api/plan", method="POST", headers=good, body=merge)
    assert status == 200 and json.loads(data)["merged"] == ["README.md"]
    assert files_state(ws_dir) == before_files
    status, data = request(port, "/api/apply", method="POST", headers=good, body=merge)
    assert status == 200 and json.loads(data)["merged"] == ["README.md"]
    assert (ws_dir / "README.md").read_text() == "# Demo (mine)\n\nA small app.\n"
