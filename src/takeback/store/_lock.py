"""Store layer: the store's lock made re-entrant, once for both stores.

A store's lock is taken through the store (a ``flock`` on the folder store's ``lock``
file, a session-level advisory lock on a database); holding it again within the same
open store is counted here instead of taken again: a snapshot taken inside a restore
(the pre-restore snapshot) runs under the restore's exclusive lock, where a second
``flock`` on a new file description, or a second advisory lock, would wait for itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager


class Reentry:
    """How deep one open store holds its lock, and whether exclusively."""

    def __init__(self) -> None:
        self.depth = 0
        self.exclusive = False

    @property
    def held(self) -> bool:
        """Whether this open store holds its lock (its own lock is no other's restore)."""
        return self.depth > 0

    @contextmanager
    def hold(
        self, exclusive: bool, take: Callable[[bool], AbstractContextManager[None]]
    ) -> Iterator[None]:
        """Hold the lock: ``take(exclusive)`` the first time, counted after that.

        Raises:
            RuntimeError: a shared hold asked to become exclusive (it cannot: another
                process may hold it shared too, and each would wait for the other).
        """
        if self.depth:
            if exclusive and not self.exclusive:
                raise RuntimeError("cannot upgrade a shared store lock to exclusive")
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
            return
        with take(exclusive):
            self.depth, self.exclusive = 1, exclusive
            try:
                yield
            finally:
                self.depth = 0
