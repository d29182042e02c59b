"""The one restore engine: faults once found in rewind, undo, redo, revert and unrevert,
and the rules every operation that writes to the workspace keeps.

Part one replays each fault as a person would meet it, on real folders, through the
library or the real command (and real git where git is involved), and checks what that
person would check: the bytes on disk, the exit code, the printed message and the
command it tells them to run. A process killed half way is a real child process killed
with SIGKILL at a chosen write.

Part two is a contract suite: each rule of the engine (never write through a symlink,
never destroy an ignored file in the way or a file over the size limit, always a
snapshot first that gives back exactly the state before) is checked against every
operation that writes: rewind, rewind of paths, undo, undo of one file, redo, revert,
unrevert and ``Session.undo_file``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import takeback
from takeback.errors import ConflictError, RestoreError

from .conftest import CLI, SRC, state, without_file_powers, write

# -- helpers ---------------------------------------------------------------------------


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def temps(root: Path) -> list[str]:
    """The restore's temporary files anywhere under ``root``."""
    return [
        os.path.relpath(os.path.join(d, n), root)
        for d, _dirs, files in os.walk(root)
        for n in files
        if n.startswith(".takeback-tmp-")
    ]


def stored(store: Path, data: bytes) -> bool:
    """Whether the store holds an object with these bytes (by id)."""
    with closing(sqlite3.connect(store / "objects.db")) as db:
        return db.execute("SELECT 1 FROM objects WHERE oid=?", (sha(data),)).fetchone() is not None


def damage(store: Path, data: bytes) -> None:
    """Rot the stored object holding ``data``: its row keeps its id, its bytes are garbage."""
    with closing(sqlite3.connect(store / "objects.db")) as db:
        n = db.execute(
            "UPDATE objects SET data=?, base=NULL WHERE oid=?", (b"\x00bit rot\xff" * 3, sha(data))
        ).rowcount
        db.commit()
    assert n == 1, "the object to damage is not in the store"


def killed_child(script: str, *args: str) -> None:
    """Run ``script`` in a child Python that kills itself (SIGKILL) at the point it picks."""
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)


def recovery(tb: CLI) -> tuple[list[str], list[str] | None]:
    """The finish and take-back commands the next command's warning prints, as argv."""
    err = tb("status", check=None).stderr
    got = re.search(r"finish it with `([^`]*)`", err)
    back = re.search(r"take it back with `([^`]*)`", err)
    assert got is not None, err
    return shlex.split(got.group(1)), shlex.split(back.group(1)) if back else None


def run_printed(
    tb: CLI, argv: list[str], check: int | None = 0
) -> subprocess.CompletedProcess[str]:
    assert argv[0] == "takeback"
    return tb(*argv[1:], check=check)


def turn_json(tb: CLI, *args: str) -> dict[str, Any]:
    return dict(json.loads(tb(*args, "--json").stdout))


# -- 1: a path a command only brought into scope -----------------------------------------

SECRET = b"a person's ignored notes, kept nowhere else\n"


def test_a_command_that_unignores_a_persons_file_does_not_record_it(
    ws_dir: Path, store_dir: Path
) -> None:
    root = ws_dir
    write(root, ".gitignore", "*.log\n")
    write(root, "secret.log", SECRET)
    with takeback.Workspace(root, store=store_dir) as ws:
        session = ws.session("s")
        with session.turn("stop ignoring logs") as turn:
            with turn.command("edit .gitignore"):
                write(root, ".gitignore", "# logs are kept now\n")
        assert [(c.path, c.status) for c in turn.changes] == [(".gitignore", "modified")]
        session.undo()
        assert (root / "secret.log").read_bytes() == SECRET
        assert (root / ".gitignore").read_text() == "*.log\n"
        session.redo()
        session.revert(to_turn=0)
    assert (root / "secret.log").read_bytes() == SECRET
    assert (root / ".gitignore").read_text() == "*.log\n"


def test_git_add_force_of_a_persons_ignored_file_does_not_record_it(tb: CLI, ws_dir: Path) -> None:
    root = ws_dir
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    write(root, ".gitignore", "*.log\n")
    write(root, "secret.log", SECRET)
    write(root, "a.txt", "a\n")
    tb("--session", "s", "snapshot")
    tb("--session", "s", "turn", "begin")
    tb("--session", "s", "run", "--", "git", "add", "-f", "secret.log")
    changes = turn_json(tb, "--session", "s", "turn", "end")["changes"]
    assert "secret.log" not in [c["path"] for c in changes]
    tb("--session", "s", "undo")
    assert (root / "secret.log").read_bytes() == SECRET
    tb("--session", "s", "revert", "--to-turn", "0")
    assert (root / "secret.log").read_bytes() == SECRET


# -- 2: a file over the size limit -------------------------------------------------------

BIG_AGENT = b"A" * 3000
BIG_PERSON = b"P" * 3000


def _big_file_turn(root: Path, store: Path) -> None:
    with takeback.Workspace(root, store=store, max_file_bytes=1000) as ws:
        with ws.session("s").turn("make a big file") as turn:
            turn.touch("big.bin")
            write(root, "big.bin", BIG_AGENT, 0o644)
    # A person edits it in place: same size, same mode, other bytes.
    with open(root / "big.bin", "r+b") as f:
        f.write(BIG_PERSON)


def test_undo_of_a_large_file_a_person_edited_is_a_conflict(ws_dir: Path, store_dir: Path) -> None:
    _big_file_turn(ws_dir, store_dir)
    with takeback.Workspace(ws_dir, store=store_dir, max_file_bytes=1000) as ws:
        with pytest.raises(ConflictError) as err:
            ws.session("s").undo()
    assert err.value.conflicts == ["big.bin"]
    assert (ws_dir / "big.bin").read_bytes() == BIG_PERSON


def test_forced_undo_leaves_a_large_file_a_person_edited(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    _big_file_turn(ws_dir, store_dir)
    out = tb("--session", "s", "undo", "--force", "--max-file-bytes", "1000").stdout
    assert "left as is: big.bin (over the size limit, never kept)" in out
    assert (ws_dir / "big.bin").read_bytes() == BIG_PERSON


# -- 3: one damaged object in the store --------------------------------------------------


@pytest.mark.parametrize("via", ["undo", "rewind"])
def test_a_damaged_object_is_repaired_from_the_disk_and_the_way_back_works(
    tb: CLI, ws_dir: Path, store_dir: Path, via: str
) -> None:
    root = ws_dir
    write(root, "a.txt", "a0\n")
    a1 = b"a1: the agent's version, whose stored copy rots\n"
    with takeback.Workspace(root, store=store_dir) as ws:
        first = ws.snapshot().id
        with ws.session("s").turn("edit a") as turn:
            turn.touch("a.txt")
            write(root, "a.txt", a1)
    damage(store_dir, a1)
    if via == "undo":
        pre = turn_json(tb, "--session", "s", "undo")["pre"]
    else:
        pre = turn_json(tb, "rewind", "--to", first)["pre_rewind"]
    assert (root / "a.txt").read_text() == "a0\n"
    tb("rewind", "--to", pre)
    assert (root / "a.txt").read_bytes() == a1


def test_a_rewind_that_cannot_get_what_it_must_write_refuses_before_writing(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    root = ws_dir
    write(root, "a.txt", "a0\n")
    b0 = b"b0: the only copy of this is in the store, and it rots\n"
    write(root, "b.txt", b0)
    first = turn_json(tb, "snapshot")["id"]
    write(root, "a.txt", "a1\n")
    write(root, "b.txt", "b1\n")
    damage(store_dir, b0)
    proc = tb("rewind", "--to", first, check=2)
    assert "b0" not in proc.stdout
    assert (root / "a.txt").read_text() == "a1\n"  # nothing was written
    assert (root / "b.txt").read_text() == "b1\n"
    assert "interrupted" not in tb("status", check=None).stderr


# -- 4: a folder swapped for a symlink to outside -----------------------------------------

OUTSIDE = b"bytes outside the workspace, never to be read or written\n"


def test_a_folder_swapped_for_a_link_outside_is_never_read_or_written_through(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    root = ws_dir
    outside = tmp_path / "outside"
    write(outside, "f", OUTSIDE)
    write(root, "sub/f", "mine\n")
    with takeback.Workspace(root, store=store_dir) as ws:
        with ws.session("s").turn("edit sub/f") as turn:
            turn.touch("sub/f")
            shutil.rmtree(root / "sub")
            (root / "sub").symlink_to(outside, target_is_directory=True)
        changes = {c.path: c for c in turn.changes}
    assert changes["sub/f"].status == "deleted"
    assert changes["sub/f"].sha256 != sha(OUTSIDE)
    assert not stored(store_dir, OUTSIDE)
    shown = turn_json(tb, "--session", "s", "changes")["changes"]
    assert [(c["path"], c["status"], c["sha256"]) for c in shown] == [("sub/f", "deleted", None)]
    proc = tb("--session", "s", "undo", check=1)
    assert "sub/f" in proc.stderr
    assert state(outside) == {"f": ("f", OUTSIDE, 0o644)}


# -- 5, 6, 7: operations killed half way ------------------------------------------------

_KILL_AFTER_FIRST_MOVE = """
import os, signal, sys, takeback
root, store, target = sys.argv[1:4]
def on_progress(done, total):
    if done == 1:
        os.kill(os.getpid(), signal.SIGKILL)
with takeback.Workspace(root, store=store) as ws:
    ws.rewind(target, paths=["d"], on_progress=on_progress)
"""


def test_an_interrupted_rewind_of_paths_is_finished_for_those_paths_only(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    root = ws_dir
    for name in ("d/a", "d/b", "other"):
        write(root, name, f"{name} v1\n")
    first = turn_json(tb, "snapshot")["id"]
    for name in ("d/a", "d/b", "other"):
        write(root, name, f"{name} v2\n")
    killed_child(_KILL_AFTER_FIRST_MOVE, str(root), str(store_dir), first)
    assert sorted((root / "d" / n).read_text() for n in "ab") == ["d/a v1\n", "d/b v2\n"]
    write(root, "other", "other v3, a person's edit meanwhile\n")
    finish, back = recovery(tb)
    assert finish[-2:] == ["--", str(root / "d")]
    assert back is not None and back[-2:] == ["--", str(root / "d")]
    run_printed(tb, finish)
    assert (root / "d/a").read_text() == "d/a v1\n"
    assert (root / "d/b").read_text() == "d/b v1\n"
    assert (root / "other").read_text() == "other v3, a person's edit meanwhile\n"
    assert "interrupted" not in tb("status", check=None).stderr


def kill_after_first_write(undo_args: str = "") -> str:
    """A child script: ``session("s").undo(<undo_args>)``, killed after its first write."""
    return _KILL_AFTER_FIRST_WRITE + f'    ws.session("s").undo({undo_args})\n'


_KILL_AFTER_FIRST_WRITE = """
import os, signal, sys, takeback
from takeback._fs import SafeRoot
root, store = sys.argv[1:3]
real = SafeRoot.write_file
def write_file(self, rel, data, mode):
    real(self, rel, data, mode)
    os.kill(os.getpid(), signal.SIGKILL)
SafeRoot.write_file = write_file
with takeback.Workspace(root, store=store) as ws:
"""


@pytest.mark.quick
def test_an_undo_killed_half_way_and_run_again_is_redone_whole(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    root = ws_dir
    names = ("a", "b", "c")
    for n in names:
        write(root, n, f"{n}0\n")
    with takeback.Workspace(root, store=store_dir) as ws:
        with ws.session("s").turn("edit three") as turn:
            for n in names:
                turn.touch(n)
                write(root, n, f"{n}1\n")
    killed_child(kill_after_first_write(), str(root), str(store_dir))
    assert [(root / n).read_text()[1] for n in names].count("0") == 1  # one written
    tb("--session", "s", "undo")
    assert [(root / n).read_text() for n in names] == ["a0\n", "b0\n", "c0\n"]
    tb("--session", "s", "redo")
    assert [(root / n).read_text() for n in names] == ["a1\n", "b1\n", "c1\n"]


_KILL_AT_FIRST_RENAME = """
import os, signal, sys, takeback
root, store, target = sys.argv[1:4]
real = os.replace
def replace(src, dst, *args, **kwargs):
    # Only a rename inside the workspace (the journal's own rename is in the store).
    if kwargs.get("src_dir_fd") is not None:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *args, **kwargs)
os.replace = replace
with takeback.Workspace(root, store=store) as ws:
    ws.rewind(target)
"""


@pytest.mark.parametrize("which", ["finish", "take back"])
def test_the_recovery_command_removes_the_temporary_files_a_kill_left(
    tb: CLI, ws_dir: Path, store_dir: Path, which: str
) -> None:
    root = ws_dir
    write(root, "sub/a", "a1\n")
    write(root, "sub/b", "b1\n")
    first = turn_json(tb, "snapshot")["id"]
    write(root, "sub/a", "a2\n")
    write(root, "sub/b", "b2\n")
    killed_child(_KILL_AT_FIRST_RENAME, str(root), str(store_dir), first)
    assert len(temps(root)) == 1 and temps(root)[0].startswith("sub/")
    finish, back = recovery(tb)
    argv = finish if which == "finish" else back
    assert argv is not None
    run_printed(tb, argv)
    assert temps(root) == []
    want = "1" if which == "finish" else "2"
    assert [(root / "sub" / n).read_text() for n in "ab"] == [f"a{want}\n", f"b{want}\n"]


# -- 8: one-file undo after an undo and a person's edit -------------------------------


@pytest.mark.parametrize("via", ["mcp", "library"])
def test_undo_file_after_an_undo_refuses_a_persons_edit(
    tb: CLI, ws_dir: Path, store_dir: Path, via: str
) -> None:
    root = ws_dir
    write(root, "a", "a0\n")
    with takeback.Workspace(root, store=store_dir) as ws:
        with ws.session("s").turn("edit a") as turn:
            turn.touch("a")
            write(root, "a", "a1\n")
    tb("--session", "s", "undo")
    assert (root / "a").read_text() == "a0\n"
    write(root, "a", "a0\nand a person's line\n")
    if via == "mcp":
        from takeback.integrations._mcp_server import ServerConfig, _Tools

        tools = _Tools(ServerConfig(root=str(root), store=str(store_dir), session="s"))
        with pytest.raises(ConflictError):
            tools.undo_file("a", None)
    else:
        with takeback.Workspace(root, store=store_dir) as ws, pytest.raises(ConflictError):
            ws.session("s").undo_file("a")
    assert (root / "a").read_text() == "a0\nand a person's line\n"


# -- 11: undo while the asking reply's turn is open -------------------------------------


def test_undo_with_an_empty_open_turn_takes_back_the_last_turn_with_changes(
    tb: CLI, ws_dir: Path
) -> None:
    write(ws_dir, "a", "a0\n")
    tb("turn", "begin", "-m", "edit a")
    tb("touch", "a")
    write(ws_dir, "a", "a1\n")
    tb("turn", "end")
    tb("turn", "begin", "-m", "please undo that")  # the agent's reply, no changes yet
    done = turn_json(tb, "undo")
    assert done["turns"] == [1]
    assert (ws_dir / "a").read_text() == "a0\n"


# -- 13: a read-only folder --------------------------------------------------------------


def test_a_read_only_folder_gets_its_file_back_and_stays_read_only(tmp_path: Path) -> None:
    prefix = without_file_powers()  # as root, a read-only folder shuts nobody out
    ws, store = tmp_path / "ws", tmp_path / "store"
    write(ws, "ro/f", "v1\n", 0o644)
    write(ws, "a.txt", "a\n")
    (ws / "ro").chmod(0o555)
    env = dict(os.environ, TAKEBACK_STORE=str(store), PYTHONPATH=SRC)

    def run(*args: str, check: int = 0) -> str:
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "takeback", *args],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == check, proc.stdout + proc.stderr
        return proc.stdout

    def edit_in_place(text: str) -> None:  # a read-only folder still lets a file change
        with open(ws / "ro" / "f", "r+b") as f:
            f.truncate(0)
            f.write(text.encode())

    first = json.loads(run("snapshot", "--json"))["id"]
    edit_in_place("v2\n")
    run("rewind", "--to", first)
    assert (ws / "ro" / "f").read_text() == "v1\n"
    assert stat.S_IMODE((ws / "ro").stat().st_mode) == 0o555
    run("--session", "s", "turn", "begin")
    run("--session", "s", "touch", "ro/f")
    edit_in_place("v3\n")
    run("--session", "s", "turn", "end")
    run("--session", "s", "undo")
    assert (ws / "ro" / "f").read_text() == "v1\n"
    assert stat.S_IMODE((ws / "ro").stat().st_mode) == 0o555
    (ws / "ro").chmod(0o755)  # so that tmp_path can be removed


# -- 15: a standing revert moves --------------------------------------------------------


def _two_turns(root: Path, ws: takeback.Workspace) -> takeback.Session:
    write(root, "a", "a0\n")
    write(root, "b", "b0\n")
    session = ws.session("s")
    with session.turn("one") as t1:
        for name, text in (("a", "a1\n"), ("n1", "made by turn 1\n")):
            t1.touch(name)
            write(root, name, text)
    with session.turn("two") as t2:
        for name, text in (("a", "a2\n"), ("b", "b2\n")):
            t2.touch(name)
            write(root, name, text)
    return session


def _files(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(root.iterdir())}


def test_a_standing_revert_moves_between_turns_and_unrevert_returns(
    ws_dir: Path, store_dir: Path
) -> None:
    root = ws_dir
    with takeback.Workspace(root, store=store_dir) as ws:
        session = _two_turns(root, ws)
        full = _files(root)
        session.revert(to_turn=0)
        assert _files(root) == {"a": "a0\n", "b": "b0\n"}
        session.revert(to_turn=1)
        assert _files(root) == {"a": "a1\n", "b": "b0\n", "n1": "made by turn 1\n"}
        session.revert(to_turn=2)
        assert _files(root) == full
        session.revert(to_turn=0)
        assert _files(root) == {"a": "a0\n", "b": "b0\n"}
        session.unrevert()
        assert _files(root) == full
        # Moved, then unreverted: back to the state before the first revert began.
        session.revert(to_turn=0)
        session.revert(to_turn=1)
        session.unrevert()
        assert _files(root) == full


# -- 16: empty folders a command made and removed ---------------------------------------


def test_folders_a_command_made_and_removed_are_undone_and_redone(
    ws_dir: Path, store_dir: Path
) -> None:
    root = ws_dir
    (root / "gone").mkdir()
    write(root, "a", "a\n")
    with takeback.Workspace(root, store=store_dir) as ws:
        session = ws.session("s")
        with session.turn("mkdir and rmdir") as turn:
            with turn.command("mkdir made && rmdir gone"):
                (root / "made").mkdir()
                (root / "gone").rmdir()
        got = {c.path: (c.status, c.kind) for c in turn.changes}
        assert got == {"made": ("created", "folder"), "gone": ("deleted", "folder")}
        session.undo()
        assert (root / "gone").is_dir() and not (root / "made").exists()
        session.redo()
        assert (root / "made").is_dir() and not (root / "gone").exists()


# -- 20: a folder kept because it holds an ignored file ---------------------------------


def test_a_rewind_blocked_by_a_kept_folder_says_so_in_its_plan_and_leaves_it(
    tb: CLI, ws_dir: Path
) -> None:
    # The folder holds an ignored file, so it stays and the file x cannot come back: the
    # check sees it (SPEC, "Take-backs do what they showed"), so the plan leaves x as the
    # rewind does, and nothing fails part way (it was an exit 1 found only while writing).
    root = ws_dir
    write(root, ".gitignore", "*.log\n")
    write(root, "x", "x was a file\n")
    first = turn_json(tb, "snapshot")["id"]
    (root / "x").unlink()
    write(root, "x/keep.log", "a person's ignored log\n")
    plan = tb("rewind", "--to", first, "--dry-run")
    assert re.search(r"left as is: x/? ", plan.stdout), plan.stdout
    proc = tb("rewind", "--to", first)
    out = proc.stdout + proc.stderr
    assert re.search(r"left as is: x/? ", out), out
    assert (root / "x" / "keep.log").read_text() == "a person's ignored log\n"


# -- 21: hard links ----------------------------------------------------------------------


def test_a_rewind_gives_each_hard_linked_name_its_own_recorded_bytes(
    ws_dir: Path, store_dir: Path
) -> None:
    """A rewind replaces each path's entry (a temporary file renamed over it), so a
    hard-linked pair is split, as ``git checkout`` splits one: the link is not kept, and
    a write to one name never lands in the other."""
    root = ws_dir
    write(root, "pair1", "shared v1\n")
    os.link(root / "pair1", root / "pair2")
    write(root, "a", "a's own bytes\n")
    write(root, "b", "b's own bytes\n")
    with takeback.Workspace(root, store=store_dir) as ws:
        first = ws.snapshot()
        write(root, "pair1", "shared v2, written through one name\n")  # in place: both
        (root / "b").unlink()
        os.link(root / "a", root / "b")  # b is now a second name of a
        write(root, "a", "a and b changed together\n")
        ws.rewind(first.id)
    assert (root / "pair1").read_text() == (root / "pair2").read_text() == "shared v1\n"
    assert (root / "a").read_text() == "a's own bytes\n"
    assert (root / "b").read_text() == "b's own bytes\n"
    assert (root / "a").stat().st_ino != (root / "b").stat().st_ino


def test_undo_of_a_write_through_one_hard_linked_name_loses_nothing(
    ws_dir: Path, store_dir: Path
) -> None:
    """The turn changed one name; undo puts that name back and leaves the other as it is
    on disk (it was never part of the turn). Its content is in the snapshot taken before
    the undo, so nothing is lost."""
    root = ws_dir
    write(root, "one", "v1\n")
    os.link(root / "one", root / "two")
    with takeback.Workspace(root, store=store_dir) as ws:
        session = ws.session("s")
        with session.turn("edit one") as turn:
            turn.touch("one")
            write(root, "one", "v2\n")  # in place: "two" reads v2 too
        assert [c.path for c in turn.changes] == ["one"]
        done = session.undo()
        assert (root / "one").read_text() == "v1\n"
        assert (root / "two").read_text() == "v2\n"
        assert done.pre is not None
        assert ws.show(done.pre, "two") == b"v2\n" == ws.show(done.pre, "one")
        ws.rewind(done.pre)
    assert (root / "one").read_text() == (root / "two").read_text() == "v2\n"


# == the contract suite =================================================================

P = "d/p"
V1 = b"p as the record has it first\n"
V2 = b"p as the agent left it\n"
PERSON = b"a person's bytes, kept nowhere else\n"
LIMIT = 1000

Op = Callable[[bool], Any]  # force -> the operation's result


def _base(root: Path) -> None:
    write(root, P, V1, 0o644)
    write(root, "d/q", "q1\n")
    write(root, "other", "o1\n")
    (root / "d").chmod(0o750)


def _agent_turn(root: Path, ws: takeback.Workspace, *, also_q: bool = False) -> takeback.Session:
    session = ws.session("s")
    with session.turn("agent") as turn:
        turn.touch(P)
        write(root, P, V2, 0o755)
        if also_q:
            turn.touch("d/q")
            write(root, "d/q", "q2\n")
    return session


def _rewind(root: Path, ws: takeback.Workspace, paths: list[str] | None) -> Op:
    first = ws.snapshot()
    write(root, P, V2, 0o755)
    write(root, "other", "o2\n")
    return lambda force: ws.rewind(first.id, paths=paths)


def setup_rewind(root: Path, ws: takeback.Workspace) -> Op:
    return _rewind(root, ws, None)


def setup_rewind_paths(root: Path, ws: takeback.Workspace) -> Op:
    return _rewind(root, ws, [P])


def setup_undo(root: Path, ws: takeback.Workspace) -> Op:
    session = _agent_turn(root, ws)
    return lambda force: session.undo(force=force)


def setup_undo_one_file(root: Path, ws: takeback.Workspace) -> Op:
    session = _agent_turn(root, ws, also_q=True)
    return lambda force: session.undo(file=P, force=force)


def setup_redo(root: Path, ws: takeback.Workspace) -> Op:
    session = _agent_turn(root, ws)
    session.undo()
    return lambda force: session.redo(force=force)


def setup_revert(root: Path, ws: takeback.Workspace) -> Op:
    session = _agent_turn(root, ws)
    return lambda force: session.revert(to_turn=0, force=force)


def setup_unrevert(root: Path, ws: takeback.Workspace) -> Op:
    session = _agent_turn(root, ws)
    session.revert(to_turn=0)
    return lambda force: session.unrevert(force=force)


def setup_session_undo_file(root: Path, ws: takeback.Workspace) -> Op:
    session = _agent_turn(root, ws, also_q=True)
    return lambda force: session.undo_file(P, force=force)


OPERATIONS = {
    "rewind": setup_rewind,
    "rewind-paths": setup_rewind_paths,
    "undo": setup_undo,
    "undo-file": setup_undo_one_file,
    "redo": setup_redo,
    "revert": setup_revert,
    "unrevert": setup_unrevert,
    "Session.undo_file": setup_session_undo_file,
}


@pytest.fixture(params=list(OPERATIONS))
def operation(
    request: pytest.FixtureRequest, ws_dir: Path, store_dir: Path
) -> Iterator[tuple[str, takeback.Workspace, Op]]:
    """A workspace where the operation will write ``P``, and the operation (not yet run)."""
    _base(ws_dir)
    with takeback.Workspace(ws_dir, store=store_dir, max_file_bytes=LIMIT) as ws:
        ws.session("s").start()
        yield request.param, ws, OPERATIONS[request.param](ws_dir, ws)


def test_contract_never_writes_through_a_symlink(
    operation: tuple[str, takeback.Workspace, Op], ws_dir: Path, tmp_path: Path
) -> None:
    name, _ws, op = operation
    outside = tmp_path / "outside"
    write(outside, "p", OUTSIDE)
    before = state(outside)
    shutil.rmtree(ws_dir / "d")
    (ws_dir / "d").symlink_to(outside, target_is_directory=True)
    if name == "rewind":
        # The whole tree goes back: the link is replaced by the recorded folder.
        op(True)
        assert not (ws_dir / "d").is_symlink()
        assert (ws_dir / P).read_bytes() == V1
    else:
        with pytest.raises(RestoreError) as err:
            op(True)
        assert P in err.value.failed
    assert state(outside) == before


def test_contract_never_destroys_an_ignored_file_in_the_way(
    operation: tuple[str, takeback.Workspace, Op], ws_dir: Path
) -> None:
    _name, _ws, op = operation
    write(ws_dir, ".gitignore", f"/{P}\n")
    write(ws_dir, P, PERSON)
    result = op(True)
    assert (ws_dir / P).read_bytes() == PERSON
    assert result.left[P] == "out of scope (ignored) and in the way"


def test_contract_never_overwrites_a_large_file_not_as_recorded(
    operation: tuple[str, takeback.Workspace, Op], ws_dir: Path
) -> None:
    _name, _ws, op = operation
    big = PERSON * (LIMIT // len(PERSON) + 2)
    write(ws_dir, P, big)
    result = op(True)
    assert (ws_dir / P).read_bytes() == big
    assert result.left[P] == "over the size limit, never kept"


def test_contract_a_snapshot_first_gives_back_exactly_the_state_before(
    operation: tuple[str, takeback.Workspace, Op], ws_dir: Path
) -> None:
    _name, ws, op = operation
    before = state(ws_dir)
    result = op(False)
    assert state(ws_dir) != before
    assert result.pre is not None
    ws.rewind(result.pre)
    assert state(ws_dir) == before
