"""Base layer: the one exception tree of takeback and the exit code each kind means.

::

    TakebackError                      (exit 2 unless a subclass says otherwise)
    +-- UsageError                     bad arguments                           exit 2
    +-- RefError                       no such ref, ambiguous, too short       exit 2
    +-- StoreError                     no store / store unusable               exit 2
    |   +-- StoreMissingError          no store where one was expected
    |   +-- StoreCorruptError          an object or the database fails a check
    |   +-- StoreVersionError          written by a newer takeback
    |   +-- RootMismatchError          the store belongs to another folder
    +-- PathError                      a path outside the root or unsafe       exit 2
    +-- ScanError                      the workspace cannot be read            exit 2
    +-- ConflictError                  undo/redo/revert would overwrite edits  exit 3
    |   +-- StalePlanError             the plan confirmed is out of date       exit 3
    +-- RestoreError                   a write failed part way                 exit 1

Every class carries its exit code in ``exit_code``; ``takeback.cli.main`` is the one place
that turns an exception into a process exit code.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: see takeback/__init__.py
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


class TakebackError(Exception):
    """Base of every error takeback raises on purpose."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_json(self) -> dict[str, Any]:
        """Return the machine form of the error (``--json`` and MCP tool errors)."""
        doc: dict[str, Any] = {
            "error": type(self).__name__,
            "message": self.message,
            "exit_code": self.exit_code,
        }
        for name in ("conflicts", "restored", "failed", "undo_id", "left"):
            if hasattr(self, name):
                doc[name] = getattr(self, name)
        return doc


class UsageError(TakebackError):
    """The arguments make no sense (an unknown option value, a missing operand)."""

    exit_code = 2


class RefError(TakebackError):
    """A ref names no snapshot, names several, or is malformed."""

    exit_code = 2

    def __init__(self, message: str, *, ref: str) -> None:
        super().__init__(message)
        self.ref = ref


class StoreError(TakebackError):
    """The store cannot be used."""

    exit_code = 2

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class StoreMissingError(StoreError):
    """No store exists where one is needed (commands that only read never create one)."""


class StoreCorruptError(StoreError):
    """An object does not match its hash, or the database is unreadable."""

    def __init__(
        self, message: str, *, path: str, expected: str | None = None, actual: str | None = None
    ) -> None:
        super().__init__(message, path=path)
        self.expected = expected
        self.actual = actual


class StoreVersionError(StoreError):
    """The store was written by a newer format than this takeback knows."""

    def __init__(self, message: str, *, path: str, expected: int, actual: int) -> None:
        super().__init__(message, path=path)
        self.expected = expected
        self.actual = actual


class RootMismatchError(StoreError):
    """The store records another workspace root than the one given."""

    def __init__(self, message: str, *, path: str, expected: str, actual: str) -> None:
        super().__init__(message, path=path)
        self.expected = expected
        self.actual = actual


class PathError(TakebackError):
    """A path lies outside the root, or reaching it would go through a symlink."""

    exit_code = 2

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class ScanError(TakebackError):
    """The workspace could not be read (its root is missing or unreadable)."""

    exit_code = 2

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class ConflictError(TakebackError):
    """Files changed since the operation's record of them; nothing was written.

    ``regions``: for a take-back that merged, each file's regions that both sides
    changed, as line ranges (``now``, ``record``, ``target``: ``[first, last]``).
    """

    exit_code = 3

    def __init__(
        self,
        message: str,
        *,
        conflicts: Sequence[str],
        regions: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        super().__init__(message)
        self.conflicts = list(conflicts)
        self.regions = dict(regions or {})

    def to_json(self) -> dict[str, Any]:
        """Return the machine form; ``regions`` is there when a merge named some."""
        doc = super().to_json()
        if self.regions:
            doc["regions"] = self.regions
        return doc


class StalePlanError(ConflictError):
    """An operation confirmed from a plan found the world moved since; nothing was written.

    The workspace (a path the plan names) or the history (a turn, a take-back) changed
    after the plan was made: the operation would not do what was shown. ``planned`` and
    ``now`` are the two plans' tokens; ``reason`` is ``workspace`` or ``history``.
    """

    def __init__(self, message: str, *, planned: str, now: str, reason: str) -> None:
        super().__init__(message, conflicts=[])
        self.planned = planned
        self.now = now
        self.reason = reason

    def to_json(self) -> dict[str, Any]:
        """Return the machine form, with both tokens and why they differ."""
        doc = super().to_json()
        doc.update(planned=self.planned, now=self.now, reason=self.reason)
        return doc


class RestoreError(TakebackError):
    """A restore failed part way; ``restored``/``failed`` say what happened."""

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        restored: Sequence[str],
        failed: Sequence[str],
        undo_id: str,
        left: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.restored = list(restored)
        self.failed = list(failed)
        self.undo_id = undo_id
        #: paths left as they are, and why (a folder kept for what is in it, ...)
        self.left = dict(left or {})


__all__ = [
    "ConflictError",
    "PathError",
    "RefError",
    "RestoreError",
    "RootMismatchError",
    "ScanError",
    "StalePlanError",
    "StoreCorruptError",
    "StoreError",
    "StoreMissingError",
    "StoreVersionError",
    "TakebackError",
    "UsageError",
]
