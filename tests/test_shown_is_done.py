"""Take-backs do what they showed: each reported way a plan and its operation parted.

Each test here was a fault seen on the command line: the dry run planned one thing and the
operation did another, or left the record saying so. They run the real ``takeback``
command on real folders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from takeback import Workspace
from takeback.ops._engine import HOLDS_OUT_OF_SCOPE as HOLDS

from .conftest import CLI, files_state, write

#: What ``pytest`` leaves behind: a folder whose own ``.gitignore`` leaves out all it holds.
PYTEST_RUN = (
    "for i in 1 2 3 4 5; do echo changed$i > f$i.txt; done; "
    "mkdir -p .pytest_cache/v/cache; "
    "printf '# Created by pytest automatically.\\n*\\n' > .pytest_cache/.gitignore; "
    "echo '{}' > .pytest_cache/v/cache/nodeids"
)


def doc(proc_stdout: str) -> dict[str, Any]:
    out = json.loads(proc_stdout)
    assert isinstance(out, dict)
    return out


def test_an_ignored_cache_a_command_made_is_not_the_turns_and_the_plan_is_what_is_done(
    tb: CLI, ws_dir: Path
) -> None:
    for i in range(1, 6):
        write(ws_dir, f"f{i}.txt", f"{i}\n")
    tb("snapshot")
    tb("run", "--", "sh", "-c", PYTEST_RUN)
    changes = doc(tb("changes", "--json").stdout)["changes"]
    assert isinstance(changes, list)
    # The ignored output is not the turn's change.
    assert [c["path"] for c in changes] == [f"f{i}.txt" for i in range(1, 6)]
    before = files_state(ws_dir)
    plan = doc(tb("undo", "--dry-run", "--json").stdout)
    assert files_state(ws_dir) == before
    done = doc(tb("undo", "--json").stdout)
    for key in ("restored", "left", "actions", "not_restored"):
        assert plan[key] == done[key], key
    assert done["restored"] == [f"f{i}.txt" for i in range(1, 6)]
    assert (ws_dir / ".pytest_cache/v/cache/nodeids").exists()  # never touched
    assert (ws_dir / "f1.txt").read_text() == "1\n"


def test_a_folder_a_take_back_cannot_empty_is_left_in_the_plan_too(tb: CLI, ws_dir: Path) -> None:
    write(ws_dir, "keep.txt", "k\n")
    tb("snapshot")
    # The command makes build/ with a file in scope and one it ignores.
    tb(
        "run",
        "--",
        "sh",
        "-c",
        "mkdir build && echo a > build/a.txt && echo 'build/*.o' > .gitignore "
        "&& echo o > build/x.o",
    )
    plan = doc(tb("undo", "--dry-run", "--json").stdout)
    assert "build" in plan["left"] and "build/" not in plan["restored"]
    done = doc(tb("undo", "--json").stdout)
    for key in ("restored", "left", "actions"):
        assert plan[key] == done[key], key
    assert (ws_dir / "build/x.o").exists() and not (ws_dir / "build/a.txt").exists()
    # A rewind past the folder says the same of a folder that holds ignored files.
    write(ws_dir, ".gitignore", "build/*.o\n")
    rewind = doc(tb("rewind", "--to", "start", "--dry-run", "--json").stdout)
    assert "build" in json.dumps(rewind["left"])


def _status_is_clean_and_exact(ws: Workspace) -> None:
    """``status`` lists nothing, and the snapshot after equals a full scan's."""
    assert ws.status() == []
    latest = ws.log(limit=1)[0]
    assert latest.kind.startswith("after-"), latest.kind
    assert ws.snapshot().tree == latest.tree


def test_status_is_clean_after_every_take_back(ws_dir: Path, store_dir: Path) -> None:
    root = ws_dir
    write(root, "a.txt", "a0\n")
    write(root, "bin.dat", b"\0\1\2")
    write(root, "run.sh", "echo 0\n", 0o644)
    write(root, "big.bin", b"x" * 3000)
    write(root, ".gitignore", "*.log\n")
    (root / "gone").mkdir()
    (root / "link").symlink_to("a.txt")
    with Workspace(root, store=store_dir, max_file_bytes=2048) as ws:
        s = ws.session("agent")
        s.start()
        with s.turn(label="one") as t:
            with t.command("edit"):
                write(root, "a.txt", "a1\n")
                write(root, "bin.dat", b"\3\4")
                (root / "run.sh").chmod(0o755)
                (root / "gone").rmdir()
                (root / "link").unlink()
                (root / "link").symlink_to("bin.dat")
                write(root, "new/deep/n.txt", "n\n")
                (root / "empty").mkdir()
                write(root, "x.log", "ignored\n")
        with s.turn(label="two") as t:
            with t.command("edit"):
                write(root, "a.txt", "a2\n")
                write(root, "b.txt", "b\n")
        for op in (
            lambda: s.undo(),
            lambda: s.redo(),
            lambda: s.undo_file("a.txt"),
            lambda: s.redo(),
            lambda: s.revert(to_turn=0),
            lambda: s.unrevert(),
            lambda: ws.rewind("start", session="agent"),
        ):
            op()
            _status_is_clean_and_exact(ws)
    assert (root / "x.log").read_text() == "ignored\n"


def test_status_is_clean_after_an_undo_on_the_command_line(tb: CLI, ws_dir: Path) -> None:
    write(ws_dir, "f.txt", "0\n")
    tb("snapshot")
    tb("run", "--", "sh", "-c", "echo 1 > f.txt; mkdir -p d/e; echo x > d/e/g.txt")
    tb("undo")
    assert tb("status").stdout == ""
    tb("redo")
    assert tb("status").stdout == ""


def _hook(tb: CLI, ws_dir: Path, **p: Any) -> None:
    payload = {"session_id": "agent", "cwd": str(ws_dir), **p}
    proc = tb("hook", "claude-code", input=json.dumps(payload).encode())
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_a_persons_edit_while_a_denied_command_stayed_open_is_a_conflict(
    tb: CLI, ws_dir: Path
) -> None:
    write(ws_dir, "notes.md", "mine\n")
    write(ws_dir, "app.py", "v0\n")
    _hook(tb, ws_dir, hook_event_name="UserPromptSubmit", prompt="go")
    _hook(
        tb,
        ws_dir,
        hook_event_name="PreToolUse",
        tool_name="Edit",
        tool_use_id="t1",
        tool_input={"file_path": str(ws_dir / "app.py")},
    )
    write(ws_dir, "app.py", "v1\n")
    # A Bash call the person denied: its PreToolUse came, its end never does.
    _hook(
        tb,
        ws_dir,
        hook_event_name="PreToolUse",
        tool_name="Bash",
        tool_use_id="t2",
        tool_input={"command": "rm -rf build"},
    )
    write(ws_dir, "notes.md", "a person's edit, meanwhile\n")
    _hook(tb, ws_dir, hook_event_name="Stop")
    changes = doc(tb("changes", "--json").stdout)["changes"]
    assert {c["path"]: c["unconfirmed"] for c in changes} == {"app.py": False, "notes.md": True}
    assert "unconfirmed" in tb("changes").stdout
    before = files_state(ws_dir)
    plan = doc(tb("undo", "--dry-run", "--json", check=3).stdout)
    assert plan["conflicts"] == ["notes.md"] and "never seen" in plan["why"]["notes.md"]
    refused = tb("undo", check=3)
    assert "notes.md changed in a step whose end was never seen" in refused.stderr
    assert files_state(ws_dir) == before  # nothing written
    done = doc(tb("undo", "--force", "--json").stdout)
    assert done["conflicts"] == ["notes.md"] and (ws_dir / "app.py").read_text() == "v0\n"


def test_a_plan_names_a_path_whose_kind_changes_as_the_operation_does(
    ws_dir: Path, store_dir: Path
) -> None:
    """A folder that becomes a file again is named as the file (found by the model test)."""
    write(ws_dir, "a.txt", "a\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        s.start()
        with s.turn("a.txt becomes a folder") as t, t.command("edit"):
            (ws_dir / "a.txt").unlink()
            write(ws_dir, "a.txt/inner.txt", "i\n")
        plan = s.undo(dry_run=True)
        done = s.undo(plan=plan)
        assert plan.restored == done.restored and "a.txt" in done.restored
        assert (ws_dir / "a.txt").read_text() == "a\n"


def test_a_rewind_dry_run_says_what_it_leaves_as_the_rewind_does(
    ws_dir: Path, store_dir: Path
) -> None:
    write(ws_dir, "a.txt", "a\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        start = ws.snapshot(session="agent")
        write(ws_dir, "tool/.gitignore", "*\n")
        write(ws_dir, "tool/v/data", "cached\n")
        ws.snapshot(session="agent")
        plan = ws.rewind(start.id, session="agent", dry_run=True)
        done = ws.rewind(start.id, session="agent", plan=plan)
        assert plan.left == done.left == {"tool": HOLDS} and plan.to_json()["left"] == plan.left
        assert (ws_dir / "tool/v/data").exists()


def test_a_plan_that_showed_nothing_to_do_is_confirmed_as_nothing(
    ws_dir: Path, store_dir: Path
) -> None:
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        s.start()
        plan = s.redo(dry_run=True)
        assert plan.nothing and s.redo(plan=plan).nothing
