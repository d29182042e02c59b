"""Benchmark: bisect over 20 turns of a generated tree, each point's set-up against ``cp -r``.

On the generated tree of ``_tree.py`` (default 10,000 files of 1-8 KB), copied to a
scratch workspace, 20 turns are recorded through the library (each rewrites 10 random
files). Then ``takeback bisect`` runs the real command over them with ``true`` as the
test (every point good: the most runs a search of 20 takes), and its ``--json`` gives
each run's set-up time (materializing the point from the store into a scratch folder).
The baseline, timed in the same run: ``cp -r`` of the same tree (the workspace) into a
new folder, with the page cache as the bisect found it.

    .venv/bin/python bench/bench_bisect.py              # 10,000 files
    .venv/bin/python bench/bench_bisect.py --files 2000 # quick
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _tree import (
    DEFAULT_BASE,
    bench_lock,
    ensure_tree,
    log,
    median,
    takeback_exe,
    write_markdown,
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--turns", type=int, default=20)
    p.add_argument("--base", default=DEFAULT_BASE)
    p.add_argument("--takeback", default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--markdown", default=None, metavar="FILE", help="also write the report here")
    args = p.parse_args()
    tb = takeback_exe(args.takeback)
    with bench_lock(args.base):
        tree = ensure_tree(args.base, args.files)
        work = Path(tempfile.mkdtemp(prefix="bisect-bench-", dir=args.base))
        try:
            ws = work / "ws"
            shutil.copytree(tree.root, ws, ignore=shutil.ignore_patterns(".git", "build"))
            env = dict(os.environ, TAKEBACK_STORE=str(work / "store"), TAKEBACK_SERVICE="0")
            log(f"recording {args.turns} turns on {args.files} files")
            rng = random.Random(7)
            for n in range(1, args.turns + 1):
                picks = rng.sample(tree.files, 10)
                script = ";".join(
                    f"open({str(ws / f)!r},'ab').write(b'turn {n}\\n')" for f in picks
                )
                subprocess.run(
                    [tb, "run", "-m", f"turn {n}", "--", sys.executable, "-c", script],
                    cwd=ws,
                    env=env,
                    check=True,
                    capture_output=True,
                )
            log("bisect")
            t0 = time.monotonic()
            out = subprocess.run(
                [tb, "bisect", "--json", "--session", "default", "--", "true"],
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
            )
            total = time.monotonic() - t0
            doc = json.loads(out.stdout)
            setups = [r["setup_ms"] / 1000 for r in doc["runs"]]
            cps = []
            for i in range(3):
                dest = work / f"cp{i}"
                t = time.monotonic()
                subprocess.run(["cp", "-r", str(ws), str(dest)], check=True)
                cps.append(time.monotonic() - t)
                shutil.rmtree(dest)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    figures = {
        "files": args.files,
        "turns": args.turns,
        "runs": len(setups),
        "setup_median_s": median(setups),
        "setup_max_s": max(setups),
        "cp_r_median_s": median(cps),
        "ratio_median": median(setups) / median(cps),
        "ratio_max": max(setups) / median(cps),
        "bisect_total_s": total,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    report = (
        f"bisect over {args.turns} turns of {args.files} files: {len(setups)} runs, "
        f"set-up median {figures['setup_median_s']:.3f} s (max {figures['setup_max_s']:.3f} s), "
        f"cp -r {figures['cp_r_median_s']:.3f} s: {figures['ratio_median']:.2f}x "
        f"(max {figures['ratio_max']:.2f}x); whole bisect {total:.2f} s\n"
    )
    verdict = "PASS" if figures["ratio_max"] <= 2.0 else "FAIL"
    report += f"  {verdict}  each run's set-up <= 2x cp -r: {figures['ratio_max']:.2f}\n"
    print(report, end="")
    if args.markdown:
        command = " ".join(["bench/bench_bisect.py", *sys.argv[1:]])
        write_markdown(args.markdown, "bisect: each point's set-up against cp -r", report, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
