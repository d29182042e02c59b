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
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import takeback
from takeback.ops._keep import plan
from takeback.ops._policy import Policy
from takeback.store import FolderStore

from ._gc import build_history
from .conftest import SRC

RUNS = 20
#: where the runs aim their kill, in turn (gc names each step on stderr before it)
TARGETS = ("start", "history", "objects", "reclaim")


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
        # Each run aims at one of gc's steps in turn (after the line naming it, within
        # or just past its pause), so that the kills land in every step whatever the
        # machine's speed; "start" kills before gc has named any step.
        target = TARGETS[run % len(TARGETS)]
        seen: list[str] = []
        assert proc.stderr is not None
        if target == "start":
            time.sleep(rng.uniform(0.0, 0.3))
        else:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = proc.stderr.readline()
                if not line:
                    break  # gc ended before reaching the step (nothing to rewrite, say)
                seen.append(line)
                if line.rstrip().endswith(f"gc: {target}"):
                    break
            time.sleep(rng.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        _out, err = proc.communicate(timeout=60)
        err = "".join(seen) + err
        steps = [line.rsplit(" ", 1)[-1] for line in err.splitlines() if "gc:" in line]
        outcomes.append(steps[-1] if steps else "start")
        with takeback.Workspace(root, store=copy) as ws:
            check = ws.fsck(read_data=True)
            assert check.clean, (run, steps, check.problems)
            left = set(rec.check(ws))
            assert must_keep <= left, (run, steps)
            ws.gc(keep_turns=2, keep_days=0)
            assert ws.fsck(read_data=True).clean
            assert {s.id for s in ws.log()} == must_keep
            rec.check(ws)
        shutil.rmtree(copy)
    print(outcomes)
    # The kills landed in more than one of gc's steps.
    assert len(set(outcomes)) >= 3, outcomes
