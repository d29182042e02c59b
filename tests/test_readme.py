"""The README's walkthrough does what it says: its shell blocks run word for word, in order."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _walkthrough() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Five minutes with it", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 400
    assert lines[2] == "```sh" and "examples/demo.py" in lines[3] and "pytest" in lines[4]
    for link in re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines)):
        assert (ROOT / link).is_file(), link


def test_the_walkthrough_runs_word_for_word(tmp_path: Path) -> None:
    takeback = shutil.which("takeback", path=str(Path(sys.executable).parent))
    if takeback is None:
        pytest.skip("the takeback console script is not installed beside this Python")
    blocks = _walkthrough()
    assert len(blocks) >= 4
    script = "set -e\n" + "\n".join(blocks)
    env = dict(os.environ, PATH=f"{Path(takeback).parent}{os.pathsep}{os.environ['PATH']}")
    got = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert got.returncode == 0, got.stdout + got.stderr
    out = got.stdout
    assert "1 file changed +1 -0" in out
    assert "Undid turn 2 of session 'default'" in out and "Redid turn 2" in out
    assert "-def greet(name):\n+def welcome(name):" in out
    assert "would restore:\nM app.py\n" in out  # the plan, in words
    demo = tmp_path / "demo"
    assert (demo / "app.py").read_text().startswith("def greet(name):")
    assert (demo / "NOTES.md").read_text() == "my own notes\n"
    assert (demo / "test_app.py").exists()
