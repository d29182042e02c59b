"""A PostgreSQL store's address is a secret: never in argv, a file name, an error or a repr.

The test server trusts loopback connections, so a password in the address is accepted and
ignored: each test can give one and look for it wherever the address travels.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psycopg
import pytest

import takeback
from takeback.store._pg_schema import LOCK_WORKSPACE

from ._postgres import PgServer, pg_server, pg_url
from .conftest import CLI, write

__all__ = ["pg_server", "pg_url"]

pytestmark = pytest.mark.postgres

SECRET = "Pw9secret"


def with_password(url: str, password: str = SECRET) -> str:
    """Return ``url`` (``postgresql://user@host...``) with a password for its user."""
    scheme, _sep, rest = url.partition("://")
    user, _at, tail = rest.partition("@")
    return f"{scheme}://{user}:{password}@{tail}"


def _processes_naming(text: str) -> dict[int, list[str]]:
    """Return the argv of every process whose command line contains ``text``."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if any(text in a for a in argv):
            found[int(name)] = argv
    return found


def _files_under(top: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        out += [os.path.join(dirpath, n) for n in dirnames + filenames]
    return out


def test_background_gc_gets_the_address_through_its_environment(
    tb: CLI, ws_dir: Path, pg_url: str
) -> None:
    url = with_password(pg_url)
    write(ws_dir, "f.txt", "one\n")
    tb("snapshot", env={"TAKEBACK_STORE": url})
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # gc is due (the workspace is old and was never collected) ...
        conn.execute(b"UPDATE takeback.workspaces SET created_at = 1")
        conn.execute(b"DELETE FROM takeback.meta WHERE key = 'gc.last'")
        (ws,) = conn.execute(b"SELECT id FROM takeback.workspaces").fetchone() or (0,)
        # ... and waits here for its exclusive lock, alive, while its argv is read.
        conn.execute(b"SELECT pg_advisory_lock_shared(%s, %s)", (LOCK_WORKSPACE, ws))
        tb("status", env={"TAKEBACK_STORE": url})
        deadline = time.monotonic() + 20
        gc: dict[int, list[str]] = {}
        while not gc and time.monotonic() < deadline:
            gc = {
                p: a
                for p, a in _processes_naming(str(ws_dir)).items()
                if "gc" in a and "--auto" in a
            }
            time.sleep(0.05)
        conn.execute(b"SELECT pg_advisory_unlock_shared(%s, %s)", (LOCK_WORKSPACE, ws))
    assert gc, "the background gc was not started"
    for pid, argv in gc.items():
        assert not any(SECRET in a for a in argv), argv
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read().split(b"\0")
        assert f"TAKEBACK_STORE={url}".encode() in environ
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") for p in gc) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_an_unreadable_hook_payload_is_logged_in_no_folder_named_after_the_address(
    tb: CLI, ws_dir: Path, pg_url: str, tmp_path: Path
) -> None:
    url = with_password(pg_url)
    proc = tb("hook", "claude-code", input=b"this is no JSON", env={"TAKEBACK_STORE": url})
    assert proc.returncode == 0
    paths = _files_under(tmp_path)
    assert not [p for p in paths if SECRET in p or "postgresql:" in p], paths
    logs = [p for p in paths if p.endswith("hook.log")]
    assert len(logs) == 1
    text = Path(logs[0]).read_text()
    assert "payload" in text.lower() and SECRET not in text


@pytest.mark.parametrize(
    ("password", "what"),
    [("ab%zz" + SECRET, "a raw %"), (SECRET + "%", "a % at the end")],
)
def test_a_password_that_is_not_percent_encoded_is_refused_without_showing_it(
    tb: CLI, pg_server: PgServer, password: str, what: str
) -> None:
    url = with_password(pg_server.url(), password)
    proc = tb("log", env={"TAKEBACK_STORE": url}, check=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("takeback: error:"), (what, proc.stderr)
    assert SECRET not in proc.stderr + proc.stdout
    assert "%25" in lines[0]  # says how to write it


def test_an_unclosed_bracket_is_one_line_without_the_address(tb: CLI, pg_server: PgServer) -> None:
    url = f"postgresql://postgres:{SECRET}@[127.0.0.1:{pg_server.port}/postgres"
    proc = tb("log", env={"TAKEBACK_STORE": url}, check=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("takeback: error:"), proc.stderr
    assert SECRET not in proc.stderr + proc.stdout


def test_json_errors_do_not_show_the_password(tb: CLI, pg_server: PgServer) -> None:
    url = with_password(pg_server.url("no_such_db"))
    proc = tb("log", "--json", env={"TAKEBACK_STORE": url}, check=2)
    doc = json.loads(proc.stdout)
    assert doc["exit_code"] == 2 and SECRET not in proc.stdout + proc.stderr


def test_the_address_never_shows_its_password(pg_url: str, ws_dir: Path) -> None:
    url = with_password(pg_url) + "#the-key"
    address = takeback.StoreAddress(url)
    assert SECRET not in repr(address) and SECRET not in str(address)
    assert "the-key" in str(address) and "***" in str(address)
    assert address.key == "the-key"
    assert address == takeback.StoreAddress(url)
    query = with_password(pg_url).replace(f":{SECRET}@", "@") + f"?password={SECRET}"
    assert SECRET not in str(takeback.StoreAddress(query))
    write(ws_dir, "f.txt", "x\n")
    with takeback.Workspace(ws_dir, store=url) as ws:
        ws.snapshot()
        assert SECRET not in repr(ws.store_url) and SECRET not in ws.store_path
        assert SECRET not in ws.du().path
        assert [s.kind for s in ws.log()]


def test_libpq_finds_the_database_through_a_service_file(
    tb: CLI, ws_dir: Path, pg_url: str, tmp_path: Path
) -> None:
    """``service=`` in ``pg_service.conf``: the address holds neither host nor password."""
    host_port, _slash, db = pg_url.split("@", 1)[1].partition("/")
    host, _colon, port = host_port.partition(":")
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[agents]\nhost={host}\nport={port}\nuser=postgres\ndbname={db}\n")
    env = {
        "TAKEBACK_STORE": "postgresql:///?service=agents&application_name=mine",
        "PGSERVICEFILE": str(services),
        "PGPASSWORD": SECRET,  # libpq's own way; the test server trusts loopback anyway
    }
    write(ws_dir, "f.txt", "one\n")
    tb("snapshot", "-m", "through the service file", env=env)
    assert "through the service file" in tb("log", env=env).stdout
    assert "through the service file" in tb("log", env={"TAKEBACK_STORE": pg_url}).stdout
    address = takeback.StoreAddress(env["TAKEBACK_STORE"])
    assert address.where == "service=agents"
