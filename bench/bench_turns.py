"""Benchmark: the library's turn API, ``turn.touch()`` and ``turn.command()``.

On the tree that ``bench_snapshot.py`` uses (generated once and cached under ``--base``,
default ``/tmp/takeback-bench``; see ``_tree.py``), through ``from takeback import
Workspace`` in this process:

1. ``turn.touch(path)`` of a 100 KB file (code-like text): the median, p90 and max over
   ``--touches`` (default 50) touches of different files within one turn. Target: under
   1 ms per file. The files are written into ``_bench_turns/`` of the tree before the
   store's first snapshot (so they are ordinary, unchanged, tracked-by-takeback files) and
   removed at the end. Every file of the tree is read once first (a warm page cache).
2. ``turn.command(...)`` with no changes: the enter and exit of ``with turn.command(label):
   pass``, which takes a snapshot before and after (median of ``--repeat``, default 5),
   shown beside an unchanged in-process ``Workspace.snapshot()`` and an unchanged
   ``takeback snapshot`` run as a subprocess (start-up included). The brief gives no
   target for it; the derived one printed is two in-process snapshots plus 10%.
3. ``session.undo()`` of a turn whose command rewrote 10 files of the tree (new ones each
   round; median of ``--repeat``): the operation's own pre-undo snapshot, its checks
   (each file hashed against the record) and the 10 writes, shown against an unchanged
   in-process snapshot. Each undo is checked to put the 10 files back byte for byte.

It also checks the results: every touch keeps its file, the no-change commands and the
turn report no changes, and a touched file that is then modified is listed by the turn and
put back by ``session.undo()``.

Run it with the project's virtualenv::

    .venv/bin/python bench/bench_turns.py --files 10000   # quick
    .venv/bin/python bench/bench_turns.py                  # full: 100,000 files
    .venv/bin/python bench/bench_turns.py --json           # JSON on stdout, table on stderr

takeback runs from a copy of its package taken at the start (under ``--base``, first on
``PYTHONPATH``), so that edits made to an editable install during the run do not mix
versions; ``--no-freeze`` runs the live package (e.g. with ``--takeback`` of another
install). A warning is printed if the package measured changed during the run.

Options: ``--files N``, ``--touches K``, ``--repeat R``, ``--base DIR``, ``--takeback PATH``,
``--json``. Exit status: 0, or 1 if a correctness check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _tree import (
    DEFAULT_BASE,
    DEFAULT_FILES,
    SOURCE_CHANGED,
    bench_run,
    fmt_s,
    log,
    make_line_pool,
    make_text,
    median,
    source_digest,
    warm_cache,
)

BIG = 100 * 1024
BIG_DIR = "_bench_turns"
TOUCH_TARGET_S = 0.001
COMMAND_TARGET_X = 2.2  # derived: two snapshots plus 10%


def p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]


def cli_snapshot(tb: str, root: Path, store: Path) -> float:
    cmd = [tb, "snapshot", "--root", str(root), "--store", str(store), "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, check=False)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"takeback snapshot failed: {proc.stderr.decode(errors='replace')}")
    return dt


def run(tree_root: Path, work: Path, tb: str, touches: int, repeat: int) -> dict[str, Any]:
    from takeback import Workspace

    r: dict[str, Any] = {"errors": []}
    errors: list[str] = r["errors"]
    big = tree_root / BIG_DIR
    big.mkdir()
    rng = random.Random(4242)
    pool = make_line_pool(seed=11)
    paths = []
    for i in range(touches + 1):
        p = big / f"big_{i:03d}.py"
        p.write_bytes(make_text(rng, pool, BIG, BIG))
        paths.append(p)
    time.sleep(1.2)  # past the race window: the files are plain unchanged files
    store = work / "store"
    ws = Workspace(tree_root, store=store)
    try:
        log("first snapshot")
        t0 = time.perf_counter()
        ws.snapshot("first")
        r["first_snapshot_s"] = time.perf_counter() - t0
        log(f"  {fmt_s(r['first_snapshot_s'])}; unchanged snapshots, in process and CLI")
        r["snapshot_inproc_s"] = []
        r["snapshot_cli_s"] = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            ws.snapshot("unchanged")
            r["snapshot_inproc_s"].append(time.perf_counter() - t0)
            ws.close()
            r["snapshot_cli_s"].append(cli_snapshot(tb, tree_root, store))

        session = ws.session("bench")
        turn = session.turn("touch bench")
        log(f"{touches} touches of 100 KB files in turn {turn.n}")
        r["touch_s"] = []
        for p in paths[:touches]:
            t0 = time.perf_counter()
            kept = turn.touch(str(p))
            r["touch_s"].append(time.perf_counter() - t0)
            if not kept:
                errors.append(f"touch of {p.name} returned False (not kept)")
        log(f"  median {fmt_s(median(r['touch_s']))}; {repeat} no-change commands")
        r["command_s"] = []
        for i in range(repeat):
            t0 = time.perf_counter()
            with turn.command(f"noop {i}") as step:
                pass
            r["command_s"].append(time.perf_counter() - t0)
            if step.changed:
                errors.append(f"no-change command {i} reported changes: {step.changed}")
            if step.before is None or step.after is None:
                errors.append(
                    f"no-change command {i} lacks a snapshot "
                    f"(before={step.before}, after={step.after})"
                )
        changes = turn.end()
        if changes:
            errors.append(
                f"turn with touches but no writes lists changes: {[c.path for c in changes][:5]}"
            )

        log(f"{repeat} undos of a command turn that rewrote {UNDO_FILES} files")
        r["undo_s"] = []
        rng = random.Random(7)
        tree_files = [
            q for q in tree_root.rglob("*.py") if ".git" not in q.parts and BIG_DIR not in q.parts
        ][:5000]
        for i in range(repeat):
            picked = rng.sample(tree_files, UNDO_FILES)
            old = {q: q.read_bytes() for q in picked}
            with session.turn(f"rewrite {i}") as tw, tw.command("a formatter"):
                for q in picked:
                    q.write_bytes(old[q] + f"# rewritten {i}\n".encode())
            time.sleep(1.1)  # out of the race window, as a person's undo later would be
            t0 = time.perf_counter()
            session.undo()
            r["undo_s"].append(time.perf_counter() - t0)
            if any(q.read_bytes() != old[q] for q in picked):
                errors.append(f"undo {i} did not put the {UNDO_FILES} files back")

        log("check: touch, modify, end, undo")
        victim = paths[touches]
        original = victim.read_bytes()
        with session.turn("check") as t2:
            t2.touch(str(victim))
            victim.write_bytes(original + b"# changed\n")
        listed = [c.path for c in t2.changes]
        if listed != [f"{BIG_DIR}/{victim.name}"]:
            errors.append(f"turn that modified one touched file lists {listed}")
        session.undo()
        if victim.read_bytes() != original:
            errors.append("session.undo() did not put the touched file back")
    finally:
        ws.close()
        shutil.rmtree(big, ignore_errors=True)
    return r


#: files the timed undo's turn rewrote
UNDO_FILES = 10


def summarize(r: dict[str, Any], meta: dict[str, Any]) -> tuple[list[list[str]], dict[str, Any]]:
    m = {
        k: median(v) for k, v in r.items() if isinstance(v, list) and v and isinstance(v[0], float)
    }
    touch = m["touch_s"]
    cmd, inproc, cli = m["command_s"], m["snapshot_inproc_s"], m["snapshot_cli_s"]
    rows = [
        [
            "turn.touch(), 100 KB file (median)",
            fmt_s(touch),
            "",
            "",
            "< 1 ms",
            "PASS" if touch < TOUCH_TARGET_S else "FAIL",
        ],
        [
            "  p90 / max",
            f"{fmt_s(p90(r['touch_s']))} / {fmt_s(max(r['touch_s']))}",
            "",
            "",
            "(info)",
            "",
        ],
        [
            "turn.command() no changes",
            fmt_s(cmd),
            "in-process snapshot",
            fmt_s(inproc),
            f"<= {COMMAND_TARGET_X:.1f}x ({cmd / inproc:.2f}x; derived)",
            "PASS" if cmd <= COMMAND_TARGET_X * inproc else "FAIL",
        ],
        ["", "", "takeback snapshot (CLI)", fmt_s(cli), f"(info: {cmd / cli:.2f}x)", ""],
        ["first snapshot (library)", fmt_s(r["first_snapshot_s"]), "", "", "(info)", ""],
        [
            f"session.undo(), {UNDO_FILES}-file turn",
            fmt_s(m["undo_s"]),
            "in-process snapshot",
            fmt_s(inproc),
            f"(info: {m['undo_s'] / inproc:.2f}x)",
            "",
        ],
    ]
    doc = {
        "meta": meta,
        "medians": m,
        "samples": {k: v for k, v in r.items() if isinstance(v, list)},
        "first_snapshot_s": r["first_snapshot_s"],
        "touch_p90_s": p90(r["touch_s"]),
        "touch_max_s": max(r["touch_s"]),
        "pass": {"touch": touch < TOUCH_TARGET_S, "command": cmd <= COMMAND_TARGET_X * inproc},
        "targets": {"touch_s": TOUCH_TARGET_S, "command_vs_inproc_snapshot": COMMAND_TARGET_X},
        "errors": r["errors"],
    }
    return rows, doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=DEFAULT_FILES, help="files in the tree")
    p.add_argument("--touches", type=int, default=50, help="100 KB files touched")
    p.add_argument("--repeat", type=int, default=5, help="commands and snapshots timed")
    p.add_argument("--base", default=DEFAULT_BASE, help="where trees and stores live")
    p.add_argument("--takeback", default=None, help="the takeback executable (CLI figure)")
    p.add_argument(
        "--no-freeze",
        dest="freeze",
        action="store_false",
        help="run the live package instead of a copy taken at the start",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the figures as JSON on stdout (the table then goes to stderr)",
    )
    args = p.parse_args(argv)
    with bench_run(
        args.base, args.files, "run-turns", takeback=args.takeback, freeze=args.freeze
    ) as setting:
        tree, work = setting.tree, setting.work
        warm_cache(tree)
        r = run(tree.root, work, setting.takeback, args.touches, args.repeat)
    import takeback

    meta = {
        "files": len(tree.files),
        "touches": args.touches,
        "repeat": args.repeat,
        "takeback": takeback.__version__,
        "revision": setting.revision,
        "package": os.path.dirname(takeback.__file__),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "tree": str(tree.root),
        "store": str(work / "store"),
        "loadavg_1min_start": setting.load_before,
        "loadavg_1min_end": round(os.getloadavg()[0], 2),
        "source_changed": source_digest() != setting.source_before,
    }
    rows, doc = summarize(r, meta)
    out = sys.stderr if args.json else sys.stdout
    head = ["measure", "takeback", "compared with", "", "target", "result"]
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    print(
        f"\ntakeback turn API: {meta['files']} files, {args.touches} touches of 100 KB "
        f"files, medians of {args.repeat}\n(takeback {meta['takeback']} {meta['revision']}, "
        f"Python {meta['python']}, {meta['cpus']} CPUs, load average "
        f"{meta['loadavg_1min_start']} at start, {meta['loadavg_1min_end']} at end)",
        file=out,
    )
    if meta["source_changed"]:
        print(SOURCE_CHANGED, file=out)
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    print(line, file=out)
    print("-" * len(line), file=out)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
    if r["errors"]:
        print("\nCORRECTNESS ERRORS:", file=out)
        for e in r["errors"]:
            print(f"  {e}", file=out)
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    return 1 if r["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
