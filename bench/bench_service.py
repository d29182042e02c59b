"""Benchmark: snapshots and hook calls with the watching service, against git and without it.

On the generated trees of ``_tree.py`` (N files of 1-8 KB in N/20 folders, a git
repository with everything committed, cached under ``--base``), for each N of the curve
(default 10,000 and 100,000; ``--with-300k`` adds 300,000):

1. without the service: ``takeback snapshot --json`` unchanged and after rewriting 10
   random files (a full scan: ``scan.mode`` is checked to be ``full``);
2. with the service (``takeback service start``): the same two (``scan.mode`` checked to
   be ``service``);
3. git's method beside each: ``GIT_INDEX_FILE=<copy of the index> git add -A && git
   write-tree`` on the same tree in the same round (the index carried between runs);

6. the first snapshot of each N into a fresh store (wall clock and the process's peak
   resident memory), and with ``--first-vs-git`` git's first ``add -A && write-tree``
   into a new shadow repository of the same tree beside it;
7. with the service, ``takeback rewind`` of the 10 changed files back to the snapshot
   before them (its pre-rewind snapshot included), against a service-fed snapshot;
8. with ``--tail N``, N service-fed snapshots in a row, each after 10 changed files: the
   median, the 90th percentile and the longest (what a call paying for upkeep costs);

and on the largest N of the curve (on every N with ``--hooks-all``), with the service
running:

4. a Bash hook call, ``PreToolUse`` and ``PostToolUse`` (10 files rewritten between them),
   each a real ``takeback hook claude-code`` process fed its JSON payload;
5. a file tool's hook call (``PreToolUse`` of Write), which starts no service and reads one
   file; beside it ``python -c pass`` and ``takeback --version`` (start-up alone).

Every timed figure is the wall clock of the real command, process start-up included;
medians over ``--repeat`` rounds; ratios are of medians measured in the same run. The
machine may be shared: figures are noisy, ratios less so.

Run it with the project's virtualenv::

    .venv/bin/python bench/bench_service.py                 # 10,000 and 100,000 files
    .venv/bin/python bench/bench_service.py --sizes 10000   # quick
    .venv/bin/python bench/bench_service.py --with-300k --json > figures.json
    .venv/bin/python bench/bench_service.py --sizes 100000,1000000 --hooks-all --first-vs-git \
        --interleave 12

With two sizes or more, the report ends with each figure at the largest N over the same
figure at the smallest (a fast path whose cost follows the changes, not the tree, stays
near 1.0x). Those are timed one size after the other, the larger after the smaller (and
after git's first add of it, with ``--first-vs-git``), so the machine is not the same for
both. ``--interleave R`` adds R rounds in which the sizes alternate, both services
running on the stores the runs above made: an unchanged and a 10-changed snapshot and a
Bash hook call before and after the command at each size in each round, so that both
sizes meet the same load; their ratios end the report.
"""

from __future__ import annotations

import argparse
import json
import os
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
    SOURCE_CHANGED,
    BenchTree,
    bench_run,
    bench_trees,
    console_script,
    fmt_s,
    git_env,
    log,
    make_line_pool,
    make_text,
    median,
    run_checked,
    source_digest,
    takeback_exe,
    time_git_add,
    warm_cache,
    write_markdown,
)

CHANGED_FILES = 10
SETTLE_S = 1.2
TARGETS = {"service_vs_git": 0.1, "hook_vs_git": 0.2, "hook_abs_s": 0.100, "file_hook_s": 0.095}


class Round:
    """The tools of one tree: takeback (CLI and hook), git's method, file changes."""

    def __init__(self, tree: BenchTree, tb: str, work: Path) -> None:
        self.tree = tree
        self.tb = tb
        self.work = work
        self.store = work / "store"
        self.git_state = work / "git-index"
        self.git_tmp = work / "git-index.tmp"
        self.env_index = git_env(GIT_INDEX_FILE=str(self.git_tmp))
        self.pool = make_line_pool(seed=11)
        self.rng = random.Random(5)
        self.last_write = 0.0
        self.errors: list[str] = []
        self.hook_n = 0

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env["TAKEBACK_STORE"] = str(self.store)
        env.update(extra)
        return env

    def snapshot(self, want: str) -> float:
        cmd = [self.tb, "snapshot", "--root", str(self.tree.root), "--json"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, check=False, env=self.env())
        dt = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"snapshot failed: {proc.stderr.decode(errors='replace')}")
        scan = json.loads(proc.stdout)["scan"]
        if scan["mode"] != want:
            self.errors.append(f"expected a {want} scan, got {scan}")
        return dt

    def snapshot_id(self, want: str) -> str:
        """An untimed snapshot (``want`` checked); return its id."""
        cmd = [self.tb, "snapshot", "--root", str(self.tree.root), "--json"]
        proc = subprocess.run(cmd, capture_output=True, check=True, env=self.env())
        doc = json.loads(proc.stdout)
        if doc["scan"]["mode"] != want:
            self.errors.append(f"expected a {want} scan, got {doc['scan']}")
        return str(doc["id"])

    def rewind(self, to: str) -> float:
        """``takeback rewind --to`` a snapshot, timed (its pre-rewind snapshot included)."""
        cmd = [self.tb, "rewind", "--root", str(self.tree.root), "--to", to, "--json"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, check=False, env=self.env())
        dt = time.perf_counter() - t0
        if proc.returncode != 0:
            self.errors.append(f"rewind failed: {proc.stderr.decode(errors='replace')}")
        return dt

    def first(self) -> tuple[float, int]:
        """The first snapshot into the fresh store: (seconds, peak resident bytes)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        dt = self.snapshot("full")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        # ru_maxrss of the children is the largest of any: the first snapshot is the
        # largest of this process's children so far, unless an earlier one was larger.
        return dt, peak * 1024 if peak > before else -1

    def git_first(self) -> float:
        """git's first snapshot: a new shadow repository of the tree (init included)."""
        gitdir = self.work / "shadow.git"
        shutil.rmtree(gitdir, ignore_errors=True)
        root = str(self.tree.root)
        env = git_env()
        wt = ["git", f"--git-dir={gitdir}", f"--work-tree={root}"]
        t0 = time.perf_counter()
        subprocess.run(["git", f"--git-dir={gitdir}", "init", "-q"], cwd=root, env=env, check=True)
        subprocess.run([*wt, "add", "-A"], cwd=root, env=env, check=True)
        subprocess.run(
            [*wt, "write-tree"], cwd=root, env=env, check=True, stdout=subprocess.DEVNULL
        )
        dt = time.perf_counter() - t0
        shutil.rmtree(gitdir, ignore_errors=True)
        os.sync()  # what git wrote is not charged to the next process that syncs
        return dt

    def lib_snapshot(self, want: str) -> float:
        """A snapshot through the library, in this process (what a harness pays)."""
        from takeback import Workspace

        t0 = time.perf_counter()
        ws = Workspace(self.tree.root, store=self.store)
        try:
            info = ws.snapshot()
        finally:
            ws.close()
        dt = time.perf_counter() - t0
        if info.scan_mode != want:
            self.errors.append(f"expected a {want} scan in-process, got {info.scan_reason}")
        return dt

    def git(self) -> float:
        return time_git_add(str(self.tree.root), self.env_index, self.git_state, self.git_tmp)

    def change(self) -> None:
        for rel in self.rng.sample(self.tree.files, CHANGED_FILES):
            self.tree.abs(rel).write_bytes(make_text(self.rng, self.pool))
        self.last_write = time.time()

    def settle(self) -> None:
        wait = self.last_write + SETTLE_S - time.time()
        if wait > 0:
            time.sleep(wait)

    def hook(self, payload: dict[str, Any], **env: str) -> float:
        doc = {"session_id": "bench", "cwd": str(self.tree.root), **payload}
        t0 = time.perf_counter()
        proc = subprocess.run(
            [self.tb, "hook", "claude-code"],
            input=json.dumps(doc).encode(),
            capture_output=True,
            check=False,
            env=self.env(**env),
        )
        dt = time.perf_counter() - t0
        if proc.returncode != 0 or proc.stdout:
            self.errors.append(f"hook call failed: {proc.stderr.decode(errors='replace')}")
        return dt

    def service(self, action: str) -> dict[str, Any]:
        out = run_checked(
            [self.tb, "service", action, "--root", str(self.tree.root), "--json"]
            + (["--wait", "120"] if action == "start" else []),
            env=self.env(),
        )
        doc: dict[str, Any] = json.loads(out.stdout)
        return doc


def measure_snapshots(r: Round, repeat: int, mode: str) -> dict[str, float]:
    """Unchanged and 10-changed snapshots (``mode`` expected), git's method beside each."""
    same, changed, git_same, git_changed = [], [], [], []
    lib_same, lib_changed = [], []
    for i in range(repeat):
        r.settle()
        r.snapshot(mode)  # untimed: the steady state
        if i % 2:
            same.append(r.snapshot(mode))
            git_same.append(r.git())
        else:
            git_same.append(r.git())
            same.append(r.snapshot(mode))
        r.change()
        if i % 2:
            changed.append(r.snapshot(mode))
            git_changed.append(r.git())
        else:
            git_changed.append(r.git())
            changed.append(r.snapshot(mode))
        lib_same.append(r.lib_snapshot(mode))
        r.change()
        lib_changed.append(r.lib_snapshot(mode))
        r.git()  # untimed: git's index takes in these changes too
    return {
        "lib_unchanged_s": median(lib_same),
        "lib_changed_s": median(lib_changed),
        "lib_unchanged_vs_git": median(lib_same) / median(git_same),
        "lib_changed_vs_git": median(lib_changed) / median(git_changed),
        "unchanged_s": median(same),
        "changed_s": median(changed),
        "git_unchanged_s": median(git_same),
        "git_changed_s": median(git_changed),
        "unchanged_vs_git": median(same) / median(git_same),
        "changed_vs_git": median(changed) / median(git_changed),
    }


def measure_rewinds(r: Round, repeat: int) -> dict[str, float]:
    """A rewind of 10 changed files with the service, against a service-fed snapshot."""
    rewinds, snaps = [], []
    for _ in range(repeat):
        r.settle()
        before = r.snapshot_id("service")
        r.change()
        r.settle()
        snaps.append(r.snapshot("service"))
        rewinds.append(r.rewind(before))
        r.last_write = time.time()
    return {
        "rewind_s": median(rewinds),
        "snapshot_s": median(snaps),
        "rewind_vs_snapshot": median(rewinds) / median(snaps),
    }


def measure_tail(r: Round, calls: int) -> dict[str, float]:
    """``calls`` service-fed snapshots in a row, each after 10 changed files: the spread.

    What a median hides: a call that pays for upkeep (a checkpoint of SQLite's
    write-ahead log, a collection) shows as the 90th percentile and the longest.
    """
    times = []
    for _ in range(calls):
        r.change()
        r.settle()
        times.append(r.snapshot("service"))
    times.sort()
    return {
        "calls": calls,
        "median_s": median(times),
        "p90_s": times[int(0.9 * (len(times) - 1))],
        "max_s": times[-1],
    }


def measure_hooks(r: Round, repeat: int, baseline: str | None) -> dict[str, float]:
    """Bash pre/post and a file tool's call with the service running; start-up beside.

    With ``baseline`` (a folder holding another ``takeback`` package), its file-tool
    hook call is timed in the same rounds, on the same store.
    """
    pre, post, file_tool, file_base, git_times = [], [], [], [], []
    r.hook({"hook_event_name": "UserPromptSubmit", "prompt": "bench"})
    for i in range(repeat):
        r.hook_n += 1
        call = {
            "tool_name": "Bash",
            "tool_use_id": f"b{r.hook_n}",
            "tool_input": {"command": "make"},
        }
        pre.append(r.hook({"hook_event_name": "PreToolUse", **call}))
        r.change()
        post.append(r.hook({"hook_event_name": "PostToolUse", **call}))
        git_times.append(r.git())
        target = r.tree.abs(r.tree.files[i])
        write = {
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_use_id": f"w{r.hook_n}",
            "tool_input": {"file_path": str(target), "content": "x"},
        }
        file_tool.append(r.hook(write))
        if baseline:
            write["tool_use_id"] = f"wb{r.hook_n}"
            write["tool_input"] = {"file_path": str(r.tree.abs(r.tree.files[-1 - i]))}
            file_base.append(r.hook(write, PYTHONPATH=baseline))
    r.hook({"hook_event_name": "Stop"})
    pass_s = median([_wall([sys.executable, "-c", "pass"]) for _ in range(10)])
    version_s = median([_wall([r.tb, "--version"]) for _ in range(10)])
    g = median(git_times)
    return {
        "pre_s": median(pre),
        "post_s": median(post),
        "git_s": g,
        "pre_vs_git": median(pre) / g,
        "post_vs_git": median(post) / g,
        "file_tool_s": median(file_tool),
        "file_tool_baseline_s": median(file_base),
        "python_pass_s": pass_s,
        "takeback_version_s": version_s,
    }


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - t0


def run_size(args: argparse.Namespace, n: int, hooks: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"files": n}
    # A work folder per size: its store is used again by the interleaved rounds.
    work = f"run-service-{n}"
    with bench_run(args.base, n, work, takeback=args.takeback, freeze=True) as setting:
        tree, tb = setting.tree, setting.takeback
        r = Round(tree, tb, setting.work)
        shutil.copyfile(tree.root / ".git" / "index", r.git_state)
        warm_cache(tree)
        log(f"{n} files: first snapshot")
        out["first_s"], out["first_peak_rss_bytes"] = r.first()
        out["git_first_s"] = r.git_first() if args.first_vs_git else None
        r.git()
        log(f"{n} files: without the service")
        out["full"] = measure_snapshots(r, args.repeat, "full")
        t0 = time.perf_counter()
        started = r.service("start")
        out["service_start_s"] = time.perf_counter() - t0
        try:
            r.snapshot("full")  # its first mark
            log(f"{n} files: with the service")
            out["service"] = measure_snapshots(r, args.repeat, "service")
            log(f"{n} files: rewinds of 10 files with the service")
            out["rewind"] = measure_rewinds(r, args.repeat)
            if args.tail:
                log(f"{n} files: {args.tail} service-fed snapshots in a row")
                out["tail"] = measure_tail(r, args.tail)
            if hooks:
                log(f"{n} files: hook calls with the service")
                out["hooks"] = measure_hooks(r, args.repeat, args.baseline_src)
            status = r.service("status")
            out["watches"] = status.get("watches")
            out["service_rss_bytes"] = status.get("rss_bytes")
            out["started_watches"] = started.get("watches")
        finally:
            r.service("stop")
        out["errors"] = r.errors
        out["source_changed"] = source_digest() != setting.source_before
    return out


#: What the interleaved rounds time at each size.
INTERLEAVED = (
    ("snapshot, unchanged", "unchanged_s"),
    ("snapshot, 10 changed", "changed_s"),
    ("Bash hook before", "pre_s"),
    ("Bash hook after", "post_s"),
)


def measure_interleaved(args: argparse.Namespace, sizes: list[int]) -> dict[str, Any]:
    """Rounds in which the sizes alternate, both services running (see the docstring)."""
    tb = takeback_exe(args.takeback)
    base = Path(args.base).resolve()
    log(f"{', '.join(map(str, sizes))} files: {args.interleave} rounds, the sizes alternating")
    with bench_trees(args.base, sizes) as trees:
        pairs = zip(trees, sizes, strict=True)
        rounds = [Round(tree, tb, base / f"run-service-{n}") for tree, n in pairs]
        times: list[dict[str, list[float]]] = [{key: [] for _, key in INTERLEAVED} for _ in sizes]
        running: list[Round] = []
        try:
            for r in rounds:
                r.service("start")
                running.append(r)
                r.snapshot("full")  # its first mark (the tree was put back since)
                r.hook({"hook_event_name": "UserPromptSubmit", "prompt": "bench"})
            for i in range(args.interleave):
                order = list(enumerate(rounds))
                for k, r in order if i % 2 == 0 else order[::-1]:
                    got = times[k]
                    r.settle()
                    got["unchanged_s"].append(r.snapshot("service"))
                    r.change()
                    r.settle()
                    got["changed_s"].append(r.snapshot("service"))
                    r.hook_n += 1
                    call = {
                        "tool_name": "Bash",
                        "tool_use_id": f"i{r.hook_n}",
                        "tool_input": {"command": "make"},
                    }
                    got["pre_s"].append(r.hook({"hook_event_name": "PreToolUse", **call}))
                    r.change()
                    r.settle()
                    got["post_s"].append(r.hook({"hook_event_name": "PostToolUse", **call}))
            for r in rounds:
                r.hook({"hook_event_name": "Stop"})
        finally:
            for r in running:
                r.service("stop")
    return {
        "rounds": args.interleave,
        "sizes": sizes,
        "medians": [{key: median(vals) for key, vals in got.items()} for got in times],
        "errors": [e for r in rounds for e in r.errors],
    }


def print_interleaved(inter: dict[str, Any], file: Any) -> None:
    lo, hi = inter["medians"][0], inter["medians"][-1]
    n_lo, n_hi = inter["sizes"][0], inter["sizes"][-1]
    print(file=file)
    print(
        f"the sizes alternating round by round ({inter['rounds']} rounds, both services "
        "running; medians)",
        file=file,
    )
    print(f"  {'':<22} {n_lo:>10} {n_hi:>10}  {'ratio':>6}", file=file)
    for name, key in INTERLEAVED:
        print(
            f"  {name:<22} {fmt_s(lo[key]):>10} {fmt_s(hi[key]):>10}  {hi[key] / lo[key]:>5.2f}x",
            file=file,
        )
    for e in inter["errors"]:
        print(f"ERROR: {e}", file=file)


def print_report(results: list[dict[str, Any]], file: Any) -> None:
    def p(text: str = "") -> None:
        print(text, file=file)

    p("snapshot cost (medians; ratios to git in the same run): `cli` is the wall clock of")
    p("`takeback snapshot` (process start-up and imports included), `lib` Workspace.snapshot()")
    p(f"{'files':>8} {'mode':>12} {'unchanged':>10} {'x git':>7} {'10 changed':>11} {'x git':>7}")
    for res in results:
        for mode in ("full", "service"):
            m = res[mode]
            p(
                f"{res['files']:>8} {mode + ' cli':>12} {fmt_s(m['unchanged_s']):>10} "
                f"{m['unchanged_vs_git']:>6.3f}x {fmt_s(m['changed_s']):>11} "
                f"{m['changed_vs_git']:>6.3f}x"
            )
            p(
                f"{'':>8} {mode + ' lib':>12} {fmt_s(m['lib_unchanged_s']):>10} "
                f"{m['lib_unchanged_vs_git']:>6.3f}x {fmt_s(m['lib_changed_s']):>11} "
                f"{m['lib_changed_vs_git']:>6.3f}x"
            )
        p(
            f"{'':>8} {'git':>8} {fmt_s(res['full']['git_unchanged_s']):>10} {'':>7} "
            f"{fmt_s(res['full']['git_changed_s']):>11}"
        )
        p(
            f"{'':>8} service: start {fmt_s(res['service_start_s'])}, "
            f"{res['watches']} watches, RSS {res['service_rss_bytes'] / (1 << 20):.1f} MiB"
        )
        rw = res["rewind"]
        p(
            f"{'':>8} rewind of 10 files (service) {fmt_s(rw['rewind_s'])}, "
            f"{rw['rewind_vs_snapshot']:.2f}x a service-fed snapshot ({fmt_s(rw['snapshot_s'])})"
        )
        if "tail" in res:
            t = res["tail"]
            p(
                f"{'':>8} {t['calls']} service-fed snapshots after 10 changed files: median "
                f"{fmt_s(t['median_s'])}, 90th percentile {fmt_s(t['p90_s'])}, "
                f"longest {fmt_s(t['max_s'])}"
            )
        peak = res["first_peak_rss_bytes"]
        first = f"{'':>8} first snapshot {fmt_s(res['first_s'])}"
        first += f", peak RSS {peak / (1 << 20):.0f} MiB" if peak > 0 else ""
        if res["git_first_s"]:
            g = res["git_first_s"]
            first += f"; git's first add {fmt_s(g)}: {res['first_s'] / g:.2f}x"
        p(first)
    for res in results:
        if "hooks" not in res:
            continue
        h = res["hooks"]
        p()
        p(f"hook calls on {res['files']} files, with the service running (medians)")
        p(f"  Bash PreToolUse   {fmt_s(h['pre_s']):>10}  {h['pre_vs_git']:.3f}x git")
        p(f"  Bash PostToolUse  {fmt_s(h['post_s']):>10}  {h['post_vs_git']:.3f}x git")
        p(f"  git's method      {fmt_s(h['git_s']):>10}")
        p(f"  file tool (Write) {fmt_s(h['file_tool_s']):>10}")
        if h["file_tool_baseline_s"] == h["file_tool_baseline_s"]:  # not NaN: measured
            p(f"    baseline source {fmt_s(h['file_tool_baseline_s']):>10}  (--baseline-src)")
        p(
            f"  start-up: python -c pass {fmt_s(h['python_pass_s'])}, takeback --version "
            f"{fmt_s(h['takeback_version_s'])}"
        )
        svc = res["service"]
        worst = max(svc["unchanged_vs_git"], svc["changed_vs_git"])
        lib_worst = max(svc["lib_unchanged_vs_git"], svc["lib_changed_vs_git"])
        hook_worst = max(h["pre_vs_git"], h["post_vs_git"])
        hook_abs = max(h["pre_s"], h["post_s"])
        p()
        p("targets")
        for name, got, want in (
            ("snapshot with the service <= 0.1x git (cli)", worst, TARGETS["service_vs_git"]),
            ("snapshot with the service <= 0.1x git (lib)", lib_worst, TARGETS["service_vs_git"]),
            ("Bash hook call <= 0.2x git", hook_worst, TARGETS["hook_vs_git"]),
            ("Bash hook call < 100 ms", hook_abs, TARGETS["hook_abs_s"]),
            ("file-tool hook call <= 95 ms", h["file_tool_s"], TARGETS["file_hook_s"]),
        ):
            p(f"  {'PASS' if got <= want else 'FAIL'}  {name}: {got:.3f}")
    if len(results) > 1:
        lo, hi = results[0], results[-1]
        p()
        p(f"at {hi['files']} files over at {lo['files']} (a cost that follows changes: ~1.0x)")
        pairs = [
            ("service-fed snapshot, 10 changed", "service", "changed_s"),
            ("service-fed snapshot, unchanged", "service", "unchanged_s"),
            ("rewind of 10 files (service)", "rewind", "rewind_s"),
        ]
        if "hooks" in lo and "hooks" in hi:
            pairs.append(("Bash hook before", "hooks", "pre_s"))
            pairs.append(("Bash hook after", "hooks", "post_s"))
        for name, part, key in pairs:
            p(f"  {name:<36} {hi[part][key] / lo[part][key]:.2f}x")
    errors = [e for res in results for e in res["errors"]]
    for e in errors:
        p(f"ERROR: {e}")
    if any(res["source_changed"] for res in results):
        p(SOURCE_CHANGED)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--sizes",
        default="10000,100000",
        help="file counts of the curve, comma-separated (default 10000,100000)",
    )
    p.add_argument("--with-300k", action="store_true", help="add 300,000 files to the curve")
    p.add_argument("--hooks-all", action="store_true", help="time hook calls at every size")
    p.add_argument(
        "--first-vs-git",
        action="store_true",
        help="time git's first add of each tree beside the first snapshot",
    )
    p.add_argument("--repeat", type=int, default=5, help="rounds (medians are over these)")
    p.add_argument(
        "--tail",
        type=int,
        default=0,
        metavar="N",
        help="also N service-fed snapshots in a row at each size: median, p90, longest",
    )
    p.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="R",
        help="with two sizes or more: R more rounds with the smallest and largest alternating",
    )
    p.add_argument(
        "--markdown",
        default=None,
        metavar="FILE",
        help="also write the report as a fragment of the manual (docs/bench/*.md)",
    )
    p.add_argument("--base", default=DEFAULT_BASE, help="where trees and stores live")
    p.add_argument("--takeback", default=None, help="the takeback executable")
    p.add_argument("--json", action="store_true", help="figures as JSON on stdout")
    p.add_argument(
        "--baseline-src",
        default=None,
        metavar="DIR",
        help="a folder holding another takeback package (e.g. main's src/): its file-tool "
        "hook call is timed beside this one's",
    )
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.with_300k and 300_000 not in sizes:
        sizes.append(300_000)
    hooks_at = 100_000 if 100_000 in sizes else max(sizes)
    load = os.getloadavg()[0]
    results = [run_size(args, n, hooks=args.hooks_all or n == hooks_at) for n in sizes]
    inter = None
    if args.interleave > 0 and len(sizes) > 1:
        inter = measure_interleaved(args, [min(sizes), max(sizes)])
    meta = {
        "loadavg_1min_start": round(load, 2),
        "loadavg_1min_end": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "repeat": args.repeat,
        "console_script": console_script(takeback_exe(args.takeback)),
    }
    print_report(results, sys.stderr if args.json else sys.stdout)
    if inter is not None:
        print_interleaved(inter, sys.stderr if args.json else sys.stdout)
    if args.markdown:
        import io

        buf = io.StringIO()
        print_report(results, buf)
        if inter is not None:
            print_interleaved(inter, buf)
        write_markdown(
            args.markdown,
            "Snapshots and hook calls with the watching service",
            buf.getvalue(),
            " ".join(["bench/bench_service.py", *sys.argv[1:]]),
        )
    print(
        f"load average {meta['loadavg_1min_start']} -> {meta['loadavg_1min_end']}; "
        f"console script: {meta['console_script']}",
        file=sys.stderr,
    )
    if args.json:
        doc = {"meta": meta, "results": results, "interleaved": inter}
        print(json.dumps(doc, indent=2, sort_keys=True))
    failed = any(res["errors"] for res in results) or (inter is not None and inter["errors"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
