"""Benchmark: a turn whose command rewrote a big ``package-lock.json``.

A lockfile rewritten by ``npm install`` (a few version bumps scattered over a file of
megabytes) is what made the Claude Code ``Stop`` hook, ``takeback undo`` and the MCP
``diff`` tool run for minutes while the line diff was difflib's. For each size (default
1.3 MB and 10 MB) this script generates a lockfile of made-up packages (deterministic,
``random.Random(14)``) in a fresh folder under ``--base`` (default
``/tmp/takeback-bench/run-lockfile``), snapshots it, and then, ``--repeat`` times (default
5), through ``from takeback import Workspace`` in this process:

1. opens a turn and runs a command step that rewrites the lockfile with ``--bumps``
   packages (default 8) at new versions (three changed lines each);
2. times ``turn.end()``: what the ``Stop`` hook does (the change list, line counts
   included). Target: under one second;
3. times ``ws.diff("turn:N")`` against the files now, with the patch (MCP ``diff``) and
   without it (``stat_only``). Target: under one second each;
4. times ``session.undo()`` of the turn (info), which puts the lockfile back.

For comparison it times ``git diff --no-index --numstat`` of the same two files. It checks
the results too: the counts equal git's (or, marked approximate, are an upper bound of
them: with many bumps the exact diff is past its work bound), the patch applies
with ``git apply`` to give the new file, and undo puts the old file back byte for byte.

Run it with the project's virtualenv::

    .venv/bin/python bench/bench_lockfile.py
    .venv/bin/python bench/bench_lockfile.py --sizes 1.3,10,50 --json

Options: ``--sizes MB,...``, ``--bumps N``, ``--repeat R``, ``--base DIR``, ``--json``.
Exit status: 0, or 1 if a correctness check failed.
"""

from __future__ import annotations

import argparse
import hashlib
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

from _tree import DEFAULT_BASE, fmt_s, log, median, repo_revision

TARGET_S = 1.0
#: bytes of a generated package entry, on average (to size the file)
ENTRY_BYTES = 390


def make_lockfile(rng: random.Random, size: int) -> dict[str, Any]:
    """Return an npm lockfile (version 3) of made-up packages, about ``size`` bytes."""
    names = [f"pkg-{rng.choice('abcdefgh')}{i}" for i in range(max(1, size // ENTRY_BYTES))]
    pkgs: dict[str, Any] = {"": {"name": "app", "version": "1.0.0"}}
    for name in names:
        version = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 40)}"
        entry: dict[str, Any] = {
            "version": version,
            "resolved": f"https://registry.npmjs.org/{name}/-/{name}-{version}.tgz",
            "integrity": _integrity(rng),
            "license": rng.choice(["MIT", "ISC", "Apache-2.0", "BSD-3-Clause"]),
        }
        if rng.random() < 0.5:
            entry["dev"] = True
        deps = rng.sample(names, min(len(names), rng.randint(0, 4)))
        if deps:
            entry["dependencies"] = {d: f"^{rng.randint(0, 9)}.0.0" for d in deps}
        pkgs[f"node_modules/{name}"] = entry
    return {"name": "app", "version": "1.0.0", "lockfileVersion": 3, "packages": pkgs}


def _integrity(rng: random.Random) -> str:
    return "sha512-" + hashlib.sha512(rng.randbytes(16)).hexdigest()[:86] + "=="


def bump(rng: random.Random, lock: dict[str, Any], n: int) -> dict[str, Any]:
    """Return the lockfile with ``n`` packages, spread over the file, at a new version."""
    pkgs = dict(lock["packages"])
    for key in rng.sample(sorted(k for k in pkgs if k), n):
        name = key.rsplit("/", 1)[1]
        version = f"{rng.randint(10, 99)}.{rng.randint(0, 9)}.0"
        pkgs[key] = {
            **pkgs[key],
            "version": version,
            "resolved": f"https://registry.npmjs.org/{name}/-/{name}-{version}.tgz",
            "integrity": _integrity(rng),
        }
    return {**lock, "packages": pkgs}


def dump(lock: dict[str, Any]) -> bytes:
    return json.dumps(lock, indent=2).encode() + b"\n"


def git_numstat(old: Path, new: Path) -> tuple[tuple[int, int], float]:
    """Return git's (added, removed) for two files, and the seconds it took."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["git", "diff", "--no-index", "--numstat", "--", str(old), str(new)],
        capture_output=True,
        check=False,
    )
    dt = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"git diff failed: {proc.stderr.decode(errors='replace')}")
    added, removed, _ = proc.stdout.split(b"\t", 2)
    return (int(added), int(removed)), dt


def git_applies(work: Path, old: bytes, patch: bytes, new: bytes) -> bool:
    """Whether ``git apply`` of the patch takes ``old`` to ``new``."""
    repo = work / "apply"
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir()
    (repo / "package-lock.json").write_bytes(old)
    (work / "p.diff").write_bytes(patch)
    proc = subprocess.run(
        ["git", "apply", str(work / "p.diff")], cwd=repo, capture_output=True, check=False
    )
    return proc.returncode == 0 and (repo / "package-lock.json").read_bytes() == new


def run_size(work: Path, mb: float, bumps: int, repeat: int) -> dict[str, Any]:
    from takeback import Workspace

    r: dict[str, Any] = {"errors": [], "end_s": [], "diff_s": [], "stat_s": [], "undo_s": []}
    errors: list[str] = r["errors"]
    rng = random.Random(14)
    lock = make_lockfile(rng, int(mb * 1024 * 1024))
    old = dump(lock)
    r["bytes"] = len(old)
    r["lines"] = old.count(b"\n")
    root = work / f"proj-{mb}"
    root.mkdir()
    path = root / "package-lock.json"
    path.write_bytes(old)
    (work / "old.json").write_bytes(old)
    time.sleep(1.2)  # past the race window: a plain unchanged file
    ws = Workspace(root, store=work / f"store-{mb}")
    try:
        ws.snapshot("start")
        session = ws.session("bench")
        for i in range(repeat):
            new = dump(bump(rng, lock, bumps))
            (work / "new.json").write_bytes(new)
            turn = session.turn(f"npm install {i}")
            with turn.command("npm install"):
                path.write_bytes(new)
            t0 = time.perf_counter()
            changes = turn.end()
            r["end_s"].append(time.perf_counter() - t0)
            expected, git_s = git_numstat(work / "old.json", work / "new.json")
            r.setdefault("git_s", []).append(git_s)
            got = [(c.path, c.added, c.removed, c.approximate) for c in changes]
            r["approximate"] = r.get("approximate", 0) + sum(c.approximate for c in changes)
            exact = got == [("package-lock.json", *expected, False)]
            # Past the diff's work bound (many bumps) the counts are an upper bound.
            bound = (
                len(got) == 1
                and got[0][3]
                and got[0][1] >= expected[0]
                and got[0][2] >= expected[1]
            )
            if not (exact or bound):
                errors.append(f"round {i}: change list {got}, git counts {expected}")
            t0 = time.perf_counter()
            diffed = ws.diff(f"turn:{turn.n}", None, session="bench")
            r["diff_s"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ws.diff(f"turn:{turn.n}", None, session="bench", patch=False)
            r["stat_s"].append(time.perf_counter() - t0)
            if not git_applies(work, old, diffed.patch, new):
                errors.append(f"round {i}: the patch does not take the old file to the new")
            time.sleep(1.1)  # out of the race window, as a person's undo later would be
            t0 = time.perf_counter()
            session.undo()
            r["undo_s"].append(time.perf_counter() - t0)
            if path.read_bytes() != old:
                errors.append(f"round {i}: undo did not put the lockfile back")
    finally:
        ws.close()
    return r


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1.3,10", help="lockfile sizes in MB, comma-separated")
    p.add_argument("--bumps", type=int, default=8, help="packages bumped per rewrite")
    p.add_argument("--repeat", type=int, default=5, help="rounds per size")
    p.add_argument("--base", default=DEFAULT_BASE, help="where the work folder goes")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the figures as JSON on stdout (the table then goes to stderr)",
    )
    args = p.parse_args(argv)
    work = Path(args.base).resolve() / "run-lockfile"
    if Path(__file__).resolve().parent.parent in (work, *work.parents):
        sys.exit("--base must not be inside the repository")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    load_before = round(os.getloadavg()[0], 2)
    results = {}
    try:
        for mb in (float(s) for s in args.sizes.split(",")):
            log(f"{mb} MB lockfile, {args.repeat} rounds of {args.bumps} bumps")
            results[mb] = run_size(work, mb, args.bumps, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import takeback

    meta = {
        "takeback": takeback.__version__,
        "revision": repo_revision(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_1min_start": load_before,
        "loadavg_1min_end": round(os.getloadavg()[0], 2),
    }
    rows, doc = [], {"meta": meta, "sizes": {}, "target_s": TARGET_S}
    for mb, r in results.items():
        m = {k: median(r[k]) for k in ("end_s", "diff_s", "stat_s", "undo_s", "git_s")}
        label = f"{r['bytes'] / 1e6:.1f} MB ({r['lines']} lines)"
        if r.get("approximate"):
            label += ", approximate"
        for key, what, target in (
            ("end_s", "turn.end() (Stop)", True),
            ("diff_s", "ws.diff() with patch (MCP diff)", True),
            ("stat_s", "ws.diff() stat only", True),
            ("undo_s", "session.undo()", False),
            ("git_s", "git diff --no-index --numstat", False),
        ):
            verdict = ("PASS" if m[key] < TARGET_S else "FAIL") if target else ""
            rows.append([label, what, fmt_s(m[key]), "< 1 s" if target else "(info)", verdict])
        doc["sizes"][str(mb)] = {"bytes": r["bytes"], "medians": m, "samples": r}
    out = sys.stderr if args.json else sys.stdout
    print(
        f"\ntakeback, a turn that rewrote a lockfile ({args.bumps} bumps), medians of "
        f"{args.repeat}\n(takeback {meta['takeback']} {meta['revision']}, Python "
        f"{meta['python']}, {meta['cpus']} CPUs, load average {load_before} at start, "
        f"{meta['loadavg_1min_end']} at end)",
        file=out,
    )
    head = ["lockfile", "measure", "time", "target", "result"]
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    print(line, file=out)
    print("-" * len(line), file=out)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
    errors = [e for r in results.values() for e in r["errors"]]
    if errors:
        print("\nCORRECTNESS ERRORS:", file=out)
        for e in errors:
            print(f"  {e}", file=out)
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
