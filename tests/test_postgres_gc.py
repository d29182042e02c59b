"""gc, purge, fsck, du and config on the PostgreSQL store.

The gc suites (``tests/test_gc.py``, ``tests/test_gc_property.py``) run once more with
``tests/_pg_mode.py`` loaded, as ``tests/test_postgres_suites.py`` runs the end-to-end
suites: every store folder they name becomes a workspace key in one database. Then what
only a shared store has: other machines' scan caches, which gc cannot see (the cache
generation), and fsck finding rows that are gone from the database.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

import takeback
from takeback.ops._keep import plan
from takeback.ops._policy import Policy

from ._gc import KILL_TARGETS, build_history, kill_at
from ._postgres import PgServer, pg_server, pg_url, run_suites_on
from .conftest import SRC, write

__all__ = ["pg_server", "pg_url"]

pytestmark = pytest.mark.postgres

SUITES = ("tests/test_gc.py", "tests/test_gc_property.py")


# Slow: gc's suites, its property test too, run a second time in pytests of their own;
# the quick tier keeps the tests below, gc on a database with what only a shared store has.
@pytest.mark.slow
def test_gc_suites_pass_on_the_postgresql_store(pg_server: PgServer, tmp_path: Path) -> None:
    url = pg_server.create_db(f"gcsuites{os.getpid()}")
    passed, skipped = run_suites_on(url, SUITES, str(tmp_path))
    # Only the folder store's own checks were left out (tests/_pg_mode.py names them).
    assert passed >= 10 and skipped <= 6, (passed, skipped)


def _machine(root: Path, url: str, home: Path) -> takeback.Workspace:
    """One server: its own copy of the workspace and its own local folder, one database."""
    return takeback.Workspace(root, store=url, data_dir=str(home))


def test_gc_on_one_machine_makes_the_others_drop_their_scan_caches(
    pg_url: str, tmp_path: Path
) -> None:
    """Machine B's cache names a blob that machine A's gc deletes (A cannot see B's cache).

    Each machine has its own copy of the workspace (a sandbox) under one key. B's next
    scan must not trust its cache (it would name the deleted blob without writing it
    again): gc raised the cache generation, so B drops its cache and reads every file.
    """
    url = f"{pg_url}#shared"
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    root_a.mkdir()
    root_b.mkdir()
    write(root_b, "f.txt", "only machine B has this\n")
    write(root_a, "f.txt", "machine A's version\n")
    time.sleep(1.2)  # out of the racy window: B's cache will trust f.txt's stat
    with (
        _machine(root_a, url, tmp_path / "home-a") as a,
        _machine(root_b, url, tmp_path / "home-b") as b,
    ):
        first = b.snapshot()
        store_b = b.open_store()
        blob = store_b.objects.get_tree(first.tree)["f.txt"].oid
        b.status()
        assert b.last_scan is not None and b.last_scan["reason"] != "nothing was scanned here yet"
        a.snapshot()
        a.status()
        result = a.gc(keep_turns=1, keep_days=0)
        assert result.snapshots == 1 and result.objects >= 1
        assert not a.open_store().objects.has(blob)  # B's cache names a blob that is gone
        # A's own cache was kept whole by its gc: its next scan still uses it.
        a.status()
        assert a.last_scan is not None and a.last_scan["reason"] != "nothing was scanned here yet"
        # B (its store open all along) scans again: its cache is from before the gc.
        b.status()
        assert b.last_scan is not None and b.last_scan["reason"] == "nothing was scanned here yet"
        again = b.snapshot()
        assert b.show(again.id, "f.txt") == b"only machine B has this\n"
        assert b.fsck(read_data=True).clean
    # A third process of machine B, opened after all that, trusts its new cache.
    with _machine(root_b, url, tmp_path / "home-b") as b2:
        b2.status()
        assert b2.last_scan is not None
        assert b2.last_scan["reason"] != "nothing was scanned here yet"
        assert b2.fsck(read_data=True).clean


def test_fsck_finds_rows_gone_from_the_database(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    root = tmp_path / "ws"
    root.mkdir()
    write(root, "a.txt", "a\n")
    write(root, "d/b.txt", "b\n")
    with takeback.Workspace(root, store=pg_url, data_dir=str(tmp_path / "home")) as ws:
        snap = ws.snapshot()
        tree = ws.open_store().objects.get_tree(snap.tree)
        blob, sub = tree["a.txt"].oid, tree["d"].oid
        assert ws.fsck(read_data=True).clean
        du = ws.du()
        assert du.disk == sum(du.files.values()) and du.files["objects"] >= du.stored > 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(b"DELETE FROM takeback.objects WHERE oid = ANY(%s)", ([blob, sub],))
    with takeback.Workspace(root, store=pg_url, data_dir=str(tmp_path / "home")) as ws:
        problems = ws.fsck().problems
    assert any(f"object {blob[:12]} of /a.txt is missing" in p for p in problems), problems
    assert any(f"tree {sub[:12]} is missing" in p for p in problems), problems


#: kills of gc on the database (tests/test_gc_crash.py kills it 20 times on a folder store)
CRASH_RUNS = 6


def test_gc_killed_at_random_moments_on_the_database_loses_nothing_kept(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """As tests/test_gc_crash.py, each run on a copy of one recorded database.

    A kill drops gc's connection: the database rolls back the statement under way and
    releases the advisory lock with it.
    """
    import psycopg

    name = f"gccrash{os.getpid()}"
    template = pg_server.create_db(name)
    root, home = tmp_path / "ws", tmp_path / "home"
    root.mkdir()
    with takeback.Workspace(root, store=template, data_dir=str(home)) as ws:
        rec = build_history(ws, root, turns=10, files=20)
        doomed = set(plan(ws.open_store(), Policy(keep_turns=2, keep_days=0.0)).snapshots)
        must_keep = {s.id for s in ws.log()} - doomed
    assert doomed and must_keep
    rng = random.Random(int(os.environ.get("TAKEBACK_CRASH_SEED") or 7))
    env = {**os.environ, "PYTHONPATH": SRC, "TAKEBACK_GC_PAUSE": "0.12"}
    outcomes = []
    for run in range(CRASH_RUNS):
        with psycopg.connect(pg_server.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}_{run}" TEMPLATE "{name}"'.encode())
        copy = pg_server.url(f"{name}_{run}")
        proc = subprocess.Popen(
            [sys.executable, "-m", "takeback", "gc", "--keep-turns", "2", "--keep-days", "0"],
            cwd=root,
            env={**env, "TAKEBACK_STORE": copy, "XDG_DATA_HOME": str(tmp_path / "gc-home")},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Aimed at one of gc's steps in turn: a kill at a random time from the start
        # landed before gc's first step on every run of a loaded machine.
        step = kill_at(proc, KILL_TARGETS[run % len(KILL_TARGETS)], rng)
        outcomes.append(step)
        with takeback.Workspace(root, store=copy, data_dir=str(home)) as ws:
            check = ws.fsck(read_data=True)
            assert check.clean, (run, step, check.problems)
            assert must_keep <= set(rec.check(ws)), (run, step)
            ws.gc(keep_turns=2, keep_days=0)
            assert ws.fsck(read_data=True).clean
            assert {s.id for s in ws.log()} == must_keep
            rec.check(ws)
        assert pg_server.held_advisory_locks(f"{name}_{run}") == 0
    print(outcomes)
    # The kills landed in more than two of gc's steps.
    assert len(set(outcomes)) >= 3, outcomes
