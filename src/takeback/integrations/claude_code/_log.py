"""Integrations layer: the hook log, where a hook call that failed open says what went wrong.

Hooks fail open: nothing goes to the agent (which reads a hook's stdout and exit code as
decisions), so what went wrong is written to ``hook.log`` in the store (kept under
``LOG_MAX_BYTES``, one older file beside it). Agent-neutral: every agent's hook logs here.
"""

from __future__ import annotations

import os
import time

from ...errors import TakebackError, UsageError
from ._call import AGENT

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ._call import HookCall
    from ._payload import Payload

LOG_NAME = "hook.log"
LOG_MAX_BYTES = 1 << 20


def describe(e: BaseException) -> str:
    if isinstance(e, TakebackError):
        return f"{type(e).__name__}: {e.message}"
    import traceback

    tb = "".join(traceback.format_exception(e)).rstrip()
    return f"{type(e).__name__}: {e}\n" + "\n".join(f"    {line}" for line in tb.splitlines())


def log_line(payload: Payload | None, text: str, agent: str = AGENT) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
    event = payload.event if payload else "-"
    tool = f" {payload.tool_name}" if payload and payload.tool_name else ""
    sid = payload.session_id if payload else "-"
    agent = payload.agent if payload else agent
    return f"{stamp} {agent} {event}{tool} session={sid}: {text}\n"


def log_event(log_dir: str, payload: Payload | None, event: dict[str, Any]) -> None:
    if event.get("event") == "snapshot.failed":
        append_log(log_dir, log_line(payload, f"snapshot failed: {event.get('reason')}"))


def fallback_log_dir(
    call: HookCall, store: str | None, payload: Payload | None, env: Mapping[str, str]
) -> str:
    """Where to log when no workspace could be made: the store it would have used.

    For a database, this machine's folder for it (an address is never a folder name).
    """
    from ._payload import choose_root, make_workspace

    if store and not store.startswith(("postgresql://", "postgres://")):
        return store
    try:
        root = choose_root(payload, call.root, env)
    except UsageError:
        root = os.getcwd()
    try:
        return make_workspace(root, store, None, env).store_path
    except TakebackError:
        import platformdirs

        return platformdirs.user_data_dir("takeback", appauthor=False)


def append_log(folder: str, text: str) -> None:
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, LOG_NAME)
    try:
        if os.path.getsize(path) > LOG_MAX_BYTES:
            os.replace(path, path + ".1")
    except OSError:
        pass
    # O_NONBLOCK: a FIFO in the log's place fails at once instead of waiting for a reader.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as f:
        f.write(text)
