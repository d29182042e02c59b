"""Shared fixtures: every test runs with a private HOME, XDG folders and no TAKEBACK_* vars."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from takeback._fs import allow_deep_trees

SRC = str(Path(__file__).resolve().parent.parent / "src")

# takeback raises the recursion limit on its first walk (deep folders); hypothesis warns
# when a test changes it mid-run, so it is raised once here, before any test.
allow_deep_trees()


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Point HOME and the XDG folders at tmp_path; clear every TAKEBACK_* variable."""
    for key in list(os.environ):
        if key.startswith("TAKEBACK_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_DATA_HOME", "data"), ("XDG_CONFIG_HOME", "config"),
                     ("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state")):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "t")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "t@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "t")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "t@example.invalid")
    yield


@pytest.fixture
def ws_dir(tmp_path: Path) -> Path:
    """An empty workspace folder."""
    d = tmp_path / "ws"
    d.mkdir()
    return d


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """Where a test's store lives (outside the workspace)."""
    return tmp_path / "store"


class CLI:
    """Runs the real ``takeback`` command (a subprocess) against one workspace and store."""

    def __init__(self, root: Path, store: Path) -> None:
        self.root = root
        self.store = store

    def __call__(self, *args: str, input: bytes | None = None, cwd: Path | None = None,
                 env: dict[str, str] | None = None, check: int | None = 0
                 ) -> subprocess.CompletedProcess[str]:
        full_env = dict(os.environ)
        full_env["TAKEBACK_STORE"] = str(self.store)
        full_env["PYTHONPATH"] = SRC
        if env:
            full_env.update(env)
        proc = subprocess.run(
            [sys.executable, "-m", "takeback", *args], cwd=cwd or self.root, env=full_env,
            input=input.decode() if input is not None else None, capture_output=True,
            text=True, errors="surrogateescape", timeout=120,  # names need not be UTF-8
        )
        if check is not None and proc.returncode != check:
            raise AssertionError(
                f"takeback {' '.join(args)} exited {proc.returncode}, expected {check}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc


@pytest.fixture
def tb(ws_dir: Path, store_dir: Path) -> CLI:
    """The real command line, run in the workspace with its store."""
    return CLI(ws_dir, store_dir)


def files_state(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every folder and file under ``root``: ("d", b"") or ("f", its bytes)."""
    out: dict[str, tuple[str, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if stat.S_ISDIR(os.lstat(full).st_mode):
                out[rel] = ("d", b"")
            else:
                out[rel] = ("f", Path(full).read_bytes())
    return out
