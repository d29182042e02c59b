"""The engine's, turns' and CLI's end-to-end suites, run once against the PostgreSQL store.

The suites run in a pytest of their own with ``tests/_pg_mode.py`` loaded, which turns
every store folder they name into a workspace key in one database; the tests that check
the folder store's own files are left out there, each with its reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ._postgres import PgServer, pg_server

__all__ = ["pg_server"]

SUITES = ("tests/test_engine_cli.py", "tests/test_turns_cli.py", "tests/test_turns_api.py")
REPO = Path(__file__).resolve().parent.parent


@pytest.mark.postgres
def test_end_to_end_suites_pass_on_the_postgresql_store(
    pg_server: PgServer, tmp_path: Path
) -> None:
    url = pg_server.create_db(f"suites{os.getpid()}")
    env = {**os.environ, "TAKEBACK_TEST_PG": url}
    # The suites run side by side (each one's processes mostly wait on the others').
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "tests._pg_mode"]
            + ["-p", "no:cacheprovider", "--basetemp", str(tmp_path / f"run{i}"), suite],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, suite in enumerate(SUITES)
    ]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    passed = 0
    for suite, proc, out in zip(SUITES, procs, outs, strict=True):
        assert proc.returncode == 0, f"{suite} on PostgreSQL:\n{out[-5000:]}"
        summary = out.strip().splitlines()[-1]
        assert "failed" not in summary and "error" not in summary, out[-5000:]
        passed += int(summary.split(" passed")[0].split()[-1])
    # Only the folder store's own checks were left out (tests/_pg_mode.py names them).
    assert passed >= 65
