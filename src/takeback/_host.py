"""API layer: what a session needs of its workspace (``Workspace`` is one).

The session layer depends on this protocol, not on the workspace module, so the two do
not import each other.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from . import ops

if TYPE_CHECKING:
    from .store import Store


class Host(Protocol):
    """What a session needs of its workspace: the folder, the store, options and events.

    ``Workspace`` is one; the session layer depends on this, not on the workspace module,
    so the two do not import each other.

    What only sessions need is private (``_recording``, ``_emit``, ``_announce_restore``):
    the plumbing between the API's modules, not the workspace's face. The rest is public
    because the library's users use it too: ``open_store`` and ``has_store`` (the command
    line, the hook and the tests read the store), ``rel`` (every face turns its paths into
    the workspace's), and ``MAX_FILE_EVENTS`` (the documented bound on ``file.changed``
    events).
    """

    root: str
    store_path: str
    options: ops.Options
    MAX_FILE_EVENTS: int

    def open_store(self, *, create: bool = False) -> Store: ...

    def _recording(self, *, create: bool = False) -> ops.Recording: ...

    def has_store(self) -> bool: ...

    def _emit(self, event: dict[str, Any]) -> None: ...

    def rel(
        self,
        path: str | os.PathLike[str],
        *,
        base: str | None = None,
        follow: bool = True,
    ) -> str: ...

    def _announce_restore(
        self,
        op: str,
        session: str,
        written: dict[str, str],
        *,
        pre: str | None,
        turns: list[int],
        left: int,
        conflicts: Sequence[str] = (),
    ) -> None: ...
