"""Integrations layer: starting gc by itself, in the background, at most once a day.

After a hook's or a command's work, :func:`start_if_due` asks the store whether a day has
passed since the last gc (one query), and if so starts ``takeback gc --auto`` as a
process of its own, in a session of its own, and does not wait for it: the agent is
never held up by it. The claim is one conditional write, so of several hooks that find
gc due at once, one starts it. A database's address reaches the process through its
environment (``TAKEBACK_STORE``), never its argv, which anyone may read with ``ps``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import Workspace


def start_if_due(ws: Workspace) -> int | None:
    """Start gc in the background when it is due; return its process id (None: not due).

    Never raises: a gc that cannot start is tried again a day later.
    """
    try:
        if not ws.claim_auto_gc():
            return None
        argv = [sys.executable, "-m", "takeback", "gc", "--auto", "--root", ws.root]
        env = dict(os.environ)
        if ws.store_url is not None:
            env["TAKEBACK_STORE"] = ws.store_url.reveal()
        else:
            argv += ["--store", ws.store_path]
        null = os.devnull
        return os.posix_spawn(
            sys.executable,
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, null, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, null, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, null, os.O_WRONLY, 0),
            ],
            setsid=True,
        )
    except Exception:  # noqa: BLE001 - never the caller's problem
        return None
