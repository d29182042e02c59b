"""Turns end to end through the real command line (each call a fresh process).

What a hook or a person types: ``turn begin``, ``touch``, ``run``, ``turn end``, then
``changes``, ``undo``, ``redo``, ``revert --to-turn N`` and ``unrevert``. Every call is a
new process, so everything these tests see has survived a restart.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import CLI, SRC, write

PY = sys.executable


def state(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every file and link under ``root``: (kind, bytes or target, permission bits)."""
    out: dict[str, tuple[str, bytes, int]] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.fsencode(os.readlink(full)), 0)
            else:
                out[rel] = ("f", Path(full).read_bytes(), stat.S_IMODE(st.st_mode))
    return out


def fingerprint(root: Path) -> dict[str, tuple[int, int, int]]:
    """(inode, mtime_ns, ctime_ns) of every file: any write at all changes it."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (
                st.st_ino,
                st.st_mtime_ns,
                st.st_ctime_ns,
            )
    return out


def as_json(proc: Any) -> dict[str, Any]:
    doc = json.loads(proc.stdout)
    assert doc["schema"] == 1
    return doc  # type: ignore[no-any-return]


REWRITE = (
    "import pathlib\n"
    "for p in sorted(pathlib.Path('pkg').glob('*.py')):\n"
    "    p.write_text(p.read_text().replace(' = ', '=') + '# formatted\\n')\n"
    "pathlib.Path('old.txt').unlink()\n"
)


def setup_files(ws: Path) -> None:
    write(ws, "src/app.ts", "let a = 1;\nlet b = 2;\n")
    write(ws, "README.md", "# demo\n")
    write(ws, "old.txt", "to be deleted\n")
    write(ws, "logo.bin", b"\x89PNG\0\x01\x02")
    write(ws, "run.sh", "#!/bin/sh\necho hi\n", 0o644)
    for i in range(10):
        write(ws, f"pkg/m{i}.py", f"x = {i}\n")


def three_turns(tb: CLI, ws: Path) -> list[dict[str, tuple[str, bytes, int]]]:
    """Three turns as a hook would record them; returns the state after each."""
    states = [state(ws)]
    tb("turn", "begin", "-m", "edit the app")
    tb("touch", "src/app.ts", "--tool-call-id", "call_1")
    write(ws, "src/app.ts", "let a = 10;\nlet b = 2;\nlet c = 3;\n")
    tb("touch", "src/new.ts", "--tool-call-id", "call_2")
    write(ws, "src/new.ts", "export {};\n")
    assert tb("turn", "end").stdout.strip() == "turn 1 ended: 2 file(s) changed"
    states.append(state(ws))

    tb("turn", "begin", "-m", "format")
    tb("run", "--", PY, "-c", REWRITE)
    tb("turn", "end")
    states.append(state(ws))

    tb("turn", "begin", "-m", "binary and chmod")
    tb("touch", "logo.bin", "run.sh")
    write(ws, "logo.bin", b"\x89PNG\0\x07\x08\x09")
    (ws / "run.sh").chmod(0o755)
    tb("turn", "end")
    states.append(state(ws))
    return states


def test_three_turns_undo_redo(tb: CLI, ws_dir: Path) -> None:
    setup_files(ws_dir)
    states = three_turns(tb, ws_dir)

    out = tb("changes", "--turn", "1").stdout.splitlines()
    assert out[0] == "2 files changed +3 -1"
    assert [line.split() for line in out[1:]] == [
        ["modified", "+2", "-1", "src/app.ts"],
        ["created", "+1", "-0", "src/new.ts"],
    ]
    out = tb("changes", "--turn", "2").stdout.splitlines()
    assert out[0] == "11 files changed +20 -11"
    assert out[1].split() == ["deleted", "+0", "-1", "old.txt"]
    out = tb("changes").stdout.splitlines()  # the last turn
    assert out[0] == "2 files changed +0 -0"
    assert [line.split()[0] for line in out[1:]] == ["modified", "modified"]

    doc = as_json(tb("changes", "--turn", "3", "--json"))
    assert doc["turn"] == 3 and doc["state"] == "done" and doc["files"] == 2
    by = {c["path"]: c for c in doc["changes"]}
    assert set(by) == {"logo.bin", "run.sh"}
    assert by["run.sh"]["status"] == "modified" and by["run.sh"]["undoable"] is True
    assert len(by["logo.bin"]["sha256"]) == 64

    # A person's edit to a file no turn changed, between turns: undo leaves it alone.
    write(ws_dir, "README.md", "# demo, edited by a person\n")
    mine = state(ws_dir)["README.md"]

    proc = tb("undo")
    assert proc.stdout.splitlines()[0] == "Undid turn 3 of session 'default'. Files restored: 2."
    assert state(ws_dir) == {**states[2], "README.md": mine}
    proc = tb("undo")
    assert proc.stdout.splitlines()[0] == "Undid turn 2 of session 'default'. Files restored: 11."
    assert state(ws_dir) == {**states[1], "README.md": mine}

    # A person's edit to a file the turn changed: undo refuses and writes nothing.
    write(ws_dir, "src/app.ts", "let a = 99; // a person\n")
    before, prints = state(ws_dir), fingerprint(ws_dir)
    proc = tb("undo", check=3)
    assert "src/app.ts changed after turn 1" in proc.stderr
    assert "src/new.ts" not in proc.stderr
    assert state(ws_dir) == before and fingerprint(ws_dir) == prints
    doc = as_json(tb("undo", "--json", check=3))
    assert doc["exit_code"] == 3 and doc["conflicts"] == ["src/app.ts"]
    assert state(ws_dir) == before and fingerprint(ws_dir) == prints

    proc = tb("undo", "--force")
    assert proc.stdout.splitlines()[0] == "Undid turn 1 of session 'default'. Files restored: 2."
    assert state(ws_dir) == {**states[0], "README.md": mine}
    assert tb("undo").stdout.strip() == "Nothing to undo."
    assert as_json(tb("changes", "--json"))["state"] == "undone"

    for n in (1, 2, 3):
        proc = tb("redo")
        assert proc.stdout.splitlines()[0].startswith(
            f"Redid turn {n} of session 'default'. Files restored:"
        )
        assert state(ws_dir) == {**states[n], "README.md": mine}
    assert tb("redo").stdout.strip() == "Nothing to redo."


def test_forced_undo_keeps_the_overwritten_edit_in_its_snapshot(tb: CLI, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "a0\n")
    tb("turn", "begin")
    tb("touch", "a.txt")
    write(ws_dir, "a.txt", "a1\n")
    tb("turn", "end")
    write(ws_dir, "a.txt", "a person\n")
    doc = as_json(tb("undo", "--force", "--json"))
    assert doc["op"] == "undo" and doc["turns"] == [1]
    assert doc["restored"] == ["a.txt"] and doc["conflicts"] == ["a.txt"]
    assert (ws_dir / "a.txt").read_text() == "a0\n"
    assert tb("show", f"{doc['pre']}:a.txt").stdout == "a person\n"
    tb("rewind", "--to", doc["pre"][:12])
    assert (ws_dir / "a.txt").read_text() == "a person\n"


def test_revert_and_unrevert_across_processes(tb: CLI, ws_dir: Path) -> None:
    setup_files(ws_dir)
    states = three_turns(tb, ws_dir)
    write(ws_dir, "notes.txt", "a person's notes\n")
    mine = state(ws_dir)["notes.txt"]

    proc = tb("revert", "--to-turn", "1")
    assert (
        proc.stdout.splitlines()[0]
        == "Reverted turns 2, 3 of session 'default'. Files restored: 13."
    )
    assert state(ws_dir) == {**states[1], "notes.txt": mine}
    assert tb("redo").stdout.strip() == "Nothing to redo."

    doc = as_json(tb("unrevert", "--json"))
    assert doc["op"] == "unrevert" and doc["turns"] == [2, 3] and len(doc["restored"]) == 13
    assert state(ws_dir) == {**states[3], "notes.txt": mine}
    assert tb("unrevert").stdout.strip() == "Nothing to unrevert."

    # A conflict refuses the revert: exit 3, nothing written.
    write(ws_dir, "pkg/m0.py", "x = 'a person'\n")
    prints = fingerprint(ws_dir)
    proc = tb("revert", "--to-turn", "0", check=3)
    assert "pkg/m0.py changed after turn 2" in proc.stderr
    assert fingerprint(ws_dir) == prints
    write(ws_dir, "pkg/m0.py", states[3]["pkg/m0.py"][1])

    assert tb("revert", "--to-turn", "0").stdout.startswith(
        "Reverted turns 1, 2, 3 of session 'default'."
    )
    assert state(ws_dir) == {**states[0], "notes.txt": mine}
    # A new turn makes the revert final.
    tb("turn", "begin", "-m", "four")
    tb("turn", "end")
    assert tb("unrevert").stdout.strip() == "Nothing to unrevert."
    assert state(ws_dir) == {**states[0], "notes.txt": mine}

    tb("revert", "--to-turn", "9", check=2)


def test_touch_outside_the_root_is_refused(tb: CLI, ws_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("x\n")
    write(ws_dir, "a.txt", "a\n")
    proc = tb("touch", "a.txt", "../outside.txt", check=2)
    assert "outside" in proc.stderr
    # Refused before anything was written: not even a turn was opened.
    assert tb("turn", "end").stdout.strip() == "no open turn"
    tb("touch", str(tmp_path / "outside.txt"), check=2)


@pytest.mark.quick
def test_json_of_turn_begin_touch_and_end(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    write(ws_dir, "a.txt", "a\n")
    assert as_json(tb("turn", "begin", "-m", "x", "--json"))["turn"] == 1
    doc = as_json(tb("touch", "a.txt", "b.txt", "--tool-call-id", "toolu_1", "--json"))
    assert doc["turn"] == 1 and doc["kept"] == ["a.txt", "b.txt"]
    assert as_json(tb("touch", "a.txt", "--json"))["kept"] == []
    write(ws_dir, "a.txt", "a\nmore\n")
    write(ws_dir, "b.txt", "b\n")
    doc = as_json(tb("turn", "end", "--json"))
    assert doc["turn"] == 1
    assert [(c["path"], c["status"], c["added"]) for c in doc["changes"]] == [
        ("a.txt", "modified", 1),
        ("b.txt", "created", 1),
    ]
    events = [json.loads(line) for line in (store_dir / "events.jsonl").read_text().splitlines()]
    changed = {e["path"]: e for e in events if e["event"] == "file.changed"}
    assert changed["b.txt"]["change"] == "created"
    assert changed["b.txt"]["tool_call_id"] == "toolu_1"
    # a.txt was touched again without a call id: which call changed it is unknown.
    assert changed["a.txt"]["tool_call_id"] is None
    assert any(e["event"] == "snapshot.taken" for e in events)

    doc = as_json(tb("undo", "--json"))
    assert doc == {
        "schema": 1,
        "op": "undo",
        "nothing": False,
        "turns": [1],
        "pre": doc["pre"],
        "restored": ["a.txt", "b.txt"],
        "not_restored": [],
        "conflicts": [],
        "left": {},
        "ref": None,
        "actions": {"a.txt": "M", "b.txt": "A"},
        "effects": {"a.txt": "restore", "b.txt": "remove"},
        "session": "default",
        "dry_run": False,
        "why": {},
        "merged": [],
        "markers": {},
        "preview": "",
        "regions": {},
        "token": doc["token"],  # the plan it did (what --plan would have named)
        "reason": None,  # only when there was nothing to write
    }
    assert doc["token"].startswith("p1.")
    doc = as_json(tb("redo", "--json"))
    assert doc["op"] == "redo" and doc["restored"] == ["a.txt", "b.txt"]
    assert as_json(tb("redo", "--json"))["nothing"] is True
    assert as_json(tb("revert", "--to-turn", "1", "--json"))["nothing"] is True


def test_undo_one_file_from_a_subfolder(tb: CLI, ws_dir: Path) -> None:
    write(ws_dir, "sub/x.txt", "x0\n")
    write(ws_dir, "y.txt", "y0\n")
    tb("turn", "begin")
    tb("touch", "sub/x.txt", "y.txt")
    write(ws_dir, "sub/x.txt", "x1\n")
    write(ws_dir, "y.txt", "y1\n")
    tb("turn", "end")
    # --file is taken from the current folder, like any path on the command line.
    proc = tb("undo", "--root", str(ws_dir), "--file", "x.txt", cwd=ws_dir / "sub")
    assert (
        proc.stdout.splitlines()[0]
        == "Put back as before turn:1 in session 'default'. Files restored: 1."
    )
    assert (ws_dir / "sub/x.txt").read_text() == "x0\n"
    assert (ws_dir / "y.txt").read_text() == "y1\n"
    tb("undo", "--file", "nope.txt", check=2)
    tb("undo", "--turn", "4", check=2)
    assert tb("undo", "--turn", "1").stdout.startswith(
        "Undid turn 1 of session 'default'. Files restored: 1."
    )
    assert (ws_dir / "y.txt").read_text() == "y0\n"
    tb("undo", "--turn", "1", check=2)  # already undone


def test_undo_ends_an_open_turn_first(tb: CLI, ws_dir: Path) -> None:
    write(ws_dir, "a.txt", "a0\n")
    tb("turn", "begin", "-m", "interrupted")
    tb("touch", "a.txt")
    write(ws_dir, "a.txt", "a1\n")
    # The agent was stopped before its Stop hook ran: the turn is still open.
    assert tb("undo").stdout.startswith("Undid turn 1 of session 'default'. Files restored: 1.")
    assert (ws_dir / "a.txt").read_text() == "a0\n"
    assert tb("turn", "end").stdout.strip() == "no open turn"


def test_run_inside_a_turn_joins_it(tb: CLI, ws_dir: Path) -> None:
    tb("turn", "begin")
    tb("run", "--", PY, "-c", "open('made.txt', 'w').write('m\\n')")
    tb("touch", "made.txt")  # a file tool after the command: the command's state wins
    write(ws_dir, "made.txt", "m2\n")
    tb("turn", "end")
    out = tb("changes").stdout.splitlines()
    assert out[0] == "1 file changed +1 -0"
    tb("undo")
    assert not (ws_dir / "made.txt").exists()


def test_changes_and_undo_errors(tb: CLI, ws_dir: Path) -> None:
    tb("changes", check=2)  # no store
    assert tb("undo", check=2).stderr
    tb("turn", "begin")
    tb("changes", check=2)  # no ended turn yet
    tb("turn", "end")
    assert tb("changes").stdout.strip() == "0 files changed +0 -0"
    tb("changes", "--turn", "7", check=2)


@pytest.mark.parametrize("limit", ["40"])
def test_large_file_is_listed_as_not_undoable(tb: CLI, ws_dir: Path, limit: str) -> None:
    write(ws_dir, "big.dat", b"a" * 100)
    tb("--max-file-bytes", limit, "turn", "begin")
    tb("--max-file-bytes", limit, "touch", "big.dat")
    write(ws_dir, "big.dat", b"b" * 100 + b"\n")
    tb("--max-file-bytes", limit, "turn", "end")
    out = tb("--max-file-bytes", limit, "changes").stdout.splitlines()
    assert out[0] == "1 file changed +0 -0"
    assert "cannot be undone" in out[1]
    proc = tb("--max-file-bytes", limit, "undo")
    assert "not restored" in proc.stdout and "big.dat" in proc.stdout
    assert (ws_dir / "big.dat").read_bytes() == b"b" * 100 + b"\n"


def test_two_undos_at_once_take_back_two_turns(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    write(ws_dir, "a.txt", "0\n")
    for n in (1, 2, 3):
        tb("turn", "begin")
        tb("touch", "a.txt", f"f{n}.txt")
        write(ws_dir, "a.txt", f"{n}\n")
        write(ws_dir, f"f{n}.txt", f"{n}\n")
        tb("turn", "end")
    env = dict(os.environ, TAKEBACK_STORE=str(store_dir), PYTHONPATH=SRC)
    procs = [
        subprocess.Popen(
            [PY, "-m", "takeback", "undo"],
            cwd=ws_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    # Each took back its own turn: the choice of turn is made under the store's lock.
    assert sorted(out.splitlines()[0] for out, _err in outs) == [
        "Undid turn 2 of session 'default'. Files restored: 2.",
        "Undid turn 3 of session 'default'. Files restored: 2.",
    ]
    assert (ws_dir / "a.txt").read_text() == "1\n"
    assert sorted(p.name for p in ws_dir.iterdir()) == ["a.txt", "f1.txt"]


def test_redo_that_fails_part_way_exits_1(tb: CLI, ws_dir: Path, tmp_path: Path) -> None:
    write(ws_dir, "a.txt", "a0\n")
    tb("turn", "begin")
    tb("touch", "a.txt", "d/x.txt")
    write(ws_dir, "a.txt", "a1\n")
    write(ws_dir, "d/x.txt", "x1\n")
    tb("turn", "end")
    tb("undo")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, ws_dir / "d")  # never written through
    proc = tb("redo", check=1)
    assert "restored: a.txt" in proc.stderr and "not restored: d/x.txt" in proc.stderr
    assert "takeback rewind --to " in proc.stderr
    assert list(elsewhere.iterdir()) == []
    assert (ws_dir / "a.txt").read_text() == "a1\n"


@pytest.mark.quick
def test_run_then_undo_takes_the_command_back(tb: CLI, ws_dir: Path) -> None:
    write(ws_dir, "app.py", "x = 1\n")
    tb("snapshot")
    tb("run", "--", "sh", "-c", "printf 'x = 2\\n' > app.py && mkdir gen && echo g > gen/out.txt")
    changes = as_json(tb("changes", "--json"))
    assert changes["label"].startswith("sh -c ") and changes["state"] == "done"
    assert {c["path"]: c["status"] for c in changes["changes"]} == {
        "app.py": "modified",
        "gen": "created",
        "gen/out.txt": "created",
    }
    # app.py and gen/out.txt, and the folder gen/ (counted as a folder, not a file)
    assert tb("undo").stdout.startswith(
        "Undid turn 1 of session 'default'. Files restored: 2. Folders: 1."
    )
    assert (ws_dir / "app.py").read_text() == "x = 1\n" and not (ws_dir / "gen").exists()
