"""The command line at its edges: numbers too large for the store, names that would break
the one-line-per-path output, a --store that is a file, a store that cannot be written,
and output cut short by a closed pipe.

Every refusal is exit 2 with one line on stderr; nothing ends in a traceback.
"""

from __future__ import annotations

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


@pytest.mark.parametrize("args", [
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
])
def test_a_number_too_large_for_the_store_is_a_refusal(two_turns: CLI, ws_dir: Path,
                                                      args: list[str]) -> None:
    _one_line_refusal(two_turns, *args)
    assert (ws_dir / "a.txt").read_text() == "a3\n"


def test_the_library_reads_a_number_too_large_as_no_such_step(two_turns: CLI,
                                                             ws_dir: Path) -> None:
    from takeback import Workspace
    from takeback.errors import RefError

    with Workspace(ws_dir, store=two_turns.store) as ws:
        for ref in (HUGE, f"turn:{HUGE}"):
            with pytest.raises(RefError):
                ws.resolve(ref, session=ws.active_session())
        assert len(ws.log(limit=int(HUGE))) == len(ws.log())
