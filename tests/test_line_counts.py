"""Line counts and patches of large files: equal to git's, and bounded work when huge.

A command that rewrites a 1.3 MB ``package-lock.json`` (a few version bumps) must not
stall the turn's end: its counts must be git's ``--numstat``. Speed itself is measured by
``bench/bench_lockfile.py``, never by a timed test; here the counts are checked against
git on a realistic lockfile and on many generated edits, and an input no exact diff can
afford is checked to come back marked approximate, as an upper bound, with a patch that
``git apply`` still accepts.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import takeback
from takeback.model import FILE, Entry
from takeback.ops import line_counts, line_stat
from takeback.ops._patch import file_patch

from .conftest import CLI, examples


def numstat(tmp: Path, old: bytes, new: bytes) -> tuple[int, int]:
    """(added, removed) as ``git diff --no-index --numstat`` counts them."""
    a, b = tmp / "numstat-old", tmp / "numstat-new"
    a.write_bytes(old)
    b.write_bytes(new)
    proc = subprocess.run(
        ["git", "diff", "--no-index", "--numstat", "--", str(a), str(b)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    if not proc.stdout:
        return 0, 0
    added, removed, _ = proc.stdout.split(b"\t", 2)
    return int(added), int(removed)


def lockfile(rng: random.Random, packages: int) -> dict[str, object]:
    """An npm lockfile (version 3) of ``packages`` made-up packages."""

    def integrity() -> str:
        return "sha512-" + hashlib.sha512(rng.randbytes(16)).hexdigest()[:86] + "=="

    names = [f"pkg-{rng.choice('abcdefgh')}{i}" for i in range(packages)]
    pkgs: dict[str, object] = {"": {"name": "app", "version": "1.0.0"}}
    for name in names:
        version = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 40)}"
        entry: dict[str, object] = {
            "version": version,
            "resolved": f"https://registry.npmjs.org/{name}/-/{name}-{version}.tgz",
            "integrity": integrity(),
            "license": rng.choice(["MIT", "ISC", "Apache-2.0", "BSD-3-Clause"]),
        }
        if rng.random() < 0.5:
            entry["dev"] = True
        deps = rng.sample(names, rng.randint(0, 4))
        if deps:
            entry["dependencies"] = {d: f"^{rng.randint(0, 9)}.0.0" for d in deps}
        pkgs[f"node_modules/{name}"] = entry
    return {"name": "app", "version": "1.0.0", "lockfileVersion": 3, "packages": pkgs}


def bump(rng: random.Random, lock: dict[str, object], n: int) -> dict[str, object]:
    """The lockfile with ``n`` packages, spread over the file, at a new version."""
    pkgs = dict(lock["packages"])  # type: ignore[call-overload]
    keys = sorted(k for k in pkgs if k)
    for key in rng.sample(keys, n):
        entry = dict(pkgs[key])
        name = key.rsplit("/", 1)[1]
        version = f"{rng.randint(10, 19)}.0.0"
        entry["version"] = version
        entry["resolved"] = f"https://registry.npmjs.org/{name}/-/{name}-{version}.tgz"
        entry["integrity"] = "sha512-" + hashlib.sha512(rng.randbytes(8)).hexdigest()[:86] + "=="
        pkgs[key] = entry
    return {**lock, "packages": pkgs}


def dump(lock: dict[str, object]) -> bytes:
    return json.dumps(lock, indent=2).encode() + b"\n"


def test_lockfile_rewritten_by_a_command_counts_as_git_does(tmp_path: Path) -> None:
    rng = random.Random(14)
    lock = lockfile(rng, 4200)
    old, new = dump(lock), dump(bump(rng, lock, 8))
    assert len(old) > 1_200_000
    root = tmp_path / "proj"
    root.mkdir()
    (root / "package-lock.json").write_bytes(old)
    with takeback.Workspace(root, store=tmp_path / "store") as ws:
        ws.snapshot("start")
        with ws.session("s").turn("npm install") as turn, turn.command("npm install"):
            (root / "package-lock.json").write_bytes(new)
        [change] = turn.changes
        assert (change.added, change.removed) == numstat(tmp_path, old, new) == (24, 24)
        assert change.approximate is False
        assert change.to_json()["approximate"] is False
        [diffed] = ws.diff("turn:1", None, session="s").files
        assert (diffed.added, diffed.removed, diffed.approximate) == (24, 24, False)
        assert diffed.to_json()["approximate"] is False


# Ordinary edits: a file of distinct lines, changed in a few places by deleting lines,
# inserting new ones (a few of them repeated) or copies of other lines of the file.
_edit = st.tuples(
    st.floats(0, 1),  # where
    st.integers(0, 4),  # lines deleted
    st.lists(st.one_of(st.integers(0, 12), st.just(-1)), max_size=4),  # lines inserted
)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    size=st.integers(0, 120),
    edits=st.lists(_edit, max_size=6),
    last_newline=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_counts_equal_git_numstat_on_ordinary_edits(
    tmp_path: Path,
    size: int,
    edits: list[tuple[float, int, list[int]]],
    last_newline: bool,
    seed: int,
) -> None:
    rng = random.Random(seed)
    lines = [f"line {i} {rng.random():.6f}\n".encode() for i in range(size)]
    old = list(lines)
    for where, dels, ins in edits:
        at = int(where * len(lines))
        new_lines = [
            lines[rng.randrange(len(lines))] if k == -1 and lines else f"new {k}\n".encode()
            for k in ins
        ]
        lines[at : at + dels] = new_lines
    a, b = b"".join(old), b"".join(lines)
    if not last_newline:
        a, b = a[:-1], b[:-1]
    stat = line_stat(a, b)
    assert (stat.added, stat.removed) == numstat(tmp_path, a, b)
    assert not stat.approximate
    assert line_counts(a, b) == (stat.added, stat.removed)


def apply_patch(tmp: Path, old: bytes, new: bytes) -> None:
    """Check that file_patch's patch takes ``old`` to ``new`` with ``git apply``."""
    blobs = {"old": old, "new": new}
    a = Entry(FILE, 0o644, "old", len(old))
    b = Entry(FILE, 0o644, "new", len(new))
    patch = file_patch("f.txt", a, b, lambda e: blobs[e.oid])
    repo = tmp / "repo"
    repo.mkdir()
    (repo / "f.txt").write_bytes(old)
    (tmp / "p.diff").write_bytes(patch)
    subprocess.run(
        ["git", "apply", "--unsafe-paths", str(tmp / "p.diff")],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (repo / "f.txt").read_bytes() == new


def test_an_input_no_exact_diff_can_afford_is_an_upper_bound_marked_approximate(
    tmp_path: Path,
) -> None:
    # Few distinct lines in a random order: no line is unique to anchor on, and the
    # shortest edit is thousands of lines long.
    rng = random.Random(3)
    alphabet = [b"{\n", b"}\n", b"  x\n", b"  y\n"]
    old = b"".join(rng.choices(alphabet, k=20_000))
    new = b"".join(rng.choices(alphabet, k=20_000))
    stat = line_stat(old, new)
    assert stat.approximate
    git_added, git_removed = numstat(tmp_path, old, new)
    assert stat.added >= git_added and stat.removed >= git_removed
    assert stat.added - stat.removed == git_added - git_removed
    apply_patch(tmp_path, old, new)


def test_a_large_file_with_many_scattered_edits_applies(tmp_path: Path) -> None:
    rng = random.Random(5)
    lock = lockfile(rng, 3000)
    old = dump(lock)
    new = dump(bump(rng, lock, 600))
    stat = line_stat(old, new)
    git_added, git_removed = numstat(tmp_path, old, new)
    assert stat.added >= git_added and stat.removed >= git_removed
    if not stat.approximate:
        assert (stat.added, stat.removed) == (git_added, git_removed)
    apply_patch(tmp_path, old, new)


def test_approximate_counts_are_kept_in_the_change_list_and_shown(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    rng = random.Random(8)
    alphabet = [b"{\n", b"}\n", b"  x\n", b"  y\n"]
    old = b"".join(rng.choices(alphabet, k=20_000))
    new = b"".join(rng.choices(alphabet, k=20_000))
    (ws_dir / "data.txt").write_bytes(old)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        ws.snapshot("start")
        with ws.session("s").turn("regenerate") as turn, turn.command("regenerate"):
            (ws_dir / "data.txt").write_bytes(new)
        [change] = turn.changes
        assert change.approximate and change.to_json()["approximate"] is True
        [diffed] = ws.diff("turn:1", None, session="s", patch=False).files
        assert diffed.approximate and diffed.to_json()["approximate"] is True
        assert (diffed.added, diffed.removed) == (change.added, change.removed)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        [kept] = ws.session("s").ended_turn().changes
        assert kept == change
    shown = tb("changes", "--session", "s").stdout
    assert "(line counts approximate: an upper bound)" in shown
    assert tb("diff", "--session", "s", "--stat", "turn:1").stdout.splitlines()[0].endswith(" ~")
    [as_json] = json.loads(tb("changes", "--session", "s", "--json").stdout)["changes"]
    assert as_json["approximate"] is True
