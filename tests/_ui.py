"""Helpers for the tests of ``takeback ui``: a recorded session, the real server, raw HTTP."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from takeback import Workspace

from .conftest import SRC, with_default_sigint, write

APP_0 = "def main():\n    print('hello')\n\n\nif __name__ == '__main__':\n    main()\n"
APP_1 = (
    "def greet(name):\n    return f'hello {name}'\n\n\n"
    "def main():\n    print(greet('world'))\n\n\nif __name__ == '__main__':\n    main()\n"
)
TEST_1 = "from src.app import greet\n\n\ndef test_greet():\n    assert greet('x') == 'hello x'\n"
README_0 = "# Demo\n\nA small app.\n"
README_1 = "# Demo\n\nA small app that greets.\n\n## Usage\n\n    python -m src.app\n"


def record_three_turns(root: Path, store: Path, session: str = "agent") -> None:
    """Record three turns through the library: a file tool's edit, a new file and a
    command's change, then the README; the same every time (for a twin folder)."""
    write(root, "src/app.py", APP_0)
    write(root, "README.md", README_0)
    with Workspace(root, store=store) as ws:
        s = ws.session(session)
        s.start()
        with s.turn(label="Add a greeting function") as t:
            with t.step(tool_call_ids=["call_1"]) as st:
                st.touch("src/app.py")
                write(root, "src/app.py", APP_1)
        with s.turn(label="Write a test, then format") as t:
            with t.step(tool_call_ids=["call_2"]) as st:
                st.touch("tests/test_app.py")
                write(root, "tests/test_app.py", TEST_1)
            with t.command("ruff format src tests", tool_call_id="call_3"):
                write(root, "src/app.py", APP_1 + "\n# formatted\n")
        with s.turn(label="Document how to run it") as t:
            with t.step(tool_call_ids=["call_4"]) as st:
                st.touch("README.md")
                write(root, "README.md", README_1)


@dataclass
class Served:
    """A running ``takeback ui``: its address, port and token."""

    url: str
    port: int
    token: str
    proc: subprocess.Popen[str]


@contextmanager
def serve_ui(
    root: Path, store: Path, *extra: str, env: Mapping[str, str] | None = None
) -> Iterator[Served]:
    """Run the real ``takeback ui --no-open --port 0 --json``; stop it (Ctrl-C) after.

    With ``env`` (the browser named by ``BROWSER``), the page is opened: no ``--no-open``.
    """
    opening = env is not None
    env = dict(env if env is not None else os.environ, TAKEBACK_STORE=str(store), PYTHONPATH=SRC)
    how = [] if opening else ["--no-open"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeback", "ui", *how, "--port", "0", "--json", *extra],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=with_default_sigint,  # stopped below as Ctrl-C stops it
    )
    try:
        assert proc.stdout is not None
        text = ""
        while True:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"takeback ui ended: {proc.communicate()[1]}")
            text += line
            if line.startswith("}"):
                break
        doc = json.loads(text)
        yield Served(doc["url"], doc["port"], doc["token"], proc)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
        sys.stderr.write(err)  # shown by pytest when a test fails


def request(
    port: int,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: Mapping[str, object] | None = None,
    address: str = "127.0.0.1",
) -> tuple[int, bytes]:
    """One plain HTTP request with exactly these headers (Host defaults to the server's)."""
    conn = http.client.HTTPConnection(address, port, timeout=10)
    try:
        all_headers = {"Host": f"127.0.0.1:{port}", **(headers or {})}
        data = json.dumps(body).encode() if body is not None else None
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in all_headers.items():
            conn.putheader(k, v)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        res = conn.getresponse()
        return res.status, res.read()
    finally:
        conn.close()
