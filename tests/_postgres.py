"""A throwaway PostgreSQL server for the tests: initdb and pg_ctl on a loopback port.

The server runs as a user that is not root (PostgreSQL refuses root): when the tests run
as root, its folder is given to ``nobody`` and its commands run through ``setpriv``. It
listens on 127.0.0.1 on a free port, with its socket in its own folder, trusts local
connections, and is stopped (``pg_ctl stop -m immediate``) when the session ends: no
process is left, even when the test run is killed (a watchdog process stops it then).
Where no PostgreSQL is installed the tests that need one skip, saying so; under CI
(``CI`` set) they fail instead, since CI installs it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

import pytest


@dataclass
class PgServer:
    """A running server: its address, and how to make a fresh database on it."""

    host: str
    port: int
    bindir: str
    user: str = "postgres"

    def url(self, db: str = "postgres") -> str:
        """Return the URL of a database on this server."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{db}"

    def create_db(self, name: str) -> str:
        """Make a new, empty database; return its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return self.url(name)

    def held_advisory_locks(self, db: str) -> int:
        """Return how many advisory locks sessions hold in a database."""
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as conn:
            row = conn.execute(
                b"SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                b"WHERE l.locktype = 'advisory' AND l.granted AND d.datname = %s",
                (db,),
            ).fetchone()
        return int(row[0]) if row else 0


def find_bindir() -> str | None:
    """Return the folder that holds initdb, pg_ctl and postgres (Debian's, or on PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if found:
        return os.path.dirname(found[0])
    initdb = shutil.which("initdb")
    return os.path.dirname(os.path.realpath(initdb)) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is needed in CI and {why}")
    pytest.skip(f"no PostgreSQL server can be had here: {why}")


@contextmanager
def running_server(bindir: str, *, durable: bool = False) -> Iterator[PgServer]:
    """Run a server from ``bindir`` in a new temporary folder; stop and remove it after.

    Args:
        bindir: where initdb, pg_ctl and postgres are.
        durable: keep PostgreSQL's default fsync settings (benchmarks); the tests turn
            them off, as nothing they write needs to outlive a power cut.
    """
    # Under /tmp when running as root: the server's user must be able to reach its folder,
    # which a root-only TMPDIR would not let it.
    shared_tmp = "/tmp" if os.geteuid() == 0 and os.path.isdir("/tmp") else None
    base = tempfile.mkdtemp(prefix="takeback-pg-", dir=shared_tmp)
    prefix: list[str] = []
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(base, nobody.pw_uid, nobody.pw_gid)
        os.chmod(base, 0o700)
        prefix = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}"]
        prefix += ["--clear-groups", "--"]
    data = os.path.join(base, "data")
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    port = _free_port()
    try:
        subprocess.run(
            [*prefix, f"{bindir}/initdb", "-D", data, "-U", "postgres", "--auth=trust"]
            + ["-E", "UTF8", "--no-sync", "--locale=C"],
            check=True,
            capture_output=True,
            env=env,
            cwd=base,
        )
        opts = (
            f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={base} "
            "-c max_connections=200"
        )
        if not durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        log = os.path.join(base, "log")
        start = subprocess.run(
            [*prefix, f"{bindir}/pg_ctl", "-D", data, "-l", log, "-o", opts, "-w", "start"],
            capture_output=True,
            env=env,
            cwd=base,
        )
        if start.returncode != 0:
            try:
                with open(log) as f:
                    tail = f.read()[-2000:]
            except OSError:
                tail = ""
            err = start.stderr.decode(errors="replace")
            raise RuntimeError(f"pg_ctl start failed: {err}\n{tail}")
        stop = [*prefix, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"]
        watchdog = _watchdog(stop, base, env)
        try:
            yield PgServer("127.0.0.1", port, bindir)
        finally:
            subprocess.run(stop, capture_output=True, env=env, cwd=base)
            pipe, proc = watchdog
            pipe.close()
            proc.wait(timeout=60)
    finally:
        shutil.rmtree(base, ignore_errors=True)


#: The watchdog's program: wait for stdin's end (its test process is gone, however it
#: ended), then stop the server and remove its folder.
_WATCH = """
import shutil, subprocess, sys
sys.stdin.buffer.read()
subprocess.run(sys.argv[2:], capture_output=True, cwd=sys.argv[1])
shutil.rmtree(sys.argv[1], ignore_errors=True)
"""


def _watchdog(
    stop: list[str], base: str, env: dict[str, str]
) -> tuple[BinaryIO, subprocess.Popen[bytes]]:
    """Start a process that stops the server when this one ends, killed or not.

    A test run cut short (``timeout``'s SIGTERM, a SIGKILL) runs no fixture's teardown;
    the server, a daemon of its own, would run on. The watchdog holds the read end of a
    pipe whose write end only this process has: when this process dies the pipe ends,
    and the watchdog stops the server. In a session of its own, so that a Ctrl-C sent to
    the test's process group does not end it before it has. Returns the write end, and
    the watchdog (closing the one ends the other).
    """
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _WATCH, base, *stop],
            stdin=r,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    finally:
        os.close(r)
    return os.fdopen(w, "wb"), proc


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """Start a PostgreSQL server for the session; stop it at the end."""
    bindir = find_bindir()
    if bindir is None:
        _unavailable("initdb is not installed (Debian: apt-get install postgresql)")
        raise AssertionError  # unreachable: skip or fail raised
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'takeback[postgres]')")
    with running_server(bindir) as server:
        yield server


_count = iter(range(1, 1 << 30))


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A fresh, empty database on the session's server (its URL)."""
    return pg_server.create_db(f"t{os.getpid()}_{next(_count)}")


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_suites_on(url: str, suites: tuple[str, ...], base: str) -> tuple[int, int]:
    """Run test modules against the database at ``url``; return (passed, skipped).

    Each runs in a pytest of its own with ``tests/_pg_mode.py`` loaded (every store folder
    a test names becomes a workspace key in the database), side by side: each one's
    processes mostly wait on the others'. A failure or error in any fails the caller.
    """
    env = {**os.environ, "TAKEBACK_TEST_PG": url}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "tests._pg_mode"]
            + ["-p", "no:cacheprovider", "--basetemp", os.path.join(base, f"run{i}"), suite],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, suite in enumerate(suites)
    ]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    passed = skipped = 0
    for suite, proc, out in zip(suites, procs, outs, strict=True):
        assert proc.returncode == 0, f"{suite} on PostgreSQL:\n{out[-5000:]}"
        summary = out.strip().splitlines()[-1]
        assert "failed" not in summary and "error" not in summary, out[-5000:]
        passed += int(summary.split(" passed")[0].split()[-1])
        if " skipped" in summary:
            skipped += int(summary.split(" skipped")[0].split()[-1])
    return passed, skipped
