"""Test helpers for the watching service: start one, stop it, prove nothing is left."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from takeback.integrations import _service
from takeback.ops import Options
from takeback.scan import Scanner, ScanResult
from takeback.store import Store


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie waiting for its parent does not count)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != b"Z"


@contextmanager
def running_service(
    root: Path, store: Path, options: Sequence[str] = (), *, faults: bool = False
) -> Iterator[int]:
    """Start the workspace's service, yield its pid, and stop it (killed if it must be)."""
    if faults:
        os.environ[_service.FAULTS_ENV] = "1"
    try:
        pid = _service.start(str(root), str(store), wait=20.0, options=options)
    finally:
        os.environ.pop(_service.FAULTS_ENV, None)
    assert pid is not None, "the service did not start"
    try:
        yield pid
    finally:
        stop_for_good(store, pid)


def stop_for_good(store: Path, pid: int) -> None:
    """Stop a service whatever its state (stopped by a signal too), and check it is gone."""
    if alive(pid):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    _service.stop(str(store), timeout=3.0)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    assert not alive(pid), f"service {pid} is still running"


def full_tree(store: Store, opts: Options | None = None) -> str:
    """The root tree id a scan with no cache finds now (objects go to ``store``)."""
    return full_scan(store, opts).tree


def full_scan(store: Store, opts: Options | None = None) -> ScanResult:
    """What a scan with no cache finds now (objects go to ``store``)."""
    opts = opts or Options()
    scanner = Scanner(
        store.root,
        put=store.objects.put,
        cache=None,
        dircache_get=lambda _dirs: {},
        max_file_bytes=opts.max_file_bytes,
        exclude_env=opts.exclude_env,
        exclude=[store.path],
    )
    result = scanner.scan()
    store.objects.flush()
    return result


def can_mount(where: Path) -> bool:
    """Whether this process may mount a file system (root with CAP_SYS_ADMIN): tried."""
    import subprocess

    probe = where / ".mount-probe"
    probe.mkdir()
    try:
        got = subprocess.run(["mount", "-t", "tmpfs", "none", str(probe)], capture_output=True)
        if got.returncode != 0:
            return False
        subprocess.run(["umount", str(probe)], check=True)
        return True
    except OSError:
        return False
    finally:
        probe.rmdir()
