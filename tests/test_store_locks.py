"""A process that opens the same store twice keeps SQLite's locks on it.

POSIX record locks belong to the process and file: closing any descriptor of a file
drops every lock the process holds on it, including SQLite's. Checking a database's
header with a plain ``open()`` while a connection of the same process is open released
that connection's locks, and the next writer in another process then checkpointed and
removed the log under it ("disk I/O error").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from takeback import Workspace


def test_a_second_open_of_the_store_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    store = tmp_path / "store"
    (root / "a.txt").write_text("one\n")
    first = Workspace(root, store=store)
    try:
        first.snapshot()
        assert len(first.log()) == 1
        second = Workspace(root, store=store)
        assert len(second.log()) == 1  # opening it checks the databases' files again
        second.close()
        # Another process writes and closes: believing it is the last one, it would
        # checkpoint and delete the log that the first connection still reads from.
        code = (
            "import sys; from takeback import Workspace\n"
            "w = Workspace(sys.argv[1], store=sys.argv[2])\n"
            "open(sys.argv[1] + '/a.txt', 'w').write('two\\n')\n"
            "w.snapshot(); w.close()\n"
        )
        subprocess.run([sys.executable, "-c", code, str(root), str(store)], check=True)
        assert len(first.log()) == 2  # the other process's snapshot, seen
        (root / "a.txt").write_text("three\n")
        first.snapshot()
        assert len(first.log()) == 3
        # ...and another process sees what the first wrote after that.
        count = (
            "import sys; from takeback import Workspace\n"
            "w = Workspace(sys.argv[1], store=sys.argv[2]); print(len(w.log())); w.close()\n"
        )
        seen = subprocess.run(
            [sys.executable, "-c", count, str(root), str(store)],
            check=True,
            capture_output=True,
            text=True,
        )
        assert seen.stdout.strip() == "3"
    finally:
        first.close()
    again = Workspace(root, store=store)
    try:
        assert len(again.log()) == 3  # what the first wrote after the other is kept
    finally:
        again.close()
