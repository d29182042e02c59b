"""Benchmark: how small gc keeps the store, and how long gc takes against a snapshot.

1. Size. On a generated tree of ``--files`` files (default 10,000; see ``_tree.py``), a
   session records ``--steps`` steps (default 1,000), each a turn whose command changes
   ``--changed`` random files (default 10) by editing one line in each. The store's size
   on disk (its files' blocks, after a WAL checkpoint; the room the store keeps free for
   gc is not counted) is measured after 50 such steps in a fresh store (the baseline
   figure), and after the 1,000 steps: before gc, after ``takeback gc`` with the default
   policy (which keeps everything from the last 30 days: here, all of it), and after
   ``takeback gc --keep-turns 50 --keep-days 0``. Target: the last within 1.5x of the
   store after 50 steps.
2. Time. The same on ``--big-files`` files (default 100,000) with ``--big-steps`` steps:
   the real ``takeback gc --keep-turns 50 --keep-days 0`` (a subprocess, wall clock)
   against the real ``takeback snapshot`` after 10 files changed (median of 3). Target:
   gc under 5 snapshots. gc holds the store's exclusive lock (which every snapshot
   waits for) in slices; the longest single hold is reported (``longest_lock_ms`` of
   ``gc --json``; a gc from before slices held it once, ``locked_ms``). Target: at most
   1 s at a time.

The steps are recorded through the library, not the command line (a thousand command
runs would take most of an hour): each is a turn (``begin_turn``), a step row, a scan
(a full one with the scan cache: only the changed files are read again; the service,
which would list only their folders, stores the same), the snapshot row,
``join_command`` and ``end_turn``, as a hook-driven command records them. What is
stored is what a real run stores.

Run it with the project's virtualenv::

    .venv/bin/python bench/bench_gc.py                      # both parts
    .venv/bin/python bench/bench_gc.py --big-files 0        # the size part only
    .venv/bin/python bench/bench_gc.py --files 2000 --steps 200 --big-files 20000

The trees are generated once and cached under ``--base`` (default
``/tmp/takeback-bench-gc``), and put back as committed after the run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _tree import (
    BenchTree,
    bench_lock,
    checkpoint,
    ensure_tree,
    fmt_bytes,
    fmt_s,
    log,
    median,
    restore_pristine,
    write_markdown,
)

import takeback
from takeback import ops
from takeback.model import StepInfo
from takeback.store import disk_usage

SESSION = "bench"


def edit(path: Path, rng: random.Random, n: int) -> None:
    """Change one line of a file (an agent's edit: most of the file stays)."""
    lines = path.read_bytes().split(b"\n")
    i = rng.randrange(len(lines))
    lines[i] = b"    edited = %d  # step %d" % (rng.randrange(1 << 30), n)
    path.write_bytes(b"\n".join(lines))


def record_steps(tree: BenchTree, store: Path, steps: int, changed: int, seed: int) -> float:
    """Record ``steps`` steps into ``store`` (made fresh); return the seconds it took."""
    rng = random.Random(seed)
    t0 = time.monotonic()
    with takeback.Workspace(tree.root, store=store) as ws:
        ws.session(SESSION).start()
        rec = ws._recording()
        st = rec.store
        meta = st.meta
        prev = meta.snapshot(meta.session(SESSION).baseline)  # type: ignore[union-attr]
        assert prev is not None
        for i in range(steps):
            paths = rng.sample(tree.files, changed)
            n = ops.begin_turn(st, SESSION, f"step {i}", prev.id)
            with meta.tx():
                k = meta.next_step(SESSION)
                meta.add_step(StepInfo(SESSION, k, n, prev.id, None, f"step {i}", None, True))
            for p in paths:
                edit(tree.abs(p), rng, i)
            with st.lock(exclusive=False):
                result = ops.scan(st, rec.options, use_service=False)
                after = ops.record(rec, result, kind="step-after", session=SESSION, turn=n, step=k)
                with meta.tx():
                    meta.finish_step(SESSION, k, after.id, 0)
                ops.join_command(rec, SESSION, n, prev.tree, after.tree, None)
            ops.end_turn(rec, SESSION, n)
            prev = after
            if (i + 1) % 200 == 0:
                log(f"  {i + 1} steps recorded")
    return time.monotonic() - t0


def store_size(store: Path) -> int:
    checkpoint(store)
    return disk_usage(str(store))


def tb(*args: str, root: Path, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "takeback", *args, "--root", str(root), "--store", str(store)],
        capture_output=True,
        text=True,
        check=True,
    )


def size_part(base: Path, files: int, steps: int, changed: int) -> dict[str, Any]:
    tree = ensure_tree(base, files)
    work = base / "run-gc"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    small = work / "store-50"
    log(f"size: 50 steps of {changed} files on {files:,} files")
    record_steps(tree, small, 50, changed, seed=1)
    size_50 = store_size(small)
    restore_pristine(tree)
    big = work / f"store-{steps}"
    log(f"size: {steps} steps of {changed} files on {files:,} files")
    took = record_steps(tree, big, steps, changed, seed=2)
    size_all = store_size(big)
    default = json.loads(tb("gc", "--json", root=tree.root, store=big).stdout)
    size_default = store_size(big)
    t0 = time.monotonic()
    keep = ("--keep-turns", "50", "--keep-days", "0", "--json")
    kept = json.loads(tb("gc", *keep, root=tree.root, store=big).stdout)
    gc_s = time.monotonic() - t0
    size_kept = store_size(big)
    fsck = subprocess.run(
        [sys.executable, "-m", "takeback", "fsck", "--read-data", "--root", str(tree.root)]
        + ["--store", str(big)],
        capture_output=True,
        text=True,
    )
    restore_pristine(tree)
    out = {
        "files": files,
        "steps": steps,
        "changed": changed,
        "record_s": round(took, 1),
        "size_50_steps": size_50,
        "size_all_steps": size_all,
        "size_after_default_gc": size_default,
        "removed_by_default_gc": default["removed"],
        "size_after_keep_50": size_kept,
        "removed_by_keep_50": kept["removed"],
        "gc_keep_50_s": round(gc_s, 3),
        "ratio_all_to_50": round(size_all / size_50, 2),
        "ratio_default_to_50": round(size_default / size_50, 2),
        "ratio_keep_50_to_50": round(size_kept / size_50, 2),
        "fsck_exit": fsck.returncode,
    }
    shutil.rmtree(work, ignore_errors=True)
    return out


def time_part(base: Path, files: int, steps: int, changed: int) -> dict[str, Any]:
    tree = ensure_tree(base, files)
    work = base / "run-gc-time"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    store = work / "store"
    log(f"time: {steps} steps of {changed} files on {files:,} files")
    record_steps(tree, store, steps, changed, seed=3)
    rng = random.Random(4)
    snaps = []
    for i in range(3):
        for p in rng.sample(tree.files, changed):
            edit(tree.abs(p), rng, 10_000 + i)
        time.sleep(1.2)  # out of the racy window: a steady-state snapshot
        t0 = time.monotonic()
        tb("snapshot", "--session", SESSION, root=tree.root, store=store)
        snaps.append(time.monotonic() - t0)
    size_before = store_size(store)
    t0 = time.monotonic()
    r = json.loads(
        tb(
            "gc", "--keep-turns", "50", "--keep-days", "0", "--json", root=tree.root, store=store
        ).stdout
    )
    gc_s = time.monotonic() - t0
    out = {
        "files": files,
        "steps": steps,
        "snapshot_s": round(median(snaps), 3),
        "gc_s": round(gc_s, 3),
        "gc_locked_ms": r["locked_ms"],
        # A gc that held the lock once (before slices) says only ``locked_ms``.
        "gc_longest_lock_ms": r.get("longest_lock_ms", r["locked_ms"]),
        "gc_lock_slices": r.get("lock_slices", 1),
        "gc_in_snapshots": round(gc_s / median(snaps), 2),
        "removed": r["removed"],
        "size_before": size_before,
        "size_after": store_size(store),
    }
    restore_pristine(tree)
    shutil.rmtree(work, ignore_errors=True)
    return out


def print_size(s: dict[str, Any]) -> str:
    ok = "PASS" if s["ratio_keep_50_to_50"] <= 1.5 else "FAIL"
    lines = [
        f"size, {s['files']:,} files, {s['steps']} steps of {s['changed']} files:",
        f"  after 50 steps:             {fmt_bytes(s['size_50_steps'])}",
        f"  after {s['steps']} steps:           {fmt_bytes(s['size_all_steps'])}"
        f" ({s['ratio_all_to_50']}x)",
        f"  after gc, default policy:   {fmt_bytes(s['size_after_default_gc'])}"
        f" ({s['ratio_default_to_50']}x; everything is under 30 days old)",
        f"  after gc --keep-turns 50 --keep-days 0: {fmt_bytes(s['size_after_keep_50'])}"
        f" ({s['ratio_keep_50_to_50']}x, target 1.5x: {ok})",
        f"  that gc took {fmt_s(s['gc_keep_50_s'])}; fsck --read-data exit {s['fsck_exit']}",
    ]
    print("\n".join(lines), file=sys.stderr)
    return "\n".join(lines) + "\n"


def print_time(t: dict[str, Any]) -> str:
    ok = "PASS" if t["gc_in_snapshots"] < 5 else "FAIL"
    lines = [
        f"time, {t['files']:,} files, {t['steps']} steps:",
        f"  one snapshot (10 files changed):  {fmt_s(t['snapshot_s'])}",
        f"  gc --keep-turns 50 --keep-days 0: {fmt_s(t['gc_s'])}"
        f" ({t['gc_in_snapshots']}x a snapshot, target under 5: {ok});"
        f" the exclusive lock was held {t['gc_longest_lock_ms']} ms at most at a time,"
        f" {t['gc_locked_ms']} ms in all ({t['gc_lock_slices']} holds; target <= 1,000 ms"
        f" at a time: {'PASS' if t['gc_longest_lock_ms'] <= 1000 else 'FAIL'})",
        f"  store {fmt_bytes(t['size_before'])} -> {fmt_bytes(t['size_after'])}",
    ]
    print("\n".join(lines), file=sys.stderr)
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--steps", type=int, default=1_000)
    p.add_argument("--changed", type=int, default=10)
    p.add_argument("--big-files", type=int, default=100_000)
    p.add_argument("--big-steps", type=int, default=1_000)
    p.add_argument("--base", default="/tmp/takeback-bench-gc")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--markdown", default=None, metavar="FILE", help="also write the report here")
    a = p.parse_args()
    base = Path(a.base).resolve()
    figures: dict[str, object] = {"load_before": os.getloadavg()[0]}
    report = ""
    with bench_lock(base):
        if a.files:
            s = size_part(base, a.files, a.steps, a.changed)
            figures["size"] = s
            report += print_size(s)
        if a.big_files:
            t = time_part(base, a.big_files, a.big_steps, a.changed)
            figures["time"] = t
            report += print_time(t)
    figures["load_after"] = os.getloadavg()[0]
    if a.json:
        print(json.dumps(figures, indent=2))
    if a.markdown:
        command = " ".join(["bench/bench_gc.py", *sys.argv[1:]])
        write_markdown(a.markdown, "gc: the store's size, gc's time and its lock", report, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
