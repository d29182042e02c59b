"""Plans in words: the letters say what changed since, a header what will happen to them.

Seen on the command line: ``undo --dry-run`` after ``run -- rm -r examples/naval``
printed ``D examples/naval/README`` for files it would *recreate*, and a person checking
the plan read it as "will delete". The letters keep the rewind's meaning; every plan now
groups its lines under ``would restore:``, ``would remove:`` and ``would recreate:``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .conftest import CLI


def _naval(ws_dir: Path) -> None:
    (ws_dir / "examples" / "naval").mkdir(parents=True)
    (ws_dir / "examples" / "naval" / "README").write_text("ships\n")
    (ws_dir / "examples" / "naval" / "fleet.py").write_text("FLEET = []\n")
    (ws_dir / "app.py").write_text("v1\n")


def test_undo_dry_run_after_rm_says_it_would_recreate(tb: CLI, ws_dir: Path) -> None:
    _naval(ws_dir)
    tb("snapshot")
    tb("run", "--", "rm", "-r", "examples/naval")
    out = tb("undo", "--dry-run").stdout.splitlines()
    # Two files and the folder that held them: a folder is not counted as a file.
    assert (
        out[0] == "Would undo turn 1 of session 'default'. Files it would restore: 2. Folders: 1."
    )
    assert out[1:5] == [
        "would recreate:",
        "  D examples/naval/",
        "  D examples/naval/README",
        "  D examples/naval/fleet.py",
    ]
    assert not any(line.startswith("would remove") for line in out)
    doc = json.loads(tb("undo", "--dry-run", "--json").stdout)
    assert doc["actions"]["examples/naval/README"] == "D"  # the old key, as it was
    assert doc["effects"] == {
        "examples/naval": "recreate",
        "examples/naval/README": "recreate",
        "examples/naval/fleet.py": "recreate",
    }


def test_each_group_is_under_its_own_header(tb: CLI, ws_dir: Path) -> None:
    _naval(ws_dir)
    tb("snapshot")
    code = (
        "import os, shutil; shutil.rmtree('examples/naval'); "
        "open('app.py', 'w').write('v2\\n'); open('new.txt', 'w').write('n\\n')"
    )
    tb("run", "--", sys.executable, "-c", code)
    out = tb("undo", "--dry-run").stdout.splitlines()
    assert out[1:9] == [
        "would restore:",
        "  M app.py",
        "would remove:",
        "  A new.txt",
        "would recreate:",
        "  D examples/naval/",
        "  D examples/naval/README",
        "  D examples/naval/fleet.py",
    ]
    # A rewind's plan too, and its --json names each entry's effect beside its letter.
    out = tb("rewind", "--to", "start", "--dry-run").stdout.splitlines()
    assert out[:8] == [
        "would restore:",
        "M app.py",
        "would remove:",
        "A new.txt",
        "would recreate:",
        "D examples/naval/",
        "D examples/naval/README",
        "D examples/naval/fleet.py",
    ]
    plan = json.loads(tb("rewind", "--to", "start", "--dry-run", "--json").stdout)["plan"]
    assert {"action": "A", "path": "new.txt", "effect": "remove"} in plan
    assert {"action": "D", "path": "examples/naval/", "effect": "recreate"} in plan
    # The rewind done says what it did, under the same words.
    done = tb("rewind", "--to", "start").stdout.splitlines()
    assert done[:4] == ["restored:", "M app.py", "removed:", "A new.txt"]
    assert "recreated:" in done and (ws_dir / "examples/naval/README").exists()
