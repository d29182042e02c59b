"""The project's own files: one version, the license pyproject names, and what CI runs."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import takeback

from .conftest import SRC

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_written_once_and_read_by_pyproject() -> None:
    pyproject = _pyproject()
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "takeback.__version__"}
    assert importlib.metadata.version("takeback") == takeback.__version__


def test_takeback_version_prints_it() -> None:
    script = Path(sys.executable).with_name("takeback")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "takeback"]
    env = {**os.environ, "PYTHONPATH": SRC}
    for flag in ("--version", "-V"):
        proc = subprocess.run([*command, flag], capture_output=True, text=True, env=env, timeout=60)
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            0,
            f"takeback {takeback.__version__}\n",
            "",
        )


def test_the_license_is_the_one_pyproject_names() -> None:
    assert _pyproject()["project"]["license"] == "MIT"  # an SPDX expression
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the takeback authors" in text


def test_ci_runs_the_readme_test_command_word_for_word() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    # The README opens with a shell block: the demo, then the test command.
    assert readme[2] == "```sh"
    test_command = readme[4]
    assert "pytest" in test_command and "pip install" in test_command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci
    assert ci[-1] == test_command  # the last thing CI does, so its code is CI's
    for check in (".venv/bin/ruff check src tests bench", ".venv/bin/mypy"):
        assert check in ci
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
