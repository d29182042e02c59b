"""Integrations layer: the watching service's pid file, and the process it names.

The service holds an exclusive lock on its pid file for as long as it runs and writes
there its pid and when it started (in clock ticks since boot): a pid alone, across pid
namespaces or once reused, may name someone else's process, so it is signalled only
when both still match.
"""

from __future__ import annotations

import fcntl
import os

from .._service_client import ServicePaths


def lock_held(paths: ServicePaths) -> tuple[int, int] | None:
    """Return the running service's pid and start time (its lock is held), else None.

    The pid is 0 when the pid file does not say it (the service is still starting).
    """
    try:
        fd = os.open(paths.pid, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            words = os.read(fd, 64).split()
            if len(words) == 2 and words[0].isdigit() and words[1].isdigit():
                return int(words[0]), int(words[1])
            return 0, 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def start_time(pid: int) -> int | None:
    """Return when process ``pid`` started, in clock ticks since boot (None: no such one)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def exited(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie no one has reaped yet has ended too)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in (b"Z", b"X")


__all__ = ["exited", "lock_held", "start_time"]
