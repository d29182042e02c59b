"""A demo of takeback on a scratch folder: an agent's run recorded, looked at, taken back.

Every step runs the real ``takeback`` command and prints it with its output, so what you
see is what a person or a hook would type. The scratch folder and its store are removed
at the end (pass ``--keep`` to keep them and poke around).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def sh(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Run one command, print it and its output, and return its stdout."""
    print(f"\n$ {shlex.join(args)}")
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    print(out.rstrip() if out.strip() else "(no output)")
    if proc.returncode not in (0, 3):
        raise SystemExit(f"demo: {args[0]} exited {proc.returncode}")
    return proc.stdout


def main() -> int:
    """Run the demo."""
    keep = "--keep" in sys.argv
    scratch = Path(tempfile.mkdtemp(prefix="takeback-demo-"))
    ws = scratch / "project"
    ws.mkdir()
    env = dict(os.environ, TAKEBACK_STORE=str(scratch / "store"), TAKEBACK_SESSION="demo")
    tb = [sys.executable, "-m", "takeback"]
    try:
        (ws / "app.py").write_text("def greet(name):\n    return 'hi ' + name\n")
        (ws / "README.md").write_text("# project\n")
        (ws / ".gitignore").write_text("*.log\n")
        (ws / "debug.log").write_text("ignored, never touched\n")
        print(f"A scratch project in {ws}")

        print("\n# Turn 1: the agent edits app.py with a file tool, then runs a formatter.")
        sh([*tb, "turn", "begin", "-m", "Add a docstring and format"], ws, env)
        sh([*tb, "touch", "app.py"], ws, env)
        (ws / "app.py").write_text(
            'def greet(name):\n    """Say hi."""\n    return "hi " + name\n')
        sh([*tb, "run", "-m", "formatter", "--", sys.executable, "-c",
            "import pathlib; p = pathlib.Path('app.py'); "
            "p.write_text(p.read_text().replace('\"hi \"', \"'hello '\"))"], ws, env)
        sh([*tb, "turn", "end"], ws, env)
        sh([*tb, "changes"], ws, env)

        print("\n# Turn 2: a command the agent never names files for (sed-like), and a delete.")
        sh([*tb, "turn", "begin", "-m", "Rename greet everywhere, drop the README"], ws, env)
        sh([*tb, "run", "--", sys.executable, "-c",
            "import pathlib; p = pathlib.Path('app.py'); "
            "p.write_text(p.read_text().replace('greet', 'welcome')); "
            "pathlib.Path('README.md').unlink(); pathlib.Path('new.txt').write_text('x\\n')"],
           ws, env)
        sh([*tb, "turn", "end"], ws, env)
        sh([*tb, "log"], ws, env)
        sh([*tb, "diff", "turn:2"], ws, env)

        print("\n# The person edits a file of their own meanwhile; undo leaves it alone.")
        (ws / "notes.txt").write_text("my own notes\n")
        sh([*tb, "undo"], ws, env)
        print(f"\napp.py is now:\n{(ws / 'app.py').read_text()}")
        print(f"notes.txt survived: {(ws / 'notes.txt').exists()}")
        sh([*tb, "redo"], ws, env)

        print("\n# Everything after the start, in one go (dry run first).")
        sh([*tb, "rewind", "--to", "start", "--dry-run"], ws, env)
        sh([*tb, "rewind", "--to", "start"], ws, env)
        print(f"\napp.py is back to:\n{(ws / 'app.py').read_text()}")
        print(f"debug.log (ignored) untouched: {(ws / 'debug.log').read_text().strip()!r}")
    finally:
        if keep:
            print(f"\nkept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
