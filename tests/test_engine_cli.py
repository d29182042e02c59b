"""End-to-end: the real ``takeback`` command on real folders (snapshot, diff, rewind, run)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from .conftest import CLI


def state(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Everything in a folder (but .git): kind, permission bits, bytes or link target."""
    out: dict[str, tuple[str, int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", 0, os.readlink(p).encode())
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode), b"")
            else:
                out[rel] = ("f", stat.S_IMODE(st.st_mode), p.read_bytes())
    return out


def snap(tb: CLI, *args: str) -> str:
    return str(json.loads(tb("snapshot", "--json", *args).stdout)["id"])


def make_rich_tree(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("print('hi')\n")
    (ws / "src" / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (ws / "src" / "tool.sh").chmod(0o755)
    (ws / "data.bin").write_bytes(bytes(range(256)) * 10)
    (ws / "link-to-file").symlink_to("src/app.py")
    (ws / "link-to-dir").symlink_to("src")
    (ws / "dangling").symlink_to("nowhere/at/all")
    (ws / "empty").mkdir()
    (ws / "deep" / "er").mkdir(parents=True)
    (ws / "deep" / "er" / "f.txt").write_text("deep\n")
    (ws / "no-newline.txt").write_bytes(b"last line without newline")


def mutate(ws: Path) -> None:
    (ws / "src" / "app.py").write_text("print('changed')\nprint('more')\n")
    (ws / "src" / "tool.sh").chmod(0o644)
    (ws / "data.bin").write_bytes(b"\0\1\2" * 99)
    (ws / "link-to-file").unlink()
    (ws / "link-to-file").symlink_to("data.bin")
    (ws / "dangling").unlink()
    shutil.rmtree(ws / "empty")
    (ws / "deep" / "er" / "f.txt").rename(ws / "deep" / "renamed.txt")
    (ws / "new-dir" / "sub").mkdir(parents=True)
    (ws / "new-dir" / "sub" / "n.txt").write_text("new\n")
    (ws / "new-empty").mkdir()
    (ws / "no-newline.txt").write_bytes(b"still no newline, but different")


@pytest.mark.quick
def test_rewind_to_start_restores_every_kind_of_entry_exactly(tb: CLI, ws_dir: Path) -> None:
    make_rich_tree(ws_dir)
    first = snap(tb)
    before = state(ws_dir)
    mutate(ws_dir)
    after = state(ws_dir)
    assert after != before

    out = tb("rewind", "--to", "start").stdout
    assert state(ws_dir) == before
    assert "pre-rewind snapshot:" in out
    assert "takeback rewind --to" in out
    lines = out.splitlines()
    assert "M src/app.py" in lines
    assert "A new-dir/sub/n.txt" in lines
    assert "D empty/" in lines
    # The pre-rewind snapshot takes the rewind back.
    pre = out.split("takeback rewind --to ")[1].split(")")[0]
    tb("rewind", "--to", pre)
    assert state(ws_dir) == after
    tb("rewind", "--to", first[:8])
    assert state(ws_dir) == before


def test_dry_run_prints_the_plan_and_writes_nothing(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    make_rich_tree(ws_dir)
    snap(tb)
    mutate(ws_dir)
    after = state(ws_dir)
    n_before = len(json.loads(tb("log", "--json").stdout))
    out = tb("rewind", "--to", "start", "--dry-run").stdout
    assert "dry run: nothing was written" in out
    assert state(ws_dir) == after
    assert len(json.loads(tb("log", "--json").stdout)) == n_before
    doc = json.loads(tb("rewind", "--to", "start", "--dry-run", "--json").stdout)
    assert {"action": "M", "path": "src/app.py", "effect": "restore"} in doc["plan"]
    assert doc["counts"]["M"] >= 1 and doc["pre_rewind"] is None


def test_rewind_of_some_paths_leaves_the_rest(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("a1\n")
    (ws_dir / "b.txt").write_text("b1\n")
    snap(tb)
    (ws_dir / "a.txt").write_text("a2\n")
    (ws_dir / "b.txt").write_text("b2\n")
    (ws_dir / "sub").mkdir()
    (ws_dir / "sub" / "c.txt").write_text("c\n")
    tb("rewind", "--to", "start", "--", "a.txt", "sub")
    assert (ws_dir / "a.txt").read_text() == "a1\n"
    assert (ws_dir / "b.txt").read_text() == "b2\n"
    assert not (ws_dir / "sub").exists()


def test_paths_are_taken_from_the_current_folder(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "sub").mkdir()
    (ws_dir / "sub" / "x.txt").write_text("1\n")
    (ws_dir / "x.txt").write_text("top\n")
    snap(tb)
    (ws_dir / "sub" / "x.txt").write_text("2\n")
    (ws_dir / "x.txt").write_text("top2\n")
    tb("rewind", "--root", str(ws_dir), "--to", "start", "--", "x.txt", cwd=ws_dir / "sub")
    assert (ws_dir / "sub" / "x.txt").read_text() == "1\n"
    assert (ws_dir / "x.txt").read_text() == "top2\n"


@pytest.mark.quick
def test_status_and_diff_name_status(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "keep.txt").write_text("k\n")
    (ws_dir / "gone.txt").write_text("g\n")
    snap(tb)
    (ws_dir / "keep.txt").write_text("k2\n")
    (ws_dir / "gone.txt").unlink()
    (ws_dir / "new.txt").write_text("n\n")
    assert tb("status").stdout.splitlines() == ["D gone.txt", "M keep.txt", "A new.txt"]
    assert tb("diff", "--name-status").stdout.splitlines() == [
        "D\tgone.txt",
        "M\tkeep.txt",
        "A\tnew.txt",
    ]
    stat_out = tb("diff", "--stat").stdout
    assert "3 files changed, 2 insertions(+), 2 deletions(-)" in stat_out
    only = tb("diff", "--name-status", "--", "keep.txt").stdout
    assert only.splitlines() == ["M\tkeep.txt"]


def test_diff_is_accepted_by_git_apply(tb: CLI, ws_dir: Path, tmp_path: Path) -> None:
    make_rich_tree(ws_dir)
    (ws_dir / "data.bin").unlink()  # git apply needs full-index binary patches; text only here
    snap(tb)
    (ws_dir / "src" / "app.py").write_text("print('changed')\n" + "x\n" * 20)
    (ws_dir / "src" / "tool.sh").chmod(0o644)
    (ws_dir / "no-newline.txt").write_bytes(b"last line without newline\nand one more")
    (ws_dir / "deep" / "er" / "f.txt").unlink()
    (ws_dir / "added.txt").write_text("added\n")
    (ws_dir / "link-to-file").unlink()
    (ws_dir / "link-to-file").symlink_to("added.txt")
    wanted = state(ws_dir)
    patch = tb("diff").stdout
    assert "diff --git a/src/app.py b/src/app.py" in patch
    assert "\\ No newline at end of file" in patch
    (tmp_path / "p.diff").write_text(patch)
    tb("rewind", "--to", "start")
    subprocess.run(["git", "apply", "--check", str(tmp_path / "p.diff")], cwd=ws_dir, check=True)
    subprocess.run(["git", "apply", str(tmp_path / "p.diff")], cwd=ws_dir, check=True)
    got = state(ws_dir)
    # git apply leaves folders that became empty; the files themselves must match exactly.
    assert {k: v for k, v in got.items() if v[0] != "d"} == {
        k: v for k, v in wanted.items() if v[0] != "d"
    }


def test_binary_diff_says_so(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "b.bin").write_bytes(b"\0\1\2")
    snap(tb)
    (ws_dir / "b.bin").write_bytes(b"\0\1\3")
    assert "Binary files a/b.bin and b/b.bin differ" in tb("diff").stdout


def test_show_prints_the_bytes_as_they_were(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "f.bin").write_bytes(b"\xff\x00abc")
    sid = snap(tb)
    (ws_dir / "f.bin").write_bytes(b"other")
    proc = subprocess.run(
        [*tb_cmd(), "show", f"{sid[:6]}:f.bin"],
        cwd=ws_dir,
        capture_output=True,
        env=tb_env(tb),
        check=True,
    )
    assert proc.stdout == b"\xff\x00abc"
    assert tb("show", "start:missing.txt", check=2).stderr.startswith("takeback: error:")


def tb_cmd() -> list[str]:
    import sys

    return [sys.executable, "-m", "takeback"]


def tb_env(tb: CLI) -> dict[str, str]:
    from .conftest import SRC

    return dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)


def test_scope_rules_gitignore_takebackignore_env_and_git(tb: CLI, ws_dir: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=ws_dir, check=True)
    (ws_dir / ".gitignore").write_text("*.log\nbuild/\nlogs/**\n!logs/keep.txt\n")
    (ws_dir / "sub").mkdir()
    (ws_dir / "sub" / ".gitignore").write_text("!important.log\n")
    (ws_dir / "sub" / "important.log").write_text("kept\n")
    (ws_dir / "sub" / "noise.tmp").write_text("x\n")
    (ws_dir / ".takebackignore").write_text("*.tmp\n")
    (ws_dir / "app.log").write_text("ignored\n")
    (ws_dir / "tracked.log").write_text("force-added\n")
    subprocess.run(["git", "add", "-f", "tracked.log"], cwd=ws_dir, check=True)
    (ws_dir / "build").mkdir()
    (ws_dir / "build" / "out.o").write_text("obj\n")
    (ws_dir / "logs").mkdir()
    (ws_dir / "logs" / "keep.txt").write_text("keep\n")
    (ws_dir / "logs" / "drop.txt").write_text("drop\n")
    (ws_dir / ".env").write_text("SECRET=1\n")
    (ws_dir / ".env.local").write_text("SECRET=2\n")
    snap(tb)
    git_before = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ws_dir, capture_output=True, text=True
    ).stdout
    index_before = (ws_dir / ".git" / "index").read_bytes()

    for name in ("app.log", "build/out.o", "logs/drop.txt", ".env", ".env.local", "sub/noise.tmp"):
        (ws_dir / name).write_text("changed by a person\n")
    (ws_dir / "sub" / "important.log").write_text("changed\n")
    (ws_dir / "tracked.log").write_text("changed\n")
    (ws_dir / "logs" / "keep.txt").write_text("changed\n")
    (ws_dir / "new.log").write_text("new ignored file\n")
    tb("rewind", "--to", "start")

    assert (ws_dir / "sub" / "important.log").read_text() == "kept\n"
    assert (ws_dir / "tracked.log").read_text() == "force-added\n"
    assert (ws_dir / "logs" / "keep.txt").read_text() == "keep\n"
    for name in ("app.log", "build/out.o", "logs/drop.txt", ".env", ".env.local", "sub/noise.tmp"):
        assert (ws_dir / name).read_text() == "changed by a person\n", name
    assert (ws_dir / "new.log").exists()
    assert (ws_dir / ".git" / "index").read_bytes() == index_before
    assert (
        subprocess.run(
            ["git", "status", "--porcelain"], cwd=ws_dir, capture_output=True, text=True
        ).stdout
        == git_before
    )


def test_big_files_are_counted_named_and_not_restored(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "small.txt").write_text("s\n")
    (ws_dir / "big.bin").write_bytes(b"x" * 5000)
    doc = json.loads(tb("snapshot", "--json", "--max-file-bytes", "1000").stdout)
    assert doc["skipped"] == ["big.bin"] and doc["skipped_count"] == 1
    assert doc["files"] == 1
    (ws_dir / "big.bin").write_bytes(b"y" * 6000)
    (ws_dir / "small.txt").write_text("s2\n")
    out = tb("rewind", "--to", "start", "--max-file-bytes", "1000").stdout
    assert "not restored (never kept): big.bin" in out
    assert (ws_dir / "small.txt").read_text() == "s\n"
    assert (ws_dir / "big.bin").read_bytes() == b"y" * 6000


def test_run_is_a_step_and_passes_the_exit_status(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "f.txt").write_text("one\n")
    proc = tb(
        "run",
        "--json",
        "--",
        "sh",
        "-c",
        "echo two > f.txt; echo made > g.txt; echo out; exit 7",
        check=7,
    )
    # SPEC ("Sessions"): with --json, stdout is exactly one JSON document and the
    # command's own stdout goes to stderr.
    doc = json.loads(proc.stdout)
    assert proc.stderr.startswith("out\n")
    assert doc["exit_code"] == 7 and doc["step"] == 1
    assert sorted(c["path"] for c in doc["changes"]) == ["f.txt", "g.txt"]
    tb("run", "--", "sh", "-c", "rm f.txt")
    assert not (ws_dir / "f.txt").exists()
    tb("rewind", "--to", "2")  # the state before step 2
    assert (ws_dir / "f.txt").read_text() == "two\n"
    tb("rewind", "--to", "1")
    assert (ws_dir / "f.txt").read_text() == "one\n"
    assert not (ws_dir / "g.txt").exists()


def test_run_of_a_missing_command(tb: CLI, ws_dir: Path) -> None:
    proc = tb("run", "--", "definitely-not-a-command-xyz", check=127)
    assert "command not found" in proc.stderr


def test_bad_refs_exit_2_with_one_line(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "f").write_text("x")
    snap(tb)
    (ws_dir / "f").write_text("y")
    for ref, words in (
        ("abc", "too short"),
        ("ffffffff", "no snapshot matches"),
        ("not-a-ref", "not a ref"),
        ("turn:9", "no turn 9"),
        ("99", "no step"),
    ):
        proc = tb("rewind", "--to", ref, check=2)
        assert words in proc.stderr, (ref, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
    assert (ws_dir / "f").read_text() == "y"


def test_no_store_exits_2(tb: CLI, ws_dir: Path) -> None:
    for args in (["log"], ["status"], ["diff"], ["rewind", "--to", "start"], ["show", "start:x"]):
        proc = tb(*args, check=2)
        assert "no takeback store" in proc.stderr
    assert not tb.store.exists()


def test_a_store_for_another_root_is_refused(tb: CLI, ws_dir: Path, tmp_path: Path) -> None:
    (ws_dir / "f").write_text("x")
    snap(tb)
    other = tmp_path / "other"
    other.mkdir()
    proc = tb("snapshot", "--root", str(other), check=2)
    assert "belongs to" in proc.stderr


def test_a_damaged_object_refuses_the_rewind_and_writes_nothing(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    import sqlite3

    (ws_dir / "f.txt").write_text("original content\n")
    snap(tb)
    (ws_dir / "f.txt").write_text("edited\n")
    (ws_dir / "g.txt").write_text("new\n")
    conn = sqlite3.connect(store_dir / "objects.db")
    import hashlib

    import zstandard

    oid = hashlib.sha256(b"original content\n").hexdigest()
    conn.execute(
        "UPDATE objects SET data=? WHERE oid=?",
        (zstandard.ZstdCompressor().compress(b"tampered\n"), oid),
    )
    conn.commit()
    conn.close()
    proc = tb("rewind", "--to", "start", check=2)
    assert "fails its hash check" in proc.stderr
    assert (ws_dir / "f.txt").read_text() == "edited\n"
    assert (ws_dir / "g.txt").exists()


def test_store_is_private(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "f").write_text("x")
    snap(tb)
    assert stat.S_IMODE(store_dir.stat().st_mode) == 0o700
    for p in store_dir.iterdir():
        if p.is_file():
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


def test_default_store_lives_in_the_user_data_folder(ws_dir: Path, tmp_path: Path) -> None:
    from .conftest import SRC

    env = {k: v for k, v in os.environ.items() if k != "TAKEBACK_STORE"}
    env["PYTHONPATH"] = SRC
    (ws_dir / "f").write_text("x")
    subprocess.run([*tb_cmd(), "snapshot"], cwd=ws_dir, env=env, check=True, capture_output=True)
    data = Path(os.environ["XDG_DATA_HOME"]) / "takeback" / "workspaces"
    stores = list(data.iterdir())
    assert len(stores) == 1 and stores[0].name.startswith("ws-")
    assert not any(p.name.startswith(".takeback") for p in ws_dir.iterdir())


def test_a_symlinked_folder_pointing_outside_never_lets_a_restore_out(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    (ws_dir / "d").mkdir()
    (ws_dir / "d" / "f.txt").write_text("inside\n")
    snap(tb)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("outside, must not change\n")
    shutil.rmtree(ws_dir / "d")
    (ws_dir / "d").symlink_to(outside)
    tb("rewind", "--to", "start")
    assert (outside / "f.txt").read_text() == "outside, must not change\n"
    assert not (ws_dir / "d").is_symlink()
    assert (ws_dir / "d" / "f.txt").read_text() == "inside\n"


def test_store_inside_the_workspace_is_never_scanned(tmp_path: Path, ws_dir: Path) -> None:
    inner = CLI(ws_dir, ws_dir / ".tb-store")
    (ws_dir / "f").write_text("x")
    doc = json.loads(inner("snapshot", "--json").stdout)
    assert doc["files"] == 1
    (ws_dir / "f").write_text("y")
    inner("rewind", "--to", "start")
    assert (ws_dir / "f").read_text() == "x"
    assert (ws_dir / ".tb-store" / "store.json").exists()


def test_interrupted_rewind_is_reported_and_can_be_finished(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    import takeback

    for i in range(30):
        (ws_dir / f"f{i}.txt").write_text(f"v1 {i}\n")
    snap(tb)
    for i in range(30):
        (ws_dir / f"f{i}.txt").write_text(f"v2 {i}\n")
    ws = takeback.Workspace(ws_dir, store=store_dir)

    def stop_half_way(done: int, total: int) -> None:
        if done == 10:
            raise KeyboardInterrupt  # a person pressing Ctrl-C mid-restore

    with pytest.raises(KeyboardInterrupt):
        ws.rewind("start", on_progress=stop_half_way)
    ws.close()
    contents = {(ws_dir / f"f{i}.txt").read_text() for i in range(30)}
    assert any(c.startswith("v1") for c in contents) and any(c.startswith("v2") for c in contents)
    proc = tb("log")
    assert "was interrupted" in proc.stderr and "takeback rewind --to" in proc.stderr
    target = proc.stderr.split("finish it with `takeback rewind --to ")[1].split("`")[0]
    tb("rewind", "--to", target)
    assert all((ws_dir / f"f{i}.txt").read_text() == f"v1 {i}\n" for i in range(30))
    assert "was interrupted" not in tb("log").stderr


@pytest.mark.quick
def test_version_and_json_everywhere(tb: CLI, ws_dir: Path) -> None:
    assert tb("--version").stdout.startswith("takeback ")
    (ws_dir / "f").write_text("x")
    for args in (
        ["snapshot"],
        ["status"],
        ["diff"],
        ["rewind", "--to", "start"],
        ["show", "start:f"],
    ):
        doc = json.loads(tb(*args, "--json").stdout)
        assert doc["schema"] == 1
    snaps = json.loads(tb("--json", "log").stdout)  # the option before the command works too
    assert isinstance(snaps, list)
    assert {"id", "created_at", "kind", "session", "turn", "step", "message"} <= set(snaps[0])


def test_an_ignored_folder_with_a_tracked_file_keeps_only_that_file(tb: CLI, ws_dir: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=ws_dir, check=True)
    (ws_dir / ".gitignore").write_text("build/\n")
    (ws_dir / "build" / "sub").mkdir(parents=True)
    (ws_dir / "build" / "keep.txt").write_text("tracked\n")
    (ws_dir / "build" / "sub" / "out.o").write_text("object\n")
    (ws_dir / "build" / "junk.o").write_text("object\n")
    subprocess.run(["git", "add", "-f", "build/keep.txt"], cwd=ws_dir, check=True)
    for _ in range(2):  # the first scan, then the cached check pass
        snap(tb)
        (ws_dir / "build" / "keep.txt").write_text("edited\n")
        (ws_dir / "build" / "junk.o").write_text("rebuilt\n")
        assert tb("status").stdout.splitlines() == ["M build/keep.txt"]
        tb("rewind", "--to", "start")
        assert (ws_dir / "build" / "keep.txt").read_text() == "tracked\n"
        assert (ws_dir / "build" / "junk.o").read_text() == "rebuilt\n"


def test_without_a_session_commands_use_the_one_that_recorded_last(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "f.txt").write_text("before\n")
    tb("snapshot")  # session "default"
    tb("turn", "begin", "--session", "agent-7f3a")
    tb("touch", "f.txt", "--session", "agent-7f3a")
    (ws_dir / "f.txt").write_text("agent wrote this\n")
    tb("turn", "end", "--session", "agent-7f3a")
    out = tb("undo").stdout  # a person, after the agent's reply, with no --session
    assert out.startswith("Undid turn 1 of session 'agent-7f3a'. Files restored: 1.")
    assert (ws_dir / "f.txt").read_text() == "before\n"
    assert tb("undo", "--session", "default").stdout.strip() == "Nothing to undo."


def test_several_processes_share_one_store(tb: CLI, ws_dir: Path) -> None:
    from .conftest import SRC

    (ws_dir / "base.txt").write_text("base\n")
    tb("snapshot")
    env = dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)
    procs = [
        subprocess.Popen(
            [*tb_cmd(), "run", "--", "sh", "-c", f"echo {i} > w{i}.txt"],
            cwd=ws_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(6)
    ]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    steps = {s["step"] for s in json.loads(tb("log", "--json").stdout) if s["step"]}
    assert steps == {1, 2, 3, 4, 5, 6}
    tb("rewind", "--to", "start")
    assert sorted(p.name for p in ws_dir.iterdir()) == ["base.txt"]


def test_commands_from_a_subfolder_find_the_workspace(tb: CLI, ws_dir: Path) -> None:
    from .conftest import SRC

    (ws_dir / "sub").mkdir()
    (ws_dir / "sub" / "x.txt").write_text("one\n")
    tb("snapshot")
    (ws_dir / "sub" / "x.txt").write_text("two\n")
    tb("rewind", "--to", "start", "--", "x.txt", cwd=ws_dir / "sub")
    assert (ws_dir / "sub" / "x.txt").read_text() == "one\n"
    # The same with the default store (no TAKEBACK_STORE): found by its root's key.
    env = {k: v for k, v in os.environ.items() if k != "TAKEBACK_STORE"}
    env["PYTHONPATH"] = SRC
    subprocess.run([*tb_cmd(), "snapshot"], cwd=ws_dir, env=env, check=True, capture_output=True)
    (ws_dir / "sub" / "x.txt").write_text("three\n")
    proc = subprocess.run(
        [*tb_cmd(), "status"],
        cwd=ws_dir / "sub",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.splitlines() == ["M sub/x.txt"]


def test_a_file_that_becomes_an_ignored_folder_of_the_same_name(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / ".gitignore").write_text("build/\n")
    (ws_dir / "build").write_text("a file named build is in scope\n")
    first = snap(tb)
    import time

    time.sleep(1.2)  # past the race window, so the scan trusts its cache
    (ws_dir / "build").unlink()
    (ws_dir / "build").mkdir()
    (ws_dir / "build" / "out.bin").write_text("ignored build output\n")
    second = snap(tb)
    assert tb("show", f"{second}:build/out.bin", check=2).returncode == 2
    tb("rewind", "--to", first)
    assert (ws_dir / "build").is_dir()  # holds an ignored file: left, never deleted
    assert (ws_dir / "build" / "out.bin").read_text() == "ignored build output\n"


def test_raising_the_size_limit_keeps_a_file_skipped_before(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "big.txt").write_text("x" * 500)
    assert json.loads(tb("snapshot", "--json", "--max-file-bytes", "100").stdout)["skipped"] == [
        "big.txt"
    ]
    import time

    time.sleep(1.2)
    sid = snap(tb)  # the default limit (16 MiB)
    assert tb("show", f"{sid}:big.txt").stdout == "x" * 500


def test_a_changed_size_limit_applies_to_files_the_cache_holds(tb: CLI, ws_dir: Path) -> None:
    """A file cached (not racy: written over a second before) under one limit is judged
    by the next scan's limit: raised, it is read and kept; lowered, it is skipped. (The
    cache's row was trusted by its stat alone, so the first scan's verdict stood.)"""
    import time

    (ws_dir / "big.txt").write_text("x" * 500)
    time.sleep(1.2)  # no longer racy: the first scan caches its row
    first = json.loads(tb("snapshot", "--json", "--max-file-bytes", "100").stdout)
    assert first["skipped"] == ["big.txt"]
    raised = json.loads(tb("snapshot", "--json").stdout)
    assert raised["skipped"] == []
    assert tb("show", f"{raised['id']}:big.txt").stdout == "x" * 500
    lowered = json.loads(tb("snapshot", "--json", "--max-file-bytes", "100").stdout)
    assert lowered["skipped"] == ["big.txt"]


def test_non_utf8_names_and_very_deep_folders(tb: CLI, ws_dir: Path) -> None:
    odd = os.fsencode(str(ws_dir)) + b"/dir \xff\xfe"
    os.makedirs(odd)
    with open(odd + b"/f \xe9.txt", "wb") as f:
        f.write(b"latin-1 name\n")
    deep = ws_dir / "/".join(["a"] * 700)
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("deep\n")
    snap(tb)
    with open(odd + b"/f \xe9.txt", "wb") as f:
        f.write(b"changed\n")
    (deep / "bottom.txt").write_text("changed\n")
    tb("rewind", "--to", "start")
    with open(odd + b"/f \xe9.txt", "rb") as f:
        assert f.read() == b"latin-1 name\n"
    assert (deep / "bottom.txt").read_text() == "deep\n"
