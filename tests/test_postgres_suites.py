"""The engine's, turns' and CLI's end-to-end suites, run once against the PostgreSQL store.

The suites run in a pytest of their own with ``tests/_pg_mode.py`` loaded, which turns
every store folder they name into a workspace key in one database; the tests that check
the folder store's own files are left out there, each with its reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ._postgres import PgServer, pg_server, run_suites_on

__all__ = ["pg_server"]

SUITES = ("tests/test_engine_cli.py", "tests/test_turns_cli.py", "tests/test_turns_api.py")


# Slow: three suites run a second time, each in a pytest of its own, on a database; the
# quick tier keeps the store's contract suite (tests/test_store_contract.py) on one.
@pytest.mark.slow
@pytest.mark.postgres
def test_end_to_end_suites_pass_on_the_postgresql_store(
    pg_server: PgServer, tmp_path: Path
) -> None:
    url = pg_server.create_db(f"suites{os.getpid()}")
    passed, _skipped = run_suites_on(url, SUITES, str(tmp_path))
    # Only the folder store's own checks were left out (tests/_pg_mode.py names them).
    assert passed >= 65
