"""Integrations layer: what the watching service reads ahead in its idle time.

A snapshot fed by the service makes a folder above a change from the folder's last tree,
read back from the store. With a million files a change's top folder is one of hundreds,
and reading its tree back (a chain of deltas, from a store far larger than what the
system keeps in memory) cost more than the rest of the snapshot. So once a call has left
the service idle for a moment, it reads the last trees of the folders that hold others
ahead, about 10 ms at a time, shallowest first, into what the store keeps in memory
(``store._objects``, within its budget): each is read once, and a change below it reads
none back.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Seconds without a call before reading ahead: calls that come one after another (a
#: turn's hooks, a script) are not kept waiting by it.
IDLE_SECONDS = 0.25
#: About how long one step reads before the service looks for a call again.
STEP_SECONDS = 0.01
#: Trees read between two looks at the clock.
_PART = 4


class ReadAhead:
    """The trees still to read ahead, and how many were read."""

    def __init__(self) -> None:
        #: tree ids still to read, the next one last
        self.left: list[str] = []
        #: the folder count of the cache they came from
        self.folders = 0
        #: how many trees were read ahead
        self.read = 0

    def due(self, allowed: bool) -> bool:
        """Whether there is reading ahead to do (``allowed``: the service runs calls).

        Once per cache, and again when it grew or shrank by a quarter: a folder made
        since has its tree kept already (the snapshot that stored it keeps it).
        """
        if self.left:
            return True
        if not allowed:
            return False
        from ..scan import cached_folders

        count = cached_folders()
        return bool(count) and abs(count - self.folders) * 4 > self.folders

    def step(
        self, root: str, store: str, log: Callable[[str], None], budget: float = STEP_SECONDS
    ) -> None:
        """Read trees for about ``budget`` seconds: a call that comes meanwhile waits no longer."""
        if not self.left:
            from ..scan import cached_folders, inner_trees

            self.folders = cached_folders()
            self.left = inner_trees()
            self.left.reverse()
            if not self.left:
                return
        from .. import Workspace

        end = time.monotonic() + budget
        try:
            with Workspace(root, store=store) as ws:
                objects = ws.open_store().objects
                while self.left and time.monotonic() < end:
                    part = [self.left.pop() for _ in range(min(_PART, len(self.left)))]
                    self.read += objects.read_ahead(part)
        except Exception as e:  # noqa: BLE001 - reading ahead only saves time later
            log(f"reading trees ahead failed: {e!r}")
            self.left.clear()
