"""Shared helpers of the benchmark scripts: the generated tree, timing, sizes, git.

The tree is generated once per file count under the bench folder (default
``/tmp/takeback-bench``) and cached: ``tree-N/`` holds the files and a git repository
with everything committed, ``tree-N.json`` marks it finished (it is written last, so an
interrupted generation is simply redone), and ``tree-N.files`` lists the files.

Layout: N files of 1-8 KB of source-code-like text (deterministic, ``random.Random(42)``)
spread over N/20 folders nested two to three levels deep, plus a root ``.gitignore`` and a
small ignored ``build/`` folder that neither git nor takeback should record.

Not a benchmark by itself; ``bench_snapshot.py`` and ``bench_turns.py`` import it.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BASE = "/tmp/takeback-bench"
DEFAULT_FILES = 100_000
FILES_PER_DIR = 20
#: Bumped whenever the generator changes, so a cached tree of an older layout is redone.
GENERATOR_VERSION = 3
SEED = 42

_WORDS = (
    "account adapter alloc append apply args array async attr auth backend batch buffer "
    "build bytes cache call cancel channel check child chunk client close codec column "
    "commit config conn context copy count cursor data decode default delta dict diff "
    "digest dispatch entry encode error event field file filter flag flush format frame "
    "handle hash header index input item iter job json key kind label layer limit line "
    "list load lock logger lookup manager map match merge message meta mode model node "
    "offset open option order output owner page parse patch path peer plan pool port "
    "prefix query queue range reader record ref remote render request reset result "
    "retry root route row rule scan schema scope session shard size slot snapshot socket "
    "source span stack state status step store stream string table target task text "
    "token trace tree turn update user value version view walk worker writer"
).split()
_EXTS = ("py", "py", "py", "ts", "js", "go", "rs", "md", "json", "txt", "c", "h")
_GITIGNORE = b"__pycache__/\n*.pyc\n*.log\nbuild/\nnode_modules/\n.cache/\n"


# --------------------------------------------------------------------------- content


def _ident(rng: random.Random) -> str:
    n = rng.choice((1, 1, 2, 2, 3))
    words = [rng.choice(_WORDS) for _ in range(n)]
    if rng.random() < 0.3:
        return words[0] + "".join(w.title() for w in words[1:])
    return "_".join(words)


def _line(rng: random.Random) -> str:
    ind = "    " * rng.choice((0, 1, 1, 2, 2, 2, 3, 3, 4))
    a, b, c, f = _ident(rng), _ident(rng), _ident(rng), _ident(rng)
    n = rng.randint(0, 4096)
    w = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
    t = rng.randrange(16)
    if t == 0:
        return f"{ind}def {f}({a}, {b}={n}):"
    if t == 1:
        return f"{ind}return {a}.{f}({b}) + {n}"
    if t == 2:
        return f"{ind}{a} = {b}[{n}] if {c} else None"
    if t == 3:
        return f"{ind}# {w}"
    if t == 4:
        return f"{ind}for {a} in {b}.{f}({n}):"
    if t == 5:
        return f"{ind}if {a} is not None and {b} > {n}:"
    if t == 6:
        return f"{ind}self.{a} = {b}"
    if t == 7:
        return f'{ind}raise ValueError("{w}")'
    if t == 8:
        return f"{ind}from .{a} import {b}, {c}"
    if t == 9:
        return f'{ind}const {a} = await {b}.{f}({c}, "{w}");'
    if t == 10:
        return f"{ind}{a}.{f}({n}, {b}, {c})"
    if t == 11:
        return f"{ind}let {a}: Vec<{b.title()}> = {c}.iter().map(|x| x.{f}()).collect();"
    if t == 12:
        return f'{ind}log.debug("{w}: %s", {a})'
    if t == 13:
        return f"{ind}{a} += len({b}) * {n}"
    if t == 14:
        return ""
    return f"{ind}}}"


def make_line_pool(seed: int = SEED, size: int = 40_000) -> list[str]:
    """Return distinct-ish code lines that file contents are drawn from."""
    rng = random.Random(seed * 7919 + 1)
    return [_line(rng) for _ in range(size)]


def make_text(rng: random.Random, pool: Sequence[str], lo: int = 1024, hi: int = 8192) -> bytes:
    """Return lo..hi bytes of code-like text ending in a newline."""
    target = rng.randint(lo, hi)
    parts: list[str] = []
    total = 0
    while total < target:
        chunk = rng.choices(pool, k=max(8, (target - total) // 24))
        parts.extend(chunk)
        total += sum(len(s) + 1 for s in chunk)
    data = "\n".join(parts).encode()
    return data[: target - 1] + b"\n"


# --------------------------------------------------------------------------- layout


def _layout(rng: random.Random, n_files: int) -> tuple[list[str], list[str]]:
    """Return (folders, files): folders nested 2-3 levels, about FILES_PER_DIR files each."""
    n_dirs = max(3, round(n_files / FILES_PER_DIR))
    n1 = max(1, round(n_dirs / 100))
    n2 = min(n_dirs - n1, n1 * 10)
    n3 = n_dirs - n1 - n2
    l1 = [f"{rng.choice(_WORDS)}_{i}" for i in range(n1)]
    l2 = [f"{l1[i % n1]}/{rng.choice(_WORDS)}{i}" for i in range(n2)]
    l3 = [f"{l2[i % n2]}/{rng.choice(_WORDS)}_{rng.choice(_WORDS)}{i}" for i in range(n3)]
    dirs = l1 + l2 + l3
    files = []
    for i in range(n_files):
        d = dirs[i] if i < len(dirs) else rng.choice(dirs)
        ext = rng.choice(_EXTS)
        files.append(f"{d}/{rng.choice(_WORDS)}_{rng.choice(_WORDS)}{i}.{ext}")
    return dirs, files


# --------------------------------------------------------------------------- git


def git_env(**extra: str) -> dict[str, str]:
    """Return an environment where git reads no user or system configuration."""
    env = dict(os.environ)
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
    )
    env.pop("GIT_INDEX_FILE", None)
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    env.update(extra)
    return env


def git(args: Sequence[str], cwd: str | os.PathLike[str], **env: str) -> str:
    """Run git quietly and return its stdout (raises on failure)."""
    proc = subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args],
        cwd=cwd,
        env=git_env(**env),
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode(errors="replace")


# --------------------------------------------------------------------------- the tree


@dataclass
class BenchTree:
    """A generated tree: its folder and the paths of its files (relative, '/'-separated)."""

    root: Path
    files: list[str]
    base: Path

    def abs(self, rel: str) -> Path:
        return self.root / rel


def log(msg: str) -> None:
    """Print a progress line to stderr."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ensure_tree(base: str | os.PathLike[str], n_files: int) -> BenchTree:
    """Return the cached tree of ``n_files`` files, generating it first if needed."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    root = base / f"tree-{n_files}"
    marker = base / f"tree-{n_files}.json"
    listing = base / f"tree-{n_files}.files"
    want = {"version": GENERATOR_VERSION, "files": n_files, "seed": SEED}
    try:
        if json.loads(marker.read_text()) == want and root.is_dir():
            tree = BenchTree(root, listing.read_text().splitlines(), base)
            restore_pristine(tree)
            return tree
    except (OSError, ValueError):
        pass
    marker.unlink(missing_ok=True)
    if root.exists():
        shutil.rmtree(root)
    log(f"generating {n_files} files in {root} (once; cached by {marker.name})")
    t0 = time.monotonic()
    rng = random.Random(SEED)
    pool = make_line_pool()
    dirs, files = _layout(rng, n_files)
    root.mkdir()
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    for i, rel in enumerate(files):
        with open(root / rel, "wb") as f:
            f.write(make_text(rng, pool))
        if i and i % 20_000 == 0:
            log(f"  {i} files written")
    (root / ".gitignore").write_bytes(_GITIGNORE)
    (root / "build").mkdir()
    for i in range(20):  # ignored: neither git nor takeback records these
        (root / "build" / f"out{i}.o").write_bytes(make_text(rng, pool))
    log(f"  files written in {time.monotonic() - t0:.1f}s; git add and commit")
    git(["init", "-q", "-b", "main"], root)
    git(["add", "-A"], root)
    git(["commit", "-q", "-m", "generated tree"], root)
    listing.write_text("\n".join(files) + "\n")
    marker.write_text(json.dumps(want))
    log(f"  tree ready in {time.monotonic() - t0:.1f}s")
    return BenchTree(root, files, base)


def restore_pristine(tree: BenchTree) -> None:
    """Put the tree back as committed (an interrupted run may have left changes)."""
    dirty = git(
        ["status", "--porcelain", "--untracked-files=all"], tree.root, GIT_OPTIONAL_LOCKS="0"
    )
    if dirty.strip():
        log("tree has leftover changes from an earlier run: restoring the committed state")
        git(["checkout", "-q", "--", "."], tree.root)
        git(["clean", "-fdq"], tree.root)
    git(["update-index", "-q", "--refresh"], tree.root)


@contextmanager
def bench_lock(base: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock so two benchmark runs never share the tree at once."""
    Path(base).mkdir(parents=True, exist_ok=True)
    fd = os.open(os.path.join(base, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.exit(f"another benchmark is running on {base} (it holds {base}/.lock)")
        yield
    finally:
        os.close(fd)


def warm_cache(tree: BenchTree) -> None:
    """Read every file once so that every timed tool starts from a warm page cache."""
    for rel in tree.files:
        with open(tree.root / rel, "rb") as f:
            f.read()


# --------------------------------------------------------------------------- measuring


def timed(fn: Callable[[], object]) -> float:
    """Return the wall-clock seconds fn() takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def time_git_add(root: str, env_index: dict[str, str], state: Path, tmp: Path) -> float:
    """Time git's temp-index method, ``add -A && write-tree``, on a carried index.

    The index kept at ``state`` is copied to ``tmp`` (the index ``env_index`` names)
    untimed, updated by git, and kept again for the next round. The index git wrote (over
    100 MB at a million files) is then flushed to disk, untimed: git does not wait for it,
    and the next process to sync a file on the same file system would (ext4's ordered
    journal writes it first). Without it, an unchanged snapshot with the service at a
    million files took 150-200 ms right after git's run, 30 ms otherwise.
    """
    shutil.copyfile(state, tmp)
    t0 = time.perf_counter()
    subprocess.run(["git", "add", "-A"], cwd=root, env=env_index, check=True)
    subprocess.run(
        ["git", "write-tree"], cwd=root, env=env_index, check=True, stdout=subprocess.DEVNULL
    )
    dt = time.perf_counter() - t0
    os.replace(tmp, state)
    os.sync()
    return dt


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def run_checked(cmd: Sequence[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
    """Run a command, capturing output; raise with its stderr if it fails."""
    proc = subprocess.run(list(cmd), capture_output=True, check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n"
            f"{proc.stderr.decode(errors='replace')}"
        )
    return proc


def takeback_exe(explicit: str | None) -> str:
    """Return the takeback executable: --takeback, else the one beside this Python."""
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "takeback"
    if beside.exists():
        return str(beside)
    found = shutil.which("takeback")
    if not found:
        sys.exit("takeback not found: run with the project's venv python or pass --takeback")
    return found


def du_bytes(
    path: str | os.PathLike[str], *, exclude: str | None = None, apparent: bool = False
) -> int:
    """Return du's figure for a folder in bytes (disk usage, or apparent size)."""
    cmd = ["du", "-s", "-b" if apparent else "--block-size=1"]
    if exclude:
        cmd.append(f"--exclude={exclude}")
    out = run_checked([*cmd, os.fspath(path)]).stdout.decode()
    return int(out.split()[0])


def checkpoint(store: str | os.PathLike[str]) -> None:
    """Fold each SQLite WAL of the store into its database and truncate it."""
    for name in sorted(os.listdir(store)):
        if name.endswith(".db"):
            conn = sqlite3.connect(os.path.join(store, name), timeout=60)
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            finally:
                conn.close()


def files_size(path: str | os.PathLike[str]) -> int:
    """Return the sum of the sizes of the files under a folder (WAL and SHM files count)."""
    total = 0
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except FileNotFoundError:
                pass
    return total


def fmt_s(x: float) -> str:
    if x != x:  # NaN
        return "-"
    if x < 0.1:
        return f"{x * 1000:.1f} ms"
    return f"{x:.3f} s"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def repo_revision() -> str:
    """Return the commit of the takeback checkout these scripts sit in (``+dirty`` if so)."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = git(["rev-parse", "--short", "HEAD"], repo).strip()
        dirty = git(
            ["status", "--porcelain", "--untracked-files=no", "--", "src"],
            repo,
            GIT_OPTIONAL_LOCKS="0",
        ).strip()
    except (RuntimeError, OSError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def package_dir() -> Path:
    """Return the folder of the takeback package this Python imports (without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("takeback")
    if spec is None or spec.origin is None:
        sys.exit("takeback is not importable: run with the project's venv python")
    return Path(spec.origin).resolve().parent


def source_digest() -> str:
    """Return a digest of takeback's source files (another edit mid-run changes it)."""
    import hashlib

    src = package_dir()
    h = hashlib.sha256()
    # The check pass's C module too: its source, and the build a run would load.
    for p in sorted([*src.rglob("*.py"), *src.rglob("*.c"), *src.rglob("*.so")]):
        h.update(os.fsencode(p.relative_to(src)))
        try:
            h.update(p.read_bytes())
        except OSError:
            pass
    return h.hexdigest()[:12]


def freeze_source(base: str | os.PathLike[str]) -> str:
    """Copy the takeback package as it is now and run every later takeback from the copy.

    Another engineer editing the package of an editable install mid-run would otherwise
    mix versions in one set of figures. The copy (byte-compiled, so no run pays for that)
    goes first on ``sys.path`` and on the ``PYTHONPATH`` every subprocess inherits.
    Returns a label naming the copy.
    """
    import compileall

    src = package_dir()
    digest = source_digest()
    dest = Path(base) / f"src-{digest}"
    if not (dest / "takeback" / "__init__.py").exists():
        tmp = Path(base) / f"src-{digest}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp / "takeback", ignore=shutil.ignore_patterns("__pycache__"))
        compileall.compile_dir(str(tmp / "takeback"), quiet=1)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    sys.path.insert(0, str(dest))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(dest) + (os.pathsep + old if old else "")
    return f"frozen copy {dest}"


def native_listing(tb: str) -> str:
    """Say whether the takeback run as ``tb`` lists folders with its C module."""
    probe = subprocess.run(
        [os.path.join(os.path.dirname(tb), "python"), "-c", "import takeback.scan._listing"],
        capture_output=True,
        check=False,
    )
    return "C module" if probe.returncode == 0 else "Python (no C module built)"


def console_script(tb: str) -> str:
    """Say what the ``takeback`` script imports before takeback itself.

    pip before 25.2 wrote console scripts that import ``re`` first: about 5 ms on every
    command here, which a figure of a few tens of ms should say.
    """
    try:
        with open(tb, "rb") as f:
            head = f.read(4096)
    except OSError:
        return "unknown"
    if b"import re\n" in head:
        return "imports re first (written by pip < 25.2)"
    return "no import before takeback's"


SOURCE_CHANGED = (
    "WARNING: takeback's source changed during the run (an editable install): "
    "the figures mix versions; run again"
)


@dataclass
class BenchRun:
    """One benchmark run's setting: the tree, a fresh work folder, the command measured."""

    tree: BenchTree
    work: Path
    takeback: str
    revision: str
    load_before: float
    source_before: str


@contextmanager
def bench_run(
    base: str, n_files: int, name: str, *, takeback: str | None, freeze: bool
) -> Iterator[BenchRun]:
    """Set up a run (tree, lock, work folder ``base/name``) and put the tree back after.

    Exits with a message if ``base`` lies inside the repository (benchmarks write a lot).
    """
    root = Path(base).resolve()
    repo = Path(__file__).resolve().parent.parent
    if repo in (root, *root.parents):
        sys.exit("--base must not be inside the repository")
    tb = takeback_exe(takeback)
    frozen = freeze_source(root) if freeze else ""
    revision = repo_revision() + (f", {frozen}" if frozen else "")
    source_before = source_digest()
    load_before = round(os.getloadavg()[0], 2)
    with bench_lock(root):
        tree = ensure_tree(root, n_files)
        work = root / name
        if work.exists():
            shutil.rmtree(work)
        work.mkdir()
        try:
            yield BenchRun(tree, work, tb, revision, load_before, source_before)
        finally:
            restore_pristine(tree)


@contextmanager
def bench_trees(base: str, sizes: Sequence[int]) -> Iterator[list[BenchTree]]:
    """The cached trees of ``sizes`` under one lock, each put back as committed after.

    For a phase that uses several trees at once (``bench_run`` holds one).
    """
    root = Path(base).resolve()
    with bench_lock(root):
        trees = [ensure_tree(root, n) for n in sizes]
        try:
            yield trees
        finally:
            for tree in trees:
                restore_pristine(tree)


def write_markdown(path: str, title: str, report: str, command: str) -> None:
    """Write a run's report as a fragment of the manual's benchmarks page.

    The page includes these files as they are (``docs/bench/*.md``): its figures are the
    last run's, written by the script, never edited by hand.
    """
    import platform

    load = os.getloadavg()
    stamp = time.strftime("%Y-%m-%d")
    body = (
        f"**{title}** ({stamp}; {os.cpu_count()} cores, {platform.machine()}, "
        f"load {load[0]:.1f}; `{command}`)\n\n```text\n{report.rstrip()}\n```\n"
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(body)
