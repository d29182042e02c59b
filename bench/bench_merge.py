"""Benchmark: the take-back merge on real history, against ``git merge-file``.

Taking back an earlier commit C at a later commit D is a three-way merge: base = the file
at C, ours = the file at D, theirs = the file at C's parent (what ``git revert C`` does at
D). For every commit C of a git history (default: this project's own, ``--repo``) and
each text file C modified, with D = C's ``--later``-th successor on the first-parent line
(default 10; every file at D that C's change still touches), this script merges the
three versions three ways:

- takeback's merge (``takeback.ops._merge.merge_text``: merge3 aligned by the one line
  diff of ``_patch``);
- merge3 with its default aligner (``difflib.SequenceMatcher``);
- ``git merge-file -p`` (xdiff), the reference.

It counts, for each of the first two, how often it is clean where git is clean and gives
git's bytes, clean with other bytes, in conflict where git is clean, clean where git is
in conflict, and in conflict with git; and it times the merges (in this process) against
``git merge-file`` (one process per file, as a person runs it). Every clean result is
checked to split and join back byte for byte, and Python results to byte-compile.

Run it with the project's virtualenv::

    .venv/bin/python bench/bench_merge.py
    .venv/bin/python bench/bench_merge.py --repo /path/to/repo --later 5 --limit 200 --json

Exit status: 0, or 1 if takeback's merge disagrees with git on a merge both call clean
more often than ``--max-differ`` (default 0.05 of those).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import merge3

from takeback.ops._merge import merge_text
from takeback.ops._patch import is_binary, split_lines

ROOT = Path(__file__).resolve().parent.parent
LABELS = ("now", "record", "target")


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def show(repo: Path, commit: str, path: str) -> bytes | None:
    proc = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


def difflib_merge(base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, bool]:
    m = merge3.Merge3(split_lines(base), split_lines(ours), split_lines(theirs))
    regions = list(m.merge_regions())
    clean = all(r[0] != "conflict" for r in regions)
    return b"".join(m.merge_lines()), clean


def git_merge(tmp: Path, base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, bool]:
    for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
        (tmp / name).write_bytes(data)
    proc = subprocess.run(
        ["git", "merge-file", "-p", str(tmp / "ours"), str(tmp / "base"), str(tmp / "theirs")],
        capture_output=True,
    )
    return proc.stdout, proc.returncode == 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=ROOT)
    ap.add_argument("--later", type=int, default=10)
    ap.add_argument("--limit", type=int, default=400, help="at most this many file merges")
    ap.add_argument("--max-differ", type=float, default=0.05)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    commits = git(args.repo, "rev-list", "--first-parent", "--reverse", "HEAD").decode().split()
    cases: list[tuple[str, str, str]] = []
    for i, c in enumerate(commits[1:], start=1):
        if i + args.later >= len(commits):
            break
        d = commits[i + args.later]
        names = git(args.repo, "diff", "--name-only", "--diff-filter=M", f"{c}^", c).decode()
        cases.extend((c, d, p) for p in names.split())
    cases = cases[: args.limit]
    kinds = ("takeback", "difflib")
    outcomes = ("same", "differ", "conflict_git_clean", "clean_git_conflict", "both_conflict")
    tally = {k: dict.fromkeys(outcomes, 0) for k in kinds}
    spent = {"takeback": 0.0, "difflib": 0.0, "git": 0.0}
    merged = 0
    bad: list[str] = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for c, d, p in cases:
            base, theirs, ours = (
                show(args.repo, c, p),
                show(args.repo, f"{c}^", p),
                show(args.repo, d, p),
            )
            if base is None or theirs is None or ours is None or is_binary(base + ours + theirs):
                continue
            merged += 1
            t0 = time.perf_counter()
            g, g_clean = git_merge(tmp, base, ours, theirs)
            spent["git"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            tm = merge_text(base, ours, theirs, labels=LABELS)
            spent["takeback"] += time.perf_counter() - t0
            assert tm is not None
            t0 = time.perf_counter()
            dl, dl_clean = difflib_merge(base, ours, theirs)
            spent["difflib"] += time.perf_counter() - t0
            for kind, data, clean in (
                ("takeback", tm.data, not tm.regions),
                ("difflib", dl, dl_clean),
            ):
                row = tally[kind]
                if clean and g_clean:
                    row["same" if data == g else "differ"] += 1
                    if kind == "takeback" and data != g:
                        bad.append(f"{c[:10]} at {d[:10]}: {p}")
                elif g_clean:
                    row["conflict_git_clean"] += 1
                elif clean:
                    row["clean_git_conflict"] += 1
                else:
                    row["both_conflict"] += 1
            if not tm.regions:
                assert b"".join(split_lines(tm.data)) == tm.data
                if p.endswith(".py"):
                    try:
                        compile(tm.data, p, "exec")
                    except SyntaxError:
                        bad.append(f"{c[:10]} at {d[:10]}: {p} does not compile")
    both_clean = tally["takeback"]["same"] + tally["takeback"]["differ"]
    differ_share = tally["takeback"]["differ"] / both_clean if both_clean else 0.0
    ratio = {k: round(spent[k] / spent["git"], 3) if spent["git"] else None for k in kinds}
    report = {
        "repo": str(args.repo),
        "later": args.later,
        "merges": merged,
        "tally": tally,
        "seconds": {k: round(v, 3) for k, v in spent.items()},
        "ratio_to_git": ratio,
        "takeback_differs_from_git": bad,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{merged} file merges (revert C at C+{args.later}) from {args.repo}")
        for kind in kinds:
            print(f"  {kind:9} " + "  ".join(f"{k}={v}" for k, v in tally[kind].items()))
        print("  seconds: " + "  ".join(f"{k}={v:.3f}" for k, v in spent.items()))
        print(f"  time ratio to git: takeback {ratio['takeback']}, difflib {ratio['difflib']}")
        for line in bad:
            print(f"  differs from git: {line}")
    return 1 if differ_share > args.max_differ else 0


if __name__ == "__main__":
    sys.exit(main())
