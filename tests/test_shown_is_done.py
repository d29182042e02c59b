"""Take-backs do what they showed: each reported way a plan and its operation parted.

Each test here was a fault seen on the command line: the dry run planned one thing and the
operation did another, or left the record saying so. They run the real ``takeback``
command on real folders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
