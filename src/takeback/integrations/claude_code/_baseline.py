"""Integrations layer: the workspace's first snapshot, begun when a conversation starts.

The first snapshot reads every file (8-14 s on 100,000 files): a conversation's start
begins it in a detached process and returns at once, and the person's first prompt
waits only for what is left of it. The detached process holds an exclusive ``flock`` on
``<store>/claude-code/baseline.lock`` (taken by the starting call and handed down, so
there is no moment when neither holds it); every other call waits for that lock first,
within its own time bound, and then finds the snapshot done. Agent-neutral: every
agent's hook starts its first snapshot here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from ... import Workspace
    from ._call import HookCall

#: held (exclusively) while a detached process takes the workspace's first snapshot
BASELINE_LOCK = os.path.join("claude-code", "baseline.lock")
#: set in the detached process's environment: it takes the baseline itself
BASELINE_ENV = "TAKEBACK_HOOK_BASELINE"


def session_start(
    ws: Workspace, name: str, env: Mapping[str, str] | None, *, fork: bool = False
) -> str:
    """Take the baseline in the detached process; elsewhere leave it to the first prompt.

    A workspace with snapshots has a scan cache, so the first prompt's baseline costs a
    walk of stats, not a read of every file (:func:`run` starts the detached process
    when it has none). A forked conversation (``source`` ``fork``: a new session id, the
    parent's conversation so far) takes its baseline at once: its start is the state it
    was forked in, whatever happens before its first prompt.
    """
    if fork or (env is not None and env.get(BASELINE_ENV)):
        info = ws.session(name).start()
        return f"baseline {info.baseline[:12]} taken"
    return "nothing to start; the baseline is taken at the first prompt"


def start_baseline(ws: Workspace, call: HookCall, raw: bytes, env: Mapping[str, str]) -> str:
    """Start the first snapshot in a detached process; return at once.

    The exclusive lock on :data:`BASELINE_LOCK` is taken here and handed to the
    process (the same open file), so a prompt that comes before the process has started
    already finds it held. Nothing is started when another process holds it.

    Returns:
        What was done (for the log).
    """
    import fcntl
    import subprocess
    import sys

    path = os.path.join(ws.store_path, BASELINE_LOCK)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "a baseline is being taken already"
        argv = [sys.executable, "-m", "takeback", "hook", call.agent, "--root", ws.root]
        if call.event:
            argv += ["--event", call.event]
        child_env = {**env, BASELINE_ENV: "1"}
        if ws.store_url is not None:
            # The database itself (not this machine's folder for it), through the
            # environment: its address may hold a password, which argv would show.
            child_env["TAKEBACK_STORE"] = ws.store_url.reveal()
        else:
            argv += ["--store", ws.store_path]
        if call.session:
            argv += ["--session", call.session]
        if call.max_file_bytes is not None:
            argv += ["--max-file-bytes", str(call.max_file_bytes)]
        # Its own session, no terminal, nothing of Claude Code's pipes: Claude Code waits
        # for the hook's stdout to close, and the baseline may take a while.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=(fd,),
            env=child_env,
            cwd=ws.root,
        )
        assert proc.stdin is not None
        try:
            proc.stdin.write(raw)
        finally:
            proc.stdin.close()
        return f"baseline started in the background (pid {proc.pid})"
    finally:
        os.close(fd)  # the process holds the lock through its own copy


def wait_for_baseline(store_path: str) -> bool:
    """Wait while a detached process takes the first snapshot (bounded by the Deadline).

    Returns:
        Whether there was one to wait for.
    """
    import fcntl

    try:
        fd = os.open(os.path.join(store_path, BASELINE_LOCK), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            fcntl.flock(fd, fcntl.LOCK_SH)
            return True
    finally:
        os.close(fd)
