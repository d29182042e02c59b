"""The command line at its edges: numbers too large for the store, names that would break
the one-line-per-path output, a --store that is a file, a store that cannot be written,
and output cut short by a closed pipe.

Every refusal is exit 2 with one line on stderr; nothing ends in a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import CLI

HUGE = "99999999999999999999"  # more than SQLite's 64-bit integers hold


def _one_line_refusal(tb: CLI, *args: str) -> str:
    proc = tb(*args, check=None)
    assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "error: " in lines[0], (args, proc.stderr)
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture
def two_turns(tb: CLI, ws_dir: Path) -> CLI:
    (ws_dir / "a.txt").write_text("a1\n")
    for text in ("a2\n", "a3\n"):
        tb("turn", "begin")
        tb("touch", "a.txt")
        (ws_dir / "a.txt").write_text(text)
        tb("turn", "end")
    return tb


@pytest.mark.parametrize(
    "args",
    [
        ["rewind", "--to", HUGE],
        ["rewind", "--to", f"turn:{HUGE}"],
        ["rewind", "--to", "9223372036854775808"],
        ["show", f"{HUGE}:a.txt"],
        ["show", f"turn:{HUGE}:a.txt"],
        ["diff", HUGE],
        ["diff", "start", HUGE],
        ["log", "-n", HUGE],
        ["undo", "--turn", HUGE],
        ["undo", "--turn", f"-{HUGE}"],
        ["revert", "--to-turn", HUGE],
        ["changes", "--turn", HUGE],
    ],
)
def test_a_number_too_large_for_the_store_is_a_refusal(
    two_turns: CLI, ws_dir: Path, args: list[str]
) -> None:
    _one_line_refusal(two_turns, *args)
    assert (ws_dir / "a.txt").read_text() == "a3\n"


def test_the_library_reads_a_number_too_large_as_no_such_step(two_turns: CLI, ws_dir: Path) -> None:
    from takeback import Workspace
    from takeback.errors import RefError

    with Workspace(ws_dir, store=two_turns.store) as ws:
        for ref in (HUGE, f"turn:{HUGE}"):
            with pytest.raises(RefError):
                ws.resolve(ref, session=ws.active_session())
        assert len(ws.log(limit=int(HUGE))) == len(ws.log())


# -- names that would break one line per path ------------------------------------------

ODD = {
    b"new\nline.txt": '"new\\nline.txt"',
    b"tab\there.txt": '"tab\\there.txt"',
    b'q"uote.txt': '"q\\"uote.txt"',
    b"back\\slash.txt": '"back\\\\slash.txt"',
    b"bad\xff.txt": '"bad\\377.txt"',
    "café.txt".encode(): '"caf\\303\\251.txt"',
    b"bell\x07.txt": '"bell\\a.txt"',
    b"plain name.txt": "plain name.txt",
}


def _write_odd(ws: Path, text: str) -> None:
    for raw in ODD:
        with open(os.path.join(os.fsencode(ws), raw), "w") as f:
            f.write(text)


def _paths(lines: list[str], prefix: str) -> list[str]:
    return sorted(line[len(prefix) :] for line in lines if line.startswith(prefix))


def test_odd_names_are_quoted_as_git_quotes_them(tb: CLI, ws_dir: Path) -> None:
    import shutil

    want = sorted(ODD.values())
    (ws_dir / "keep.txt").write_text("k\n")
    first = json.loads(tb("snapshot", "--json").stdout)["id"]
    _write_odd(ws_dir, "one\n")

    lines = tb("status").stdout.splitlines()
    assert len(lines) == len(ODD) and _paths(lines, "A ") == want
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q"], cwd=ws_dir, check=True)
        git = subprocess.run(
            ["git", "-c", "core.quotePath=true", "ls-files", "--others", "--exclude-standard"],
            cwd=ws_dir,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert sorted(p for p in git if p != "keep.txt") == want
    lines = tb("diff", "--name-status").stdout.splitlines()
    assert len(lines) == len(ODD) and _paths(lines, "A\t") == want
    lines = tb("rewind", "--to", first, "--dry-run").stdout.splitlines()
    # "would remove:", a line per path, the count, "dry run: ...", and the plan's token
    assert _paths(lines, "A ") == want and len(lines) == len(ODD) + 4
    assert lines[0] == "would remove:"

    # --json keeps names as they are
    doc = json.loads(tb("status", "--json").stdout)
    assert sorted(c["path"] for c in doc["changes"]) == sorted(os.fsdecode(r) for r in ODD)

    tb("snapshot")
    tb("turn", "begin")
    tb("touch", *[os.fsdecode(r) for r in ODD])
    _write_odd(ws_dir, "two\nlines\n")
    tb("turn", "end")
    lines = tb("changes").stdout.splitlines()
    assert len(lines) == len(ODD) + 1
    assert sorted(line.split(maxsplit=3)[3] for line in lines[1:]) == want
    for cmd, head in (
        (["undo"], "Undid"),
        (["redo"], "Redid"),
        (["revert", "--to-turn", "0"], "Reverted"),
    ):
        lines = tb(*cmd).stdout.splitlines()
        assert lines[0].startswith(head) and len(lines) == len(ODD) + 2, (cmd, lines)
        assert _paths(lines, "  ") == want


def test_a_conflict_on_an_odd_name_stays_on_its_line(tb: CLI, ws_dir: Path) -> None:
    name = os.fsdecode(b"new\nline.txt")
    (ws_dir / name).write_text("one\n")
    tb("snapshot")
    tb("turn", "begin")
    tb("touch", name)
    (ws_dir / name).write_text("two\n")
    tb("turn", "end")
    (ws_dir / name).write_text("a person's edit\n")
    lines = tb("undo", check=3).stderr.splitlines()
    assert lines[0] == 'takeback: "new\\nline.txt" changed after turn 1'
    assert len(lines) == 2


# -- a --store that is not a folder; a store that cannot be written ---------------------


def test_a_store_that_is_a_file_is_a_refusal(tb: CLI, ws_dir: Path, tmp_path: Path) -> None:
    (ws_dir / "a.txt").write_text("a\n")
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("mine\n")
    for store in (not_a_folder, not_a_folder / "store"):
        for args in (["snapshot"], ["log"], ["status"], ["run", "--", "true"], ["turn", "begin"]):
            line = _one_line_refusal(tb, "--store", str(store), *args)
            assert line.startswith("takeback: error: "), line
    assert not_a_folder.read_text() == "mine\n"


def _tree(folder: Path) -> dict[str, tuple[int, int, int]]:
    return {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_mode) for p in folder.iterdir()
    }


def test_a_read_only_store_can_still_be_read(tmp_path: Path) -> None:
    import sys

    from .conftest import SRC, without_file_powers

    prefix = without_file_powers()  # as root, a read-only store is no obstacle
    ws, store = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    tb = CLI(ws, store)
    (ws / "a.txt").write_text("a1\n")
    first = json.loads(tb("snapshot", "--json").stdout)["id"]
    tb("turn", "begin")
    tb("touch", "a.txt")
    (ws / "a.txt").write_text("a2\n")
    tb("turn", "end")
    last = json.loads(tb("snapshot", "--json").stdout)["id"]
    expected_log = tb("log").stdout
    for name in ("lock", "events.jsonl"):  # a read must not make them again
        (store / name).unlink(missing_ok=True)
    for dirpath, _dirnames, filenames in os.walk(store):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o400)
    store.chmod(0o500)
    before = _tree(store)
    env = dict(os.environ, TAKEBACK_STORE=str(store), PYTHONPATH=SRC)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, sys.executable, "-m", "takeback", *args],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    try:
        proc = run("log")
        assert (proc.returncode, proc.stderr) == (0, "") and proc.stdout == expected_log
        assert len(json.loads(run("log", "--json", "--all").stdout)) == len(
            expected_log.splitlines()
        )
        assert run("show", f"{first[:10]}:a.txt").stdout == "a1\n"
        proc = run("diff", first[:10], last[:10])
        assert proc.returncode == 0 and "-a1\n+a2\n" in proc.stdout
        proc = run("changes")
        assert proc.returncode == 0 and "a.txt" in proc.stdout
        assert _tree(store) == before

        # Recording is refused, in one line, and writes nothing either.
        proc = run("snapshot")
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.splitlines()) == 1 and "error: " in proc.stderr
        assert _tree(store) == before
    finally:
        store.chmod(0o700)  # so that tmp_path can be removed


# -- output cut short by a closed pipe -------------------------------------------------


@pytest.mark.parametrize("args", [["status"], ["diff"], ["status", "--json"]])
def test_a_closed_pipe_ends_the_output_quietly(tb: CLI, ws_dir: Path, args: list[str]) -> None:
    import sys

    from .conftest import SRC

    tb("snapshot")
    for i in range(3000):  # far more than a pipe's buffer
        (ws_dir / f"a-file-with-a-long-name-to-fill-the-pipe-{i:05}.txt").write_text(f"{i}\n")
    env = dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)
    # ``takeback status | head -1``
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeback", *args],
        cwd=ws_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 141
    assert err == b""


@pytest.mark.quick
def test_empty_store_and_session_variables_mean_unset(tb: CLI, ws_dir: Path) -> None:
    # `export TAKEBACK_STORE=` once made the current folder the store: the store's files
    # were written into the workspace itself.
    (ws_dir / "a.txt").write_text("a\n")
    empty = {"TAKEBACK_STORE": "", "TAKEBACK_SESSION": ""}
    got = json.loads(tb("snapshot", "--json", env=empty).stdout)
    assert sorted(os.listdir(ws_dir)) == ["a.txt"]
    assert got["session"] == "default"
    log = json.loads(tb("log", "--json", env=empty).stdout)
    assert got["id"] in [s["id"] for s in log]


def test_one_process_runs_many_command_lines(
    ws_dir: Path,
    store_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The service runs command after command in one process: none inherits another's."""
    from takeback.cli import main

    monkeypatch.setenv("TAKEBACK_STORE", str(store_dir))
    monkeypatch.setenv("TAKEBACK_RELAY", "0")
    (ws_dir / "a.txt").write_text("a\n")
    args = ["snapshot", "--root", str(ws_dir), "--json"]
    assert main([*args, "-m", "first"], relay=False) == 0
    assert json.loads(capsys.readouterr().out)["message"] == "first"
    assert main(args, relay=False) == 0
    assert json.loads(capsys.readouterr().out)["message"] == ""
    assert main(["snapshot", "--root", str(ws_dir), "--bogus"], relay=False) == 2
    assert main(["log", "--root", str(ws_dir), "--json"], relay=False) == 0
    messages = [s["message"] for s in json.loads(capsys.readouterr().out)]
    assert messages == ["", "first", "session start"]  # newest first


@pytest.mark.parametrize("args", [["diff"], ["diff", "--binary"], ["log"], ["status", "--json"]])
def test_a_command_started_without_stdout_drops_its_output_quietly(
    tb: CLI, ws_dir: Path, args: list[str]
) -> None:
    """``takeback diff >&-``: nothing to print to, so nothing printed; no traceback."""
    (ws_dir / "a.txt").write_text("a\n")
    tb("snapshot")
    (ws_dir / "a.txt").write_text("b\n")
    proc = tb.without_stdout(*args)
    assert (proc.returncode, proc.stderr) == (0, b"")


def _recorded(store: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(store / "meta.db")
    try:
        return int(conn.execute("SELECT count(*) FROM snapshots").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("args", [["snapshot", "--json"], ["status", "--json"]])
def test_a_command_that_ends_at_once_prints_everything_and_closes_its_store(
    tb: CLI, ws_dir: Path, args: list[str]
) -> None:
    """``snapshot`` and ``status`` end their process as soon as they are done, without
    the interpreter's teardown: what they printed is all there, and their databases were
    closed first (the last connection's close removes SQLite's write-ahead logs)."""
    for i in range(40):
        (ws_dir / f"f{i:02}.txt").write_text(f"{i}\n")
    tb("snapshot")
    (ws_dir / "f00.txt").write_text("changed\n")
    proc = tb(*args, env={"TAKEBACK_RELAY": "0"})
    doc = json.loads(proc.stdout)
    if args[0] == "snapshot":
        assert doc["files"] == 40
        assert _recorded(tb.store) == 3  # the baseline, the first, and this one
    else:
        assert [c["path"] for c in doc["changes"]] == ["f00.txt"]
    assert proc.stderr == ""
    assert not list(tb.store.glob("*.db-wal")), sorted(p.name for p in tb.store.iterdir())


@pytest.mark.quick
def test_a_local_snapshot_into_a_closed_pipe_is_recorded_and_ends_quietly(
    tb: CLI, ws_dir: Path
) -> None:
    """``takeback snapshot --json | true`` without the service: exit 141, no traceback."""
    (ws_dir / "a.txt").write_text("a\n")
    proc = tb.into_closed_pipe("snapshot", "--json", env={"TAKEBACK_RELAY": "0"})
    assert (proc.returncode, proc.stderr) == (141, b"")
    assert _recorded(tb.store) == 2  # the baseline and this one
