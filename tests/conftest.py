"""Shared fixtures: every test runs with a private HOME, XDG folders and no TAKEBACK_* vars."""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# TAKEBACK_TEST_NO_NATIVE=1: the scan's C listing is not loaded in this process, so the
# scan runs in Python, as where no compiler was at install (.ci/run runs the scan and
# engine tests so once). Set before any takeback module is imported.
NO_NATIVE = bool(os.environ.get("TAKEBACK_TEST_NO_NATIVE"))
if NO_NATIVE:
    sys.modules["takeback.scan._listing"] = None  # type: ignore[assignment]

from takeback._fs import allow_deep_trees  # noqa: E402

SRC = str(Path(__file__).resolve().parent.parent / "src")

# takeback raises the recursion limit on its first walk (deep folders); hypothesis warns
# when a test changes it mid-run, so it is raised once here, before any test.
allow_deep_trees()

# CI runs the property tests derandomized and without the example database: a given
# commit passes or fails the same way every time, and a failure is reproduced by running
# the same command again (``.ci/run`` sets CI; ``--hypothesis-profile=ci`` also works).
# Registered over the default profile, so it is the same whichever hypothesis release
# (recent ones bring a "ci" profile of their own, and load it when CI is set).
settings.register_profile(
    "ci", parent=settings.get_profile("default"), derandomize=True, database=None
)
if os.environ.get("CI"):
    settings.load_profile("ci")

# The quick tier (``-m quick``, and ``-m "not slow"``) runs each property test with a
# tenth of its examples: the profile ``dev``, loaded by pytest_configure below, over
# whichever of the two above is loaded. The README's command and CI select no marker, so
# they run the full counts.
DEV_SHARE = 10  # examples in every 100
settings.register_profile("dev", parent=settings.default, max_examples=DEV_SHARE)
QUICK_RUN = re.compile(r"(?<!not )\bquick\b|\bnot slow\b")


def pytest_configure(config: pytest.Config) -> None:
    """Load the profile ``dev`` for a quick run (``-m quick``, ``-m "not slow"``), unless
    a profile was named (``--hypothesis-profile``)."""
    markexpr = config.getoption("markexpr", "") or ""
    if QUICK_RUN.search(markexpr) and not config.getoption("hypothesis_profile", None):
        settings.load_profile("dev")


def examples(n: int) -> int:
    """Return how many examples a property test written for ``n`` runs under this profile.

    ``n`` in the full suite (hypothesis's default of 100 examples a test); in proportion
    under the profile ``dev`` (a tenth), never fewer than one.
    """
    return max(1, n * settings().max_examples // 100)


def with_default_sigint() -> None:
    """``preexec_fn`` for a child a test interrupts as Ctrl-C would: SIGINT default and
    unblocked, whatever the test runner's process had (a child inherits an ignored or
    blocked signal, and Python then never turns it into KeyboardInterrupt)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``e2e`` every test that runs the real ``takeback`` command (the ``tb`` fixture),
    and ``quick`` every test that is neither ``slow``, ``e2e`` nor ``postgres``.

    The quick tier is those, and the ``e2e`` and ``postgres`` tests marked ``quick`` in
    their modules: a few of each command's, the store contract on a database.
    """
    for item in items:
        if "tb" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)
        if not any(item.get_closest_marker(m) for m in ("quick", "slow", "e2e", "postgres")):
            item.add_marker(pytest.mark.quick)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Point HOME and the XDG folders at tmp_path; clear every TAKEBACK_* variable."""
    for key in list(os.environ):
        if key.startswith("TAKEBACK_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (
        ("XDG_DATA_HOME", "data"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    # Hooks and watch start no watching service unless a test asks: none is left running.
    monkeypatch.setenv("TAKEBACK_SERVICE", "0")
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

    def __call__(
        self,
        *args: str,
        input: bytes | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        check: int | None = 0,
    ) -> subprocess.CompletedProcess[str]:
        full_env = dict(os.environ)
        full_env["TAKEBACK_STORE"] = str(self.store)
        full_env["PYTHONPATH"] = SRC
        if env:
            full_env.update(env)
        proc = subprocess.run(
            [sys.executable, "-m", "takeback", *args],
            cwd=cwd or self.root,
            env=full_env,
            input=input.decode() if input is not None else None,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=120,  # names need not be UTF-8
        )
        if check is not None and proc.returncode != check:
            raise AssertionError(
                f"takeback {' '.join(args)} exited {proc.returncode}, expected {check}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def into_closed_pipe(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run the command writing into a pipe nobody reads (``takeback ARGS | true``)."""
        full_env = dict(os.environ, TAKEBACK_STORE=str(self.store), PYTHONPATH=SRC)
        full_env.update(env or {})
        r, w = os.pipe()
        os.close(r)
        try:
            return subprocess.run(
                [sys.executable, "-m", "takeback", *args],
                cwd=self.root,
                env=full_env,
                stdout=w,
                stderr=subprocess.PIPE,
                timeout=120,
                check=False,
            )
        finally:
            os.close(w)

    def without_stdout(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run the command started with stdout closed (``takeback ARGS >&-``)."""
        full_env = dict(os.environ, TAKEBACK_STORE=str(self.store), PYTHONPATH=SRC)
        full_env.update(env or {})
        return subprocess.run(
            ["sh", "-c", 'exec "$0" -m takeback "$@" >&-', sys.executable, *args],
            cwd=self.root,
            env=full_env,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )


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


@functools.cache
def _without_file_powers() -> tuple[str, ...] | None:
    """A command prefix under which file permissions apply (None: there is none).

    Tests run as root, which reads ``chmod 000`` files and writes into read-only folders;
    ``setpriv`` drops the two capabilities that allow it from the bounding set, so the
    command runs as the same user, with the same Python, under ordinary permissions.
    """
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = (setpriv, "--bounding-set=-dac_override,-dac_read_search")
    with tempfile.TemporaryDirectory() as d:
        closed = Path(d) / "closed"
        closed.write_text("x")
        closed.chmod(0)
        probe = subprocess.run(
            [*prefix, sys.executable, "-c", f"open({str(closed)!r})"], capture_output=True
        )
    return prefix if b"PermissionError" in probe.stderr else None


def without_file_powers() -> tuple[str, ...]:
    """The prefix that makes file permissions apply to a command; skips the test if none."""
    prefix = _without_file_powers()
    if prefix is None:
        pytest.skip(
            "cannot run a process that file permissions apply to: running as root "
            "without setpriv, or unable to drop CAP_DAC_OVERRIDE"
        )
    return prefix


def write(root: Path, rel: str, data: bytes | str, mode: int | None = None) -> None:
    """Write a file (and the folders above it), with ``mode`` when given."""
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    if mode is not None:
        p.chmod(mode)


def state(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every entry under ``root`` as (kind, bytes or link target, permission bits)."""
    out: dict[str, tuple[str, bytes, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.fsencode(os.readlink(full)), 0)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", b"", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("f", Path(full).read_bytes(), stat.S_IMODE(st.st_mode))
    return out
