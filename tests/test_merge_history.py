"""Undo with merge on real history: this project's own, against ``git revert``.

The first 30 commits of the project's first-parent history that touch a few of its
busiest Python files become 30 turns, recorded through the library in a fresh folder,
each writing those files as that commit has them (``git show C:PATH``). The same states
are committed one by one in a fresh git repository beside it. A person then hand-edits
the last lines of every file (in both). Taking back an earlier turn with ``merge`` and
taking back its commit with ``git revert`` are then the same three-way merge: for every
turn where both are clean, the files must be byte for byte what git gives, and every
Python file must byte-compile; a turn that takeback calls a conflict must write nothing.
Redo after a merged undo must give back the files as they were, and ``--dry-run`` must
preview exactly the diff the undo then writes.

When the project is not a git checkout with that much history (an exported tarball, a
shallow clone), the history is made from the files themselves: each top-level block of
each file starts with a draft comment, which turn i takes out of the i-th block, so that
undoing turn i puts a line back into the middle of files edited since.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import takeback
from takeback.errors import ConflictError

from .conftest import CLI, files_state, write

PROJECT = Path(__file__).resolve().parent.parent
FILES = [
    "src/takeback/ops/_takeback.py",
    "src/takeback/_session.py",
    "src/takeback/cli/_app.py",
    "src/takeback/workspace.py",
    "src/takeback/ops/_turns.py",
]
TURNS = 30
NOTE = b"# a person's note, added by hand after the agent's turns\n"

#: one state of the files (None: absent)
State = dict[str, bytes | None]


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, check=check)


def history_from_git() -> list[State] | None:
    """The files at the first TURNS + 1 first-parent commits touching them (None: no git)."""
    proc = git(
        PROJECT, "rev-list", "--first-parent", "--reverse", "HEAD", "--", *FILES, check=False
    )
    commits = proc.stdout.decode().split() if proc.returncode == 0 else []
    if len(commits) < TURNS + 1:
        return None
    states = []
    for c in commits[: TURNS + 1]:
        state: State = {}
        for p in FILES:
            shown = git(PROJECT, "show", f"{c}:{p}", check=False)
            state[p] = shown.stdout if shown.returncode == 0 else None
        states.append(state)
    return states


def blocks(data: bytes) -> list[bytes]:
    """A Python file cut before each top-level ``def``, ``class`` or its decorators."""
    out: list[bytes] = [b""]
    prev = b""
    for line in data.splitlines(keepends=True):
        if line.startswith((b"def ", b"class ", b"@")) and not prev.startswith(b"@"):
            out.append(b"")
        out[-1] += line
        prev = line
    return out


def history_made_here() -> list[State]:
    """TURNS + 1 states built from the files as they are, a block at a time.

    Before the turns, every top-level block carries a draft comment after its first line;
    turn i takes it out of block i - 1 of each file (undoing turn i puts it back there).
    """
    cut = {p: blocks((PROJECT / p).read_bytes()) for p in FILES}

    def drafted(block: bytes) -> bytes:
        first, nl, rest = block.partition(b"\n")
        return first + nl + b"# draft\n" + rest if nl else block

    return [
        {p: b"".join(b if j < i else drafted(b) for j, b in enumerate(cut[p])) for p in FILES}
        for i in range(TURNS + 1)
    ]


def put(root: Path, state: State) -> None:
    for p, data in state.items():
        if data is None:
            (root / p).unlink(missing_ok=True)
        else:
            write(root, p, data)


def read(root: Path) -> State:
    return {p: (root / p).read_bytes() if (root / p).exists() else None for p in FILES}


@pytest.fixture(scope="module")
def states() -> list[State]:
    return history_from_git() or history_made_here()


@pytest.fixture
def recorded(
    states: list[State], ws_dir: Path, store_dir: Path, tmp_path: Path
) -> Iterator[tuple[Path, list[str]]]:
    """The turns recorded in ``ws_dir``, the same states committed in a git repo, and a
    person's hand edits in both; yields the repo and its commit of each turn (1-based)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    put(ws_dir, states[0])
    put(repo, states[0])
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "before the turns")
    commits = [""]
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        session = ws.session("s")
        session.start()
        for i, state in enumerate(states[1:], start=1):
            with session.turn(f"turn {i}") as turn:
                for p in FILES:
                    turn.touch(p)
                put(ws_dir, state)
            put(repo, state)
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", f"turn {i}", "--allow-empty")
            commits.append(git(repo, "rev-parse", "HEAD").stdout.decode().strip())
    for root in (ws_dir, repo):
        for p in FILES:
            if (root / p).exists():
                with open(root / p, "ab") as f:
                    f.write(NOTE)
    git(repo, "commit", "-qam", "a person's notes")
    yield repo, commits


def git_revert(repo: Path, commit: str) -> dict[str, bytes | None]:
    """Each file as ``git revert`` of ``commit`` leaves it where git merges it cleanly."""
    git(repo, "revert", "--no-commit", commit, check=False)
    unmerged = git(repo, "diff", "--name-only", "--diff-filter=U").stdout.decode().split()
    got = {p: data for p, data in read(repo).items() if p not in unmerged}
    git(repo, "reset", "-q", "--hard", "HEAD")
    return got


# Slow: every file of every earlier turn taken back and compared with a ``git revert`` of
# it, hundreds of git processes; the quick tier keeps tests/test_merge.py's merged undos.
@pytest.mark.slow
def test_undo_merge_of_earlier_turns_matches_git_revert(
    recorded: tuple[Path, list[str]], states: list[State], ws_dir: Path, store_dir: Path
) -> None:
    """Each file of each earlier turn, taken back alone (``undo --turn K --file P``)."""
    repo, commits = recorded
    person = files_state(ws_dir)
    outcomes = {"same": 0, "git conflict": 0, "takeback conflict": 0, "both conflict": 0}
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        session = ws.session("s")
        for k in range(1, TURNS):
            git_says = git_revert(repo, commits[k])
            for p in [p for p in FILES if states[k][p] != states[k - 1][p]]:
                try:
                    result = session.undo(turn=k, file=p, merge=True)
                except ConflictError as err:
                    outcomes["takeback conflict" if p in git_says else "both conflict"] += 1
                    assert files_state(ws_dir) == person, f"turn {k}, {p}: a refusal wrote"
                    assert err.conflicts == [p]
                    continue
                got = (ws_dir / p).read_bytes() if (ws_dir / p).exists() else None
                if got is not None:
                    compile(got, p, "exec")  # a SyntaxError fails the test
                if p not in git_says:
                    outcomes["git conflict"] += 1
                else:
                    assert got == git_says[p], f"turn {k}, {p}: not what git revert gives"
                    outcomes["same"] += 1
                assert result.pre is not None
                ws.rewind(result.pre)  # back to the person's files for the next one
                assert files_state(ws_dir) == person
    # Many earlier changes come out of a later file cleanly, as git's do: the comparison
    # above must have had something to compare (on this project's history: 13 of 51
    # clean for both, 37 in conflict for both).
    assert outcomes["same"] >= 8, outcomes
    # takeback refuses where git does, nearly always (merge3 and xdiff align a few
    # changes differently; a refusal is the safe side).
    assert outcomes["takeback conflict"] + outcomes["git conflict"] <= outcomes["same"], outcomes


def test_merged_undo_dry_run_and_redo_on_real_history(
    recorded: tuple[Path, list[str]], ws_dir: Path, store_dir: Path, tb: CLI
) -> None:
    _repo, _commits = recorded
    person = files_state(ws_dir)
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        session = ws.session("s")
        # The latest earlier turn whose undo merges a file a later turn also changed.
        for k in range(TURNS - 1, 0, -1):
            # A dry run names the regions that would refuse instead of raising.
            plan = session.undo(turn=k, merge=True, dry_run=True)
            if plan.conflicts:
                assert all(
                    "both changed" in w or "cannot be merged" in w for w in plan.why.values()
                )
                continue
            if plan.merged:
                break
        else:
            pytest.fail("no earlier turn merges cleanly")
        assert files_state(ws_dir) == person
        done = session.undo(turn=k, merge=True)
        assert done.merged == plan.merged
    # The preview is the diff from the files now to what the undo wrote.
    after = files_state(ws_dir)
    assert plan.preview == tb("diff", done.pre or "", "--", *plan.merged).stdout.encode()
    assert after != person
    with takeback.Workspace(ws_dir, store=store_dir) as ws:
        ws.session("s").redo()
    assert files_state(ws_dir) == person
