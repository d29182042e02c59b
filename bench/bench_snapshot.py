"""Benchmark: ``takeback snapshot`` and ``takeback rewind`` against git and the lstat floor.

What it measures, on a generated tree of N files of 1-8 KB of code-like text in N/20
folders (default N = 100,000; a git repository with everything committed; generated once
and cached under ``--base``, default ``/tmp/takeback-bench``, see ``_tree.py``):

1. unchanged snapshot: the real ``takeback snapshot --root TREE --store STORE --json``
   run as a subprocess, timed by wall clock in this script (process start-up included);
2. git's method on the same tree: ``GIT_INDEX_FILE=<copy of the index> git add -A &&
   git write-tree`` (the copy is made outside the timing; like takeback's cache, the
   index carried from one run to the next is the one the previous run wrote, starting
   from ``.git/index``);
3. after rewriting 10 random files (new ones each round): the same two, both seeing the
   same 10 changes, their order alternating from round to round;
4. ``takeback rewind --to <the unchanged snapshot before the changes>`` (which also takes
   its pre-rewind snapshot), checked to restore the 10 files byte for byte, against an
   unchanged snapshot;
5. the first snapshot into a fresh store against git's first snapshot into a new shadow
   repository (``git --git-dir=X init``, then ``add -A`` and ``write-tree`` with
   ``--work-tree=TREE``), init included; both "cold" in the sense of a new store and a
   new repository (nothing cached by either tool), with the page cache warm (every file
   read once first), taken in alternating order; their CPU time (user + system, of the
   process and its children) is shown beside the wall clock, since on a shared machine
   it moves less with the load;
6. the store's size on disk (du) against the tree's (du without ``.git``), and the store's
   growth for one 10-file step: the sum of the store's file sizes (WAL and SHM files
   count) after the snapshot minus before, each measured after a WAL checkpoint;
7. the floor: ``find . -path ./.git -prune -o -printf '%s %T@\\n'`` (an lstat of every
   entry, the work no scan that trusts no watcher can skip);
8. ``takeback --version`` start-up (median of 20; ``python -c pass`` shown beside it).

Each round first "settles" the tree (waits until the last write is over 1.2 s old, then
takes an untimed snapshot with each tool), so that the "unchanged" figures are the steady
state and not the re-hash of files written a moment ago (takeback and git both distrust
timestamps that close). The unchanged snapshot, git's run and the floor run in a rotating
order. Every file is read once before the first snapshots so that no tool pays for a cold
page cache. Figures are medians over ``--repeat`` rounds; "ratio" is the ratio of the
medians (PASS/FAIL is judged on it), "paired" the median of the per-round ratios of two
figures taken a moment apart (less sensitive to a load that drifts during the run).

Run it with the project's virtualenv (its ``takeback`` is the one measured)::

    .venv/bin/python bench/bench_snapshot.py --files 10000   # quick (~1 min)
    .venv/bin/python bench/bench_snapshot.py                  # full: 100,000 files
    .venv/bin/python bench/bench_snapshot.py --json > figures.json  # table on stderr

takeback runs from a copy of its package taken at the start (under ``--base``, first on
``PYTHONPATH``), so that edits made to an editable install during the run do not mix
versions; ``--no-freeze`` runs the live package (e.g. with ``--takeback`` of another
install). A warning is printed if the package measured changed during the run.

Options: ``--files N``, ``--repeat R`` (default 5), ``--repeat-first R`` (default 3),
``--growth-steps K`` (default 5), ``--base DIR``, ``--takeback PATH``, ``--json``.
The tree is modified during the run and put back; do not run two benchmarks on the same
``--base`` at once (a lock file refuses it). Exit status: 0, or 1 if a correctness check
failed (PASS/FAIL of the targets does not change it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
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
    BenchTree,
    bench_run,
    checkpoint,
    console_script,
    du_bytes,
    files_size,
    fmt_bytes,
    fmt_s,
    git,
    git_env,
    log,
    make_line_pool,
    make_text,
    median,
    native_listing,
    run_checked,
    source_digest,
    time_git_add,
    timed,
    warm_cache,
    write_markdown,
)

CHANGED_FILES = 10
SETTLE_S = 1.2
VERSION_RUNS = 20

TARGETS = {
    "snapshot_vs_git": 1.0,
    "snapshot_vs_floor": 1.3,
    "rewind_vs_unchanged": 1.5,
    "growth_bytes": 100 * 1024,
    "first_vs_git": 0.5,
    "version_s": 0.100,
}


def children_cpu() -> float:
    """Return the CPU seconds (user + system) of every child waited for so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Runner:
    """One benchmark run: a fresh work folder, the stores and git indexes it uses."""

    def __init__(
        self,
        tree: BenchTree,
        tb: str,
        work: Path,
        repeat: int,
        repeat_first: int,
        growth_steps: int,
    ) -> None:
        self.tree = tree
        self.tb = tb
        self.work = work
        self.repeat = repeat
        self.repeat_first = repeat_first
        self.growth_steps = growth_steps
        self.store = work / "store-0"
        self.git_state = work / "git-index"  # the index git's method carries between runs
        self.git_tmp = work / "git-index.tmp"
        self.env = git_env()
        self.env_index = git_env(GIT_INDEX_FILE=str(self.git_tmp))
        self.pool = make_line_pool(seed=7)
        self.last_write = 0.0
        self.errors: list[str] = []
        self.scan_ms: list[int] = []  # takeback's own duration_ms of each scan (for info)
        self.r: dict[str, Any] = {}

    # -- the tools -----------------------------------------------------------------------

    def tb_snapshot(self, store: Path | None = None) -> tuple[float, str]:
        cmd = [
            self.tb,
            "snapshot",
            "--root",
            str(self.tree.root),
            "--store",
            str(store or self.store),
            "--json",
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, check=False)
        dt = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(
                f"takeback snapshot exited {proc.returncode}: "
                f"{proc.stderr.decode(errors='replace')}"
            )
        doc = json.loads(proc.stdout)
        self.scan_ms.append(doc.get("duration_ms"))
        return dt, doc["id"]

    def tb_rewind(self, to: str) -> tuple[float, dict[str, Any]]:
        cmd = [
            self.tb,
            "rewind",
            "--to",
            to,
            "--root",
            str(self.tree.root),
            "--store",
            str(self.store),
            "--json",
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, check=False)
        dt = time.perf_counter() - t0
        self.last_write = time.time()
        if proc.returncode != 0:
            raise RuntimeError(
                f"takeback rewind exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"
            )
        return dt, json.loads(proc.stdout)

    def git_snapshot(self) -> float:
        """git's method on the carried index (the copy is not timed)."""
        return time_git_add(str(self.tree.root), self.env_index, self.git_state, self.git_tmp)

    def git_first(self, gitdir: Path) -> float:
        """git's first snapshot: a new shadow repository of the tree (init included)."""
        root = str(self.tree.root)
        wt = ["git", f"--git-dir={gitdir}", f"--work-tree={root}"]
        t0 = time.perf_counter()
        subprocess.run(
            ["git", f"--git-dir={gitdir}", "init", "-q"], cwd=root, env=self.env, check=True
        )
        subprocess.run([*wt, "add", "-A"], cwd=root, env=self.env, check=True)
        subprocess.run(
            [*wt, "write-tree"], cwd=root, env=self.env, check=True, stdout=subprocess.DEVNULL
        )
        dt = time.perf_counter() - t0
        # Untimed: git does not wait for its writes to reach the disk, and the next process
        # to sync a file on this file system would (ext4's ordered journal writes them first).
        os.sync()
        return dt

    def floor(self) -> float:
        cmd = ["find", ".", "-path", "./.git", "-prune", "-o", "-printf", "%s %T@\\n"]
        return timed(
            lambda: subprocess.run(cmd, cwd=self.tree.root, check=True, stdout=subprocess.DEVNULL)
        )

    # -- the tree ------------------------------------------------------------------------

    def change_files(self, tag: str) -> dict[str, bytes]:
        """Rewrite CHANGED_FILES random files with new content; return their old bytes."""
        rng = random.Random(f"change-{tag}")
        picked = rng.sample(self.tree.files, CHANGED_FILES)
        old: dict[str, bytes] = {}
        for rel in picked:
            p = self.tree.abs(rel)
            old[rel] = p.read_bytes()
            new = make_text(rng, self.pool)
            while new == old[rel]:
                new = make_text(rng, self.pool)
            p.write_bytes(new)
        self.last_write = time.time()
        return old

    def check_rewind(self, doc: dict[str, Any], old: dict[str, bytes], what: str) -> bool:
        ok = True
        restored = set(doc.get("restored") or [])
        if restored != set(old):
            self.errors.append(
                f"{what}: rewind restored {sorted(restored)}, expected {sorted(old)}"
            )
            ok = False
        if doc.get("not_restored"):
            self.errors.append(f"{what}: rewind did not restore {doc['not_restored']}")
            ok = False
        for rel, data in old.items():
            if self.tree.abs(rel).read_bytes() != data:
                self.errors.append(f"{what}: {rel} differs from its content before the change")
                ok = False
        if not ok:  # leave the tree as committed, whatever takeback did
            for rel, data in old.items():
                self.tree.abs(rel).write_bytes(data)
            self.last_write = time.time()
        return ok

    def settle(self) -> str:
        """Let the last writes age past the race window, then snapshot with each tool."""
        wait = self.last_write + SETTLE_S - time.time()
        if wait > 0:
            time.sleep(wait)
        _, sid = self.tb_snapshot()
        self.git_snapshot()
        return sid

    # -- phases --------------------------------------------------------------------------

    def first_snapshots(self) -> None:
        log("warming the page cache (every file read once)")
        warm_cache(self.tree)
        self.floor()
        time.sleep(SETTLE_S)
        tb_times: list[float] = []
        git_times: list[float] = []
        tb_cpu: list[float] = []
        git_cpu: list[float] = []
        for i in range(self.repeat_first):
            store = self.work / f"store-{i}"
            shadow = self.work / f"shadow-{i}.git"

            def run_tb(store: Path = store) -> None:
                c0 = children_cpu()
                tb_times.append(self.tb_snapshot(store)[0])
                tb_cpu.append(children_cpu() - c0)
                log(f"  first takeback snapshot: {fmt_s(tb_times[-1])} (cpu {fmt_s(tb_cpu[-1])})")

            def run_git(shadow: Path = shadow) -> None:
                c0 = children_cpu()
                git_times.append(self.git_first(shadow))
                git_cpu.append(children_cpu() - c0)
                log(
                    f"  first git snapshot (shadow repo): {fmt_s(git_times[-1])} "
                    f"(cpu {fmt_s(git_cpu[-1])})"
                )

            for step in (run_tb, run_git) if i % 2 == 0 else (run_git, run_tb):
                step()
            if i == 0:
                checkpoint(store)
                self.r["store_after_first_du"] = du_bytes(store)
                self.r["store_after_first_files"] = files_size(store)
                self.r["git_shadow_du"] = du_bytes(shadow)
            else:
                shutil.rmtree(store)
            shutil.rmtree(shadow)
        self.r["first_takeback_s"] = tb_times
        self.r["first_git_s"] = git_times
        self.r["first_takeback_cpu_s"] = tb_cpu
        self.r["first_git_cpu_s"] = git_cpu

    def rounds(self) -> None:
        shutil.copyfile(self.tree.root / ".git" / "index", self.git_state)
        keys = (
            "unchanged_takeback_s",
            "unchanged_git_s",
            "floor_s",
            "changed_takeback_s",
            "changed_git_s",
            "rewind_s",
            "unchanged_scan_reported_s",
            "changed_scan_reported_s",
        )
        samples: dict[str, list[float]] = {k: [] for k in keys}
        rewind_ok = []
        for i in range(self.repeat):
            self.settle()
            before = ""

            def tb_unchanged() -> None:
                nonlocal before
                dt, before = self.tb_snapshot()
                samples["unchanged_takeback_s"].append(dt)
                samples["unchanged_scan_reported_s"].append(self.scan_ms[-1] / 1000)

            def git_unchanged() -> None:
                samples["unchanged_git_s"].append(self.git_snapshot())

            def find_floor() -> None:
                samples["floor_s"].append(self.floor())

            steps = [tb_unchanged, git_unchanged, find_floor]
            for step in steps[i % 3 :] + steps[: i % 3]:
                step()
            old = self.change_files(f"round-{i}")

            def tb_changed() -> None:
                samples["changed_takeback_s"].append(self.tb_snapshot()[0])
                samples["changed_scan_reported_s"].append(self.scan_ms[-1] / 1000)

            def git_changed() -> None:
                samples["changed_git_s"].append(self.git_snapshot())

            for step in (tb_changed, git_changed) if i % 2 == 0 else (git_changed, tb_changed):
                step()
            dt, doc = self.tb_rewind(before)
            samples["rewind_s"].append(dt)
            rewind_ok.append(self.check_rewind(doc, old, f"round {i}"))
            last = {k: fmt_s(v[-1]) for k, v in samples.items()}
            log(
                f"  round {i + 1}/{self.repeat}: unchanged tb {last['unchanged_takeback_s']}"
                f" git {last['unchanged_git_s']} floor {last['floor_s']};"
                f" 10 changed tb {last['changed_takeback_s']} git {last['changed_git_s']};"
                f" rewind {last['rewind_s']}"
            )
        self.r.update(samples)
        self.r["rewind_ok"] = rewind_ok

    def growth(self) -> None:
        growth, raw = [], []
        for k in range(self.growth_steps):
            before = self.settle()
            checkpoint(self.store)
            s0 = files_size(self.store)
            old = self.change_files(f"growth-{k}")
            self.tb_snapshot()
            s_raw = files_size(self.store)
            checkpoint(self.store)
            s1 = files_size(self.store)
            growth.append(s1 - s0)
            raw.append(s_raw - s0)
            _, doc = self.tb_rewind(before)
            self.check_rewind(doc, old, f"growth step {k}")
            log(
                f"  growth step {k + 1}/{self.growth_steps}: {fmt_bytes(s1 - s0)} "
                f"(before the checkpoint: {fmt_bytes(s_raw - s0)})"
            )
        self.r["growth_bytes"] = growth
        self.r["growth_raw_bytes"] = raw

    def startup(self) -> None:
        tb = [timed(lambda: run_checked([self.tb, "--version"])) for _ in range(VERSION_RUNS)]
        py = [
            timed(lambda: run_checked([sys.executable, "-c", "pass"])) for _ in range(VERSION_RUNS)
        ]
        self.r["version_s"] = tb
        self.r["python_startup_s"] = py

    def sizes(self) -> None:
        checkpoint(self.store)
        self.r["store_end_du"] = du_bytes(self.store)
        self.r["store_end_files"] = files_size(self.store)
        self.r["tree_du"] = du_bytes(self.tree.root, exclude=".git")
        self.r["tree_apparent"] = du_bytes(self.tree.root, exclude=".git", apparent=True)
        out = run_checked(
            [
                self.tb,
                "log",
                "--all",
                "--root",
                str(self.tree.root),
                "--store",
                str(self.store),
                "--json",
            ]
        ).stdout
        doc = json.loads(out)  # a bare list of snapshots (older versions: {"snapshots": [...]})
        self.r["snapshots_in_store"] = len(doc["snapshots"] if isinstance(doc, dict) else doc)

    def run(self) -> dict[str, Any]:
        log(f"first snapshots ({self.repeat_first}x each)")
        self.first_snapshots()
        log(f"rounds ({self.repeat}x): unchanged, 10 changed files, rewind")
        self.rounds()
        log(f"store growth ({self.growth_steps} steps of {CHANGED_FILES} files)")
        self.growth()
        log("start-up")
        self.startup()
        self.sizes()
        self.r["errors"] = self.errors
        return self.r


# ------------------------------------------------------------------------------- report


def summarize(r: dict[str, Any], meta: dict[str, Any]) -> tuple[list[list[str]], dict[str, Any]]:
    """Return the table rows and the JSON document."""
    m = {
        k: median(v)
        for k, v in r.items()
        if isinstance(v, list)
        and v
        and isinstance(v[0], (int, float))
        and not isinstance(v[0], bool)
    }
    t = TARGETS
    rows: list[list[str]] = []
    checks: dict[str, bool] = {}

    def paired(a: str, b: str) -> float:
        """The median of the per-round ratios (the two ran a moment apart, same load)."""
        return median([x / y for x, y in zip(r[a], r[b], strict=True)])

    def row(
        name: str,
        value: str,
        ref_name: str,
        ref: str,
        ratio: float | None,
        target: str,
        ok: bool | None,
        key: str | None = None,
        pair: float | None = None,
    ) -> None:
        status = "" if ok is None else ("PASS" if ok else "FAIL")
        if key is not None and ok is not None:
            checks[key] = ok
        rows.append(
            [
                name,
                value,
                ref_name,
                ref,
                "" if ratio is None else f"{ratio:.2f}x",
                "" if pair is None else f"{pair:.2f}x",
                target,
                status,
            ]
        )

    for kind, label in (
        ("unchanged", "unchanged snapshot"),
        ("changed", f"snapshot, {CHANGED_FILES} files changed"),
    ):
        tb, g, fl = m[f"{kind}_takeback_s"], m[f"{kind}_git_s"], m["floor_s"]
        row(
            label,
            fmt_s(tb),
            "git add -A + write-tree",
            fmt_s(g),
            tb / g,
            "<= 1.00x git",
            tb / g <= t["snapshot_vs_git"],
            f"{kind}_vs_git",
            paired(f"{kind}_takeback_s", f"{kind}_git_s"),
        )
        row(
            "",
            "",
            "floor (find, lstat all)",
            fmt_s(fl),
            tb / fl,
            f"<= {t['snapshot_vs_floor']:.2f}x floor",
            tb / fl <= t["snapshot_vs_floor"],
            f"{kind}_vs_floor",
            paired(f"{kind}_takeback_s", "floor_s"),
        )
        sc = m[f"{kind}_scan_reported_s"]
        row("", "", "its scan (JSON duration_ms)", fmt_s(sc), tb / sc, "(info)", None)
        row(
            f"  its scan alone ({kind})",
            fmt_s(sc),
            "floor (find, lstat all)",
            fmt_s(fl),
            sc / fl,
            "(info)",
            None,
            None,
            paired(f"{kind}_scan_reported_s", "floor_s"),
        )
    rw, un = m["rewind_s"], m["unchanged_takeback_s"]
    row(
        f"rewind of {CHANGED_FILES} files",
        fmt_s(rw),
        "unchanged snapshot",
        fmt_s(un),
        rw / un,
        f"< {t['rewind_vs_unchanged']:.1f}x unchanged",
        rw / un < t["rewind_vs_unchanged"],
        "rewind_vs_unchanged",
        paired("rewind_s", "unchanged_takeback_s"),
    )
    ft, fg = m["first_takeback_s"], m["first_git_s"]
    row(
        "first snapshot (fresh store)",
        fmt_s(ft),
        "git shadow repo",
        fmt_s(fg),
        ft / fg,
        f"<= {t['first_vs_git']:.2f}x git",
        ft / fg <= t["first_vs_git"],
        "first_vs_git",
        paired("first_takeback_s", "first_git_s"),
    )
    fc, gc = m["first_takeback_cpu_s"], m["first_git_cpu_s"]
    row("  its CPU time", fmt_s(fc), "git's CPU time", fmt_s(gc), fc / gc, "(info)", None)
    gr = m["growth_bytes"]
    row(
        f"store growth, one {CHANGED_FILES}-file step",
        fmt_bytes(gr),
        "before checkpoint (WAL)",
        fmt_bytes(m["growth_raw_bytes"]),
        None,
        f"< {fmt_bytes(t['growth_bytes'])}",
        gr < t["growth_bytes"],
        "growth",
    )
    row("", f"max {fmt_bytes(max(r['growth_bytes']))}", "", "", None, "(info)", None)
    s1, td = r["store_after_first_du"], r["tree_du"]
    row(
        "store after first snapshot (du)",
        fmt_bytes(s1),
        "tree without .git (du)",
        fmt_bytes(td),
        s1 / td,
        "(info)",
        None,
    )
    row(
        "",
        "",
        "git shadow repo (du)",
        fmt_bytes(r["git_shadow_du"]),
        s1 / r["git_shadow_du"],
        "(info)",
        None,
    )
    row(
        f"store at end, {r['snapshots_in_store']} snapshots (du)",
        fmt_bytes(r["store_end_du"]),
        "tree without .git (du)",
        fmt_bytes(td),
        r["store_end_du"] / td,
        "(info)",
        None,
    )
    v, py = m["version_s"], m["python_startup_s"]
    row(
        "takeback --version",
        fmt_s(v),
        "python -c pass",
        fmt_s(py),
        v / py,
        f"< {t['version_s'] * 1000:.0f} ms",
        v < t["version_s"],
        "version",
    )

    doc = {
        "meta": meta,
        "medians": m,
        "samples": {k: v for k, v in r.items() if isinstance(v, list)},
        "sizes": {
            k: r[k]
            for k in (
                "store_after_first_du",
                "store_after_first_files",
                "store_end_du",
                "store_end_files",
                "tree_du",
                "tree_apparent",
                "git_shadow_du",
                "snapshots_in_store",
            )
        },
        "ratios": {
            "unchanged_vs_git": m["unchanged_takeback_s"] / m["unchanged_git_s"],
            "unchanged_vs_floor": m["unchanged_takeback_s"] / m["floor_s"],
            "changed_vs_git": m["changed_takeback_s"] / m["changed_git_s"],
            "changed_vs_floor": m["changed_takeback_s"] / m["floor_s"],
            "rewind_vs_unchanged": rw / un,
            "first_vs_git": ft / fg,
            "first_cpu_vs_git": fc / gc,
            "unchanged_scan_vs_floor": m["unchanged_scan_reported_s"] / m["floor_s"],
            "changed_scan_vs_floor": m["changed_scan_reported_s"] / m["floor_s"],
            "store_vs_tree_du": s1 / td,
        },
        "ratios_paired": {  # medians of the per-round ratios
            "unchanged_vs_git": paired("unchanged_takeback_s", "unchanged_git_s"),
            "unchanged_vs_floor": paired("unchanged_takeback_s", "floor_s"),
            "changed_vs_git": paired("changed_takeback_s", "changed_git_s"),
            "changed_vs_floor": paired("changed_takeback_s", "floor_s"),
            "rewind_vs_unchanged": paired("rewind_s", "unchanged_takeback_s"),
            "first_vs_git": paired("first_takeback_s", "first_git_s"),
        },
        "targets": TARGETS,
        "pass": checks,
        "errors": r["errors"],
    }
    return rows, doc


def print_table(rows: list[list[str]], meta: dict[str, Any], errors: list[str], out: Any) -> None:
    head = ["measure", "takeback", "compared with", "", "ratio", "paired", "target", "result"]
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    print(
        f"\ntakeback benchmark: {meta['files']} files in {meta['folders']} folders, "
        f"medians of {meta['repeat']} rounds (first snapshot: {meta['repeat_first']})",
        file=out,
    )
    print(
        f"{meta['takeback']} ({meta['revision']})  |  {meta['git']}  |  "
        f"Python {meta['python']}  |  {meta['cpus']} CPUs  |  load average "
        f"{meta['loadavg_1min_start']} at start, {meta['loadavg_1min_end']} at end  |  "
        f"check pass: {meta['listing']}  |  console script: {meta['script']}",
        file=out,
    )
    if meta["source_changed"]:
        print(SOURCE_CHANGED, file=out)
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    print(line, file=out)
    print("-" * len(line), file=out)
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=out)
    if errors:
        print("\nCORRECTNESS ERRORS:", file=out)
        for e in errors:
            print(f"  {e}", file=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--files", type=int, default=DEFAULT_FILES, help="files in the tree")
    p.add_argument("--repeat", type=int, default=5, help="rounds (medians are over these)")
    p.add_argument("--repeat-first", type=int, default=3, help="first snapshots of each tool")
    p.add_argument("--growth-steps", type=int, default=5, help="10-file steps for growth")
    p.add_argument(
        "--markdown",
        default=None,
        metavar="FILE",
        help="also write the report as a fragment of the manual (docs/bench/*.md)",
    )
    p.add_argument("--base", default=DEFAULT_BASE, help="where trees and stores live")
    p.add_argument("--takeback", default=None, help="the takeback executable")
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
        args.base, args.files, "run-snapshot", takeback=args.takeback, freeze=args.freeze
    ) as setting:
        tree, tb, base = setting.tree, setting.takeback, setting.tree.root
        runner = Runner(tree, tb, setting.work, args.repeat, args.repeat_first, args.growth_steps)
        r = runner.run()
    meta = {
        "files": len(tree.files),
        "folders": len({f.rsplit("/", 1)[0] for f in tree.files}),
        "repeat": args.repeat,
        "repeat_first": args.repeat_first,
        "takeback": run_checked([tb, "--version"]).stdout.decode().strip(),
        "git": git(["--version"], base).strip(),
        "revision": setting.revision,
        "python": platform.python_version(),
        "listing": native_listing(tb),
        "script": console_script(tb),
        "cpus": os.cpu_count(),
        "tree": str(tree.root),
        "store": str(runner.store),
        "loadavg_1min_end": round(os.getloadavg()[0], 2),
        "loadavg_1min_start": setting.load_before,
        "source_changed": source_digest() != setting.source_before,
    }
    rows, doc = summarize(r, meta)
    print_table(rows, meta, r["errors"], sys.stderr if args.json else sys.stdout)
    if args.markdown:
        import io

        buf = io.StringIO()
        print_table(rows, meta, r["errors"], buf)
        write_markdown(
            args.markdown,
            "Snapshots without the service, first snapshots, store growth",
            buf.getvalue(),
            " ".join(["bench/bench_snapshot.py", *sys.argv[1:]]),
        )
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    return 1 if r["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
