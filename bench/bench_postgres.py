"""Benchmark: the PostgreSQL store against the folder store, and eight processes at once.

1. A 10-file step on an N-file tree (default N = 10,000, generated once and cached under
   ``--base``, see ``_tree.py``): the real ``takeback snapshot --json`` into a folder store
   and into PostgreSQL over loopback (127.0.0.1, TCP), timed by wall clock in this script
   (process start-up included). Each round rewrites 10 random files (new ones each
   round), waits until they are over 1.2 s old, then takes one snapshot into each store,
   the order alternating from round to round; an unchanged snapshot into each is timed
   too. Figures are medians over ``--repeat`` rounds; "ratio" is PostgreSQL over folder.
2. Two "servers" (each its own HOME, so its own local folders) on one workspace and one
   database: ``--workers`` processes at once (default 8, half on each server), each
   looping ``--rounds`` times over a turn (begin, touch, write, end), an undo of it, a
   snapshot, a rewind of its own folder to it, and ``status``; each checks that every
   restore left its folder byte for byte as expected. One more worker is killed with
   SIGKILL while it runs. Then: failures (must be 0), inexact restores (must be 0) and
   advisory locks still held in the database (must be 0).

The PostgreSQL server is a throwaway one this script starts (``initdb``/``pg_ctl`` as in
``tests/_postgres.py``, with PostgreSQL's default durability: fsync on, as the folder
store's SQLite files are synced), or the one ``--url`` names.

Run it with the project's virtualenv (its ``takeback`` is the one measured)::

    .venv/bin/python bench/bench_postgres.py                 # ~2-3 min
    .venv/bin/python bench/bench_postgres.py --json > figures.json

Exit status: 0, or 1 if a correctness check failed (a target's PASS/FAIL does not change it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _tree import (
    DEFAULT_BASE,
    bench_run,
    fmt_s,
    log,
    make_line_pool,
    make_text,
    median,
    run_checked,
    warm_cache,
)

CHANGED_FILES = 10
SETTLE_S = 1.2
TARGETS = {"step_ratio": 1.5, "failures": 0, "inexact": 0, "locks_left": 0}


@contextmanager
def database(url: str | None) -> Iterator[str]:
    """Yield the URL of a database to use: ``url``, or one on a server started here."""
    if url:
        yield url
        return
    from tests._postgres import find_bindir, running_server

    bindir = find_bindir()
    if bindir is None:
        sys.exit("no PostgreSQL server found (Debian: apt-get install postgresql), or --url")
    with running_server(bindir, durable=True) as server:
        yield server.create_db("bench")


def env_for(home: Path, store: str) -> dict[str, str]:
    """The environment of one "server": its own HOME and data folders, and its store."""
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "TAKEBACK_STORE": store,
    }


# -- 1. a 10-file step ------------------------------------------------------------------


def step_bench(tb: str, tree_root: Path, files: list[str], work: Path, url: str, repeat: int):
    folder = str(work / "folder-store")
    pg = f"{url}#bench-step"
    envs = {
        "folder": env_for(work / "home-folder", folder),
        "postgres": env_for(work / "home-pg", pg),
    }

    def snap(which: str) -> float:
        t0 = time.perf_counter()
        run_checked([tb, "snapshot", "--root", str(tree_root), "--json"], env=envs[which])
        return time.perf_counter() - t0

    log("first snapshots (untimed)")
    for which in envs:
        snap(which)
    time.sleep(SETTLE_S)
    for which in envs:
        snap(which)  # settled: the next unchanged run is the steady state
    rng = random.Random(7)
    pool = make_line_pool()
    times: dict[str, list[float]] = {"folder": [], "postgres": [], "folder0": [], "postgres0": []}
    for r in range(repeat):
        order = ["folder", "postgres"] if r % 2 == 0 else ["postgres", "folder"]
        for which in order:
            times[which + "0"].append(snap(which))
        for rel in rng.sample(files, CHANGED_FILES):
            (tree_root / rel).write_bytes(make_text(rng, pool))
        time.sleep(SETTLE_S)
        for which in order:
            times[which].append(snap(which))
        log(
            f"round {r + 1}: step folder {fmt_s(times['folder'][-1])}, "
            f"postgres {fmt_s(times['postgres'][-1])}"
        )
    out = {k: median(v) for k, v in times.items()}
    out["step_ratio"] = out["postgres"] / out["folder"]
    out["unchanged_ratio"] = out["postgres0"] / out["folder0"]
    return out


# -- 2. processes at once ----------------------------------------------------------------

_WORKER = r"""
import json, os, subprocess, sys, time, random
tb, ws, name, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mine = os.path.join(ws, name)
failures, inexact, done = [], 0, 0
rng = random.Random(name)

def run(*args):
    p = subprocess.run([tb, "--session", name, *args], capture_output=True, text=True, cwd=ws)
    if p.returncode != 0:
        failures.append(f"{' '.join(args)} -> {p.returncode}: {p.stderr.strip()[-300:]}")
    return p

def state():
    out = {}
    for n in sorted(os.listdir(mine)):
        with open(os.path.join(mine, n), "rb") as f:
            out[n] = f.read()
    return out

for r in range(rounds):
    before = state()
    run("turn", "begin", "-m", f"round {r}")
    names = rng.sample(sorted(before), 3)
    run("touch", *[f"{name}/{n}" for n in names])
    for n in names:
        with open(os.path.join(mine, n), "wb") as f:
            f.write(os.urandom(200))
    run("turn", "end")
    run("undo")
    inexact += state() != before
    sid = run("snapshot", "-m", f"{name} {r}").stdout.strip()
    kept = state()
    for n in rng.sample(sorted(kept), 2):
        with open(os.path.join(mine, n), "wb") as f:
            f.write(b"scribble " + os.urandom(50))
    if sid:
        run("rewind", "--to", sid, "--", mine)
        inexact += state() != kept
    run("status")
    done += 1
print(json.dumps({"failures": failures, "inexact": inexact, "rounds": done}))
"""


def locks_held(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            b"SELECT count(*) FROM pg_locks WHERE locktype='advisory' AND granted"
        ).fetchone()
    return int(row[0]) if row else 0


def crowd_bench(tb: str, work: Path, url: str, workers: int, rounds: int) -> dict[str, Any]:
    ws = work / "crowd"
    ws.mkdir()
    rng = random.Random(3)
    names = [f"w{i}" for i in range(workers + 1)]  # the last one is the one killed
    for n in names:
        (ws / n).mkdir()
        for j in range(20):
            (ws / n / f"f{j}.txt").write_bytes(bytes(rng.randrange(256) for _ in range(300)))
    for j in range(200):
        (ws / f"shared{j}.txt").write_text(f"shared {j}\n")
    store = f"{url}#bench-crowd"
    homes = [work / "home-a", work / "home-b"]
    run_checked([tb, "snapshot", "--root", str(ws)], env=env_for(homes[0], store))
    script = work / "worker.py"
    script.write_text(_WORKER)
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), tb, str(ws), n, str(rounds)],
            env=env_for(homes[i % 2], store),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, n in enumerate(names)
    ]
    victim = procs[-1]
    time.sleep(4.0)
    # kill -9 the whole process group would take the CLI it runs too; kill the worker and
    # the takeback command it runs now (the process that holds a connection).
    kids = subprocess.run(
        ["pgrep", "-P", str(victim.pid)], capture_output=True, text=True
    ).stdout.split()
    for pid in [*kids, str(victim.pid)]:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    results = []
    for p in procs[:-1]:
        out, err = p.communicate(timeout=1800)
        try:
            results.append(json.loads(out.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            results.append({"failures": [f"worker died: {err[-500:]}"], "inexact": 0, "rounds": 0})
    victim.communicate()
    elapsed = time.perf_counter() - t0
    # The last command of the killed worker may have died mid-restore: the others
    # finished theirs regardless; the database has dropped its session's locks.
    time.sleep(1.0)
    failures = [f for r in results for f in r["failures"]]
    for f in failures[:10]:
        log(f"failure: {f}")
    return {
        "workers": workers,
        "rounds": sum(r["rounds"] for r in results),
        "failures": len(failures),
        "inexact": sum(r["inexact"] for r in results),
        "killed": 1,
        "locks_left": locks_held(url),
        "seconds": elapsed,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base", default=DEFAULT_BASE)
    ap.add_argument("--url", default=None, help="a PostgreSQL database (default: start one)")
    ap.add_argument("--takeback", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with (
        bench_run(args.base, args.files, "pg", takeback=args.takeback, freeze=False) as run,
        database(args.url) as url,
    ):
        warm_cache(run.tree)
        step = step_bench(run.takeback, run.tree.root, run.tree.files, run.work, url, args.repeat)
        crowd = crowd_bench(run.takeback, run.work, url, args.workers, args.rounds)
        shutil.rmtree(run.work, ignore_errors=True)
    figures = {
        "files": args.files,
        "load": os.getloadavg()[0],
        "step": step,
        "crowd": crowd,
        "revision": run.revision,
    }
    checks = {
        "step_ratio": step["step_ratio"] <= TARGETS["step_ratio"],
        "failures": crowd["failures"] == 0,
        "inexact": crowd["inexact"] == 0,
        "locks_left": crowd["locks_left"] == 0,
    }
    lines = [
        f"10-file step on {args.files} files: folder {fmt_s(step['folder'])}, "
        f"postgres {fmt_s(step['postgres'])}, ratio {step['step_ratio']:.2f} "
        f"(target <= {TARGETS['step_ratio']}) {'PASS' if checks['step_ratio'] else 'FAIL'}",
        f"unchanged snapshot: folder {fmt_s(step['folder0'])}, postgres "
        f"{fmt_s(step['postgres0'])}, ratio {step['unchanged_ratio']:.2f}",
        f"{crowd['workers']} processes at once (+1 killed with SIGKILL): {crowd['rounds']} "
        f"rounds in {crowd['seconds']:.1f} s, {crowd['failures']} failures, "
        f"{crowd['inexact']} inexact restores, {crowd['locks_left']} advisory locks left",
    ]
    for line in lines:
        print(line, file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0 if all(checks[k] for k in ("failures", "inexact", "locks_left")) else 1


if __name__ == "__main__":
    sys.exit(main())
