"""Integrations: a workspace opened for each call, one call at a time.

The MCP server's tools and the page's API both answer calls that may come from several
threads; each call opens the workspace (so it sees what other processes wrote since) and
closes it after, and the calls of one server take turns.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .. import StoreAddress, Workspace


class PerCall:
    """Opens the workspace at ``root`` (with ``store`` and ``max_file_bytes``) per call."""

    def __init__(
        self, root: str, store: str | StoreAddress | None, max_file_bytes: int | None
    ) -> None:
        self.root = root
        self.store = store
        self.max_file_bytes = max_file_bytes
        self._lock = threading.Lock()

    @contextmanager
    def workspace(self) -> Iterator[Workspace]:
        """Open the workspace for one call (one call at a time)."""
        from .. import Workspace

        with self._lock:
            kwargs: dict[str, Any] = {"store": self.store}
            if self.max_file_bytes is not None:
                kwargs["max_file_bytes"] = self.max_file_bytes
            ws = Workspace(self.root, **kwargs)
            try:
                yield ws
            finally:
                ws.close()
