"""A crash test of gc: ``kill -9`` a real ``takeback gc`` at random moments, 20 times.

Each run copies one recorded store, starts ``takeback gc`` on the copy with
``TAKEBACK_GC_PAUSE`` (gc names each step on stderr and waits a little before it, so
that the kills land inside every step, and between them), and kills it after a random
delay. Then the store must pass ``fsck --read-data``, every snapshot the policy keeps
must still be there, every snapshot left must give back exactly its files, and a gc run
to the end must leave it sound. CI runs a fixed seed; elsewhere the seed is random and
printed, so a failure can be run again with ``TAKEBACK_CRASH_SEED``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import takeback
from takeback.ops._keep import plan
from takeback.ops._policy import Policy
from takeback.store import FolderStore

from ._gc import KILL_TARGETS, build_history, kill_at
from .conftest import SRC

RUNS = 20


# Slow: twenty gc processes, each killed at a random moment and its store checked whole;
# the quick tier keeps gc on a full disk (tests/test_gc_full_disk.py) and gc's commands.
@pytest.mark.slow
def test_gc_killed_at_random_moments_loses_nothing_kept(tmp_path: Path) -> None:
    root, template = tmp_path / "ws", tmp_path / "template"
    root.mkdir()
    with takeback.Workspace(root, store=template) as ws:
        rec = build_history(ws, root, turns=12, files=30)
        store = ws.open_store()
        assert isinstance(store, FolderStore)
        doomed = set(plan(store, Policy(keep_turns=2, keep_days=0.0)).snapshots)
        must_keep = {s.id for s in ws.log()} - doomed
    assert doomed and must_keep
    seed = int(os.environ.get("TAKEBACK_CRASH_SEED") or (7 if os.environ.get("CI") else 0))
    seed = seed or random.randrange(1 << 30)
    print(f"crash seed {seed}")
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONPATH": SRC, "TAKEBACK_GC_PAUSE": "0.12"}
    outcomes = []
    for run in range(RUNS):
        copy = tmp_path / f"store-{run}"
        shutil.copytree(template, copy)
        proc = subprocess.Popen(
            [sys.executable, "-m", "takeback", "gc", "--keep-turns", "2", "--keep-days", "0"],
            cwd=root,
            env={**env, "TAKEBACK_STORE": str(copy)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Each run aims at one of gc's steps in turn: kills land in every step.
        step = kill_at(proc, KILL_TARGETS[run % len(KILL_TARGETS)], rng)
        outcomes.append(step)
        with takeback.Workspace(root, store=copy) as ws:
            check = ws.fsck(read_data=True)
            assert check.clean, (run, step, check.problems)
            left = set(rec.check(ws))
            assert must_keep <= left, (run, step)
            ws.gc(keep_turns=2, keep_days=0)
            assert ws.fsck(read_data=True).clean
            assert {s.id for s in ws.log()} == must_keep
            rec.check(ws)
        shutil.rmtree(copy)
    print(outcomes)
    # The kills landed in more than one of gc's steps.
    assert len(set(outcomes)) >= 3, outcomes
