"""Taking back part of a turn: hunks listed with stable ids, some taken back by merge."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from takeback import Workspace

from .conftest import CLI, SRC

LINES = "".join(f"{i}\n" for i in range(1, 41))
EDITED = (
    LINES.replace("5\n", "five\n", 1)
    .replace("\n20\n", "\ntwenty\n")
    .replace("35\n", "thirty-five\n")
)


def _turn(tb: CLI, ws: Path) -> None:
    (ws / "a.txt").write_text(LINES)
    (ws / "notes.md").write_text("keep\n")
    tb("snapshot")
    script = f"open('a.txt', 'w').write({EDITED!r}); open('new.txt', 'w').write('made\\n')"
    tb("run", "-m", "edit three places", "--", sys.executable, "-c", script)


def test_hunk_ids_are_stable_and_in_file_order(tb: CLI, ws_dir: Path) -> None:
    _turn(tb, ws_dir)
    doc = json.loads(tb("changes", "--hunks", "--json").stdout)
    ids = [h["id"] for h in doc["hunks"]]
    assert ids == ["a.txt#1", "a.txt#2", "a.txt#3", "new.txt#1"]
    first = doc["hunks"][0]
    assert (first["old_start"], first["new_start"], first["added"], first["removed"]) == (
        2,
        2,
        1,
        1,
    )
    assert "-5\n+five\n" in first["patch"]
    (ws_dir / "a.txt").write_text(EDITED + "a person's line\n")  # the turn's hunks stay
    assert json.loads(tb("changes", "--hunks", "--json").stdout) == doc
    text = tb("changes", "--hunks").stdout
    assert "a.txt#2  +1 -1" in text and "@@ -17,7 +17,7 @@" in text


def test_one_hunk_of_three_goes_back_and_everything_else_stays(tb: CLI, ws_dir: Path) -> None:
    _turn(tb, ws_dir)
    later = EDITED.replace("30\n", "thirty (a person's)\n")
    (ws_dir / "a.txt").write_text(later)
    dry = tb("undo", "--hunk", "a.txt#2", "--dry-run")
    assert "Would take back hunks of turn 1" in dry.stdout
    assert (ws_dir / "a.txt").read_text() == later  # a dry run writes nothing
    tb("undo", "--hunk", "a.txt#2")
    assert (ws_dir / "a.txt").read_text() == later.replace("twenty\n", "20\n")
    assert (ws_dir / "new.txt").read_text() == "made\n"
    assert tb("status", "--json").returncode == 0
    tb("redo")
    assert (ws_dir / "a.txt").read_text() == later


def test_a_hunk_whose_lines_changed_since_is_a_conflict(tb: CLI, ws_dir: Path) -> None:
    _turn(tb, ws_dir)
    mine = EDITED.replace("twenty\n", "twenty, said a person\n")
    (ws_dir / "a.txt").write_text(mine)
    got = tb("undo", "--hunk", "a.txt#2", check=3)
    assert "a.txt" in got.stderr and "nothing was written" in got.stderr
    assert (ws_dir / "a.txt").read_text() == mine
    tb("undo", "--hunk", "a.txt#2", "--merge=markers", check=3)  # markers written, as undo does
    assert "<<<<<<<" in (ws_dir / "a.txt").read_text()


def test_all_of_a_made_files_hunks_remove_it_and_bad_ids_are_refused(tb: CLI, ws_dir: Path) -> None:
    _turn(tb, ws_dir)
    assert tb("undo", "--hunk", "a.txt#9", check=2).stderr.count("\n") == 1
    assert tb("undo", "--hunk", "nope.txt#1", check=2).stderr.count("\n") == 1
    tb("undo", "--hunk", "new.txt#1", "--hunk", "a.txt#1")
    assert not (ws_dir / "new.txt").exists()
    assert (ws_dir / "a.txt").read_text() == EDITED.replace("five\n", "5\n", 1)


def test_the_library(ws_dir: Path, store_dir: Path) -> None:
    (ws_dir / "m.py").write_text("".join(f"line {i}\n" for i in range(30)))
    ws = Workspace(ws_dir, store=store_dir)
    try:
        s = ws.session("agent")
        with s.turn(label="refactor") as turn, turn.command("edit"):
            text = (ws_dir / "m.py").read_text()
            (ws_dir / "m.py").write_text(
                text.replace("line 2\n", "LINE 2\n").replace("line 25\n", "LINE 25\n")
            )
        hunks = s.hunks()
        assert [h.id for h in hunks] == ["m.py#1", "m.py#2"]
        result = s.undo(hunks=["m.py#1"])
        assert result.restored == ["m.py"]
        assert "line 2\n" in (ws_dir / "m.py").read_text()
        assert "LINE 25\n" in (ws_dir / "m.py").read_text()
    finally:
        ws.close()


def _patch_mode(tb: CLI, answers: bytes) -> tuple[int, bytes]:
    env = dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)
    parent, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeback", "undo", "-p"],
        cwd=tb.root,
        env=env,
        stdin=child,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    out = b""
    sent = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([parent], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(parent, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not sent and b"[y,n,q,?]" in out:
                os.write(parent, answers)
                sent = True
        elif proc.poll() is not None:
            break
    code = proc.wait(timeout=30)
    os.close(parent)
    return code, out


def test_patch_mode_asks_hunk_by_hunk_on_a_terminal(tb: CLI, ws_dir: Path) -> None:
    _turn(tb, ws_dir)
    code, out = _patch_mode(tb, b"?\nn\ny\nq\n")
    assert code == 0, out
    assert b"y - take back this hunk" in out
    assert (ws_dir / "a.txt").read_text() == EDITED.replace("twenty\n", "20\n")
    assert (ws_dir / "new.txt").exists()
    no_tty = tb("undo", "-p", check=2)
    assert "use --hunk" in no_tty.stderr


def test_the_pages_hunk_control_writes_what_the_command_line_writes(
    tmp_path: Path,
) -> None:
    """Twin workspaces, one hunk taken back by the page's control and by undo --hunk."""
    from takeback.integrations._ui_api import UiApi, UiConfig

    from ._ui import request, serve_ui

    results = {}
    for how in ("page", "cli"):
        ws = tmp_path / how / "ws"
        ws.mkdir(parents=True)
        tb = CLI(ws, tmp_path / how / "store")
        _turn(tb, ws)
        later = EDITED.replace("30\n", "thirty (a person's)\n")
        (ws / "a.txt").write_text(later)
        if how == "cli":
            tb("undo", "--hunk", "a.txt#3")
        else:
            api = UiApi(UiConfig(str(ws), str(tb.store), None))
            planned = api.take_back("undo-hunk", {"turn": 1, "hunk": "a.txt#3"}, dry_run=True)
            assert planned["actions"] == {"a.txt": "M"} and (ws / "a.txt").read_text() == later
            with serve_ui(ws, tb.store) as srv:
                headers = {"X-Takeback-Token": srv.token, "Content-Type": "application/json"}
                status, body = request(
                    srv.port,
                    "/api/apply",
                    method="POST",
                    headers=headers,
                    body={
                        "op": "undo-hunk",
                        "turn": 1,
                        "hunk": "a.txt#3",
                        "plan": planned["token"],
                    },
                )
                assert status == 200, body
        results[how] = (ws / "a.txt").read_bytes(), (ws / "new.txt").read_bytes()
    assert results["page"] == results["cli"]
    assert b"35\n" in results["cli"][0] and b"thirty (a person's)" in results["cli"][0]
