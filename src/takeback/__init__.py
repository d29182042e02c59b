"""takeback: record every step of an AI coding agent's run, and take any part of it back.

The public names are loaded on first use, so ``takeback --version`` and the hook entry
point start without importing the storage engine.
"""

from __future__ import annotations

# Not ``typing.TYPE_CHECKING``: importing typing costs a command's start-up several ms,
# and type checkers take any name TYPE_CHECKING as true.
TYPE_CHECKING = False

__version__ = "0.1.0"

if TYPE_CHECKING:
    from typing import Any

    from ._sentences import summary
    from ._stores import copy_history, find_root
    from .errors import (
        ConflictError,
        PathError,
        RefError,
        RestoreError,
        RootMismatchError,
        ScanError,
        StalePlanError,
        StoreCorruptError,
        StoreError,
        StoreMissingError,
        StoreVersionError,
        TakebackError,
        UsageError,
    )
    from .model import (
        Change,
        Entry,
        Plan,
        PlanItem,
        RewindResult,
        SessionInfo,
        SnapshotInfo,
        StepInfo,
        TurnInfo,
    )
    from .ops import (
        BisectPoint,
        BisectResult,
        BisectRun,
        CopyResult,
        DiffResult,
        DuResult,
        FileDiff,
        FsckResult,
        GcResult,
        Policy,
        SessionUsage,
        TurnOpResult,
    )
    from .store import StoreAddress
    from .workspace import DEFAULT_SESSION, Session, Step, Turn, Workspace

_WHERE = {
    "BisectPoint": "ops",
    "BisectResult": "ops",
    "BisectRun": "ops",
    "Change": "model",
    "ConflictError": "errors",
    "CopyResult": "ops",
    "DEFAULT_SESSION": "workspace",
    "DiffResult": "ops",
    "DuResult": "ops",
    "Entry": "model",
    "FileDiff": "ops",
    "FsckResult": "ops",
    "GcResult": "ops",
    "PathError": "errors",
    "Plan": "model",
    "PlanItem": "model",
    "Policy": "ops",
    "RefError": "errors",
    "RestoreError": "errors",
    "RewindResult": "model",
    "RootMismatchError": "errors",
    "ScanError": "errors",
    "Session": "workspace",
    "SessionInfo": "model",
    "SessionUsage": "ops",
    "SnapshotInfo": "model",
    "StalePlanError": "errors",
    "Step": "workspace",
    "StepInfo": "model",
    "StoreAddress": "store",
    "StoreCorruptError": "errors",
    "StoreError": "errors",
    "StoreMissingError": "errors",
    "StoreVersionError": "errors",
    "TakebackError": "errors",
    "Turn": "workspace",
    "TurnInfo": "model",
    "TurnOpResult": "ops",
    "UsageError": "errors",
    "Workspace": "workspace",
    "copy_history": "_stores",
    "find_root": "_stores",
    "summary": "_sentences",
}

__all__ = [
    "BisectPoint",
    "BisectResult",
    "BisectRun",
    "Change",
    "ConflictError",
    "CopyResult",
    "DEFAULT_SESSION",
    "DiffResult",
    "DuResult",
    "Entry",
    "FileDiff",
    "FsckResult",
    "GcResult",
    "PathError",
    "Plan",
    "PlanItem",
    "Policy",
    "RefError",
    "RestoreError",
    "RewindResult",
    "RootMismatchError",
    "ScanError",
    "Session",
    "SessionInfo",
    "SessionUsage",
    "SnapshotInfo",
    "StalePlanError",
    "Step",
    "StepInfo",
    "StoreAddress",
    "StoreCorruptError",
    "StoreError",
    "StoreMissingError",
    "StoreVersionError",
    "TakebackError",
    "Turn",
    "TurnInfo",
    "TurnOpResult",
    "UsageError",
    "Workspace",
    "__version__",
    "copy_history",
    "find_root",
    "summary",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'takeback' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{where}", __name__), name)
    if isinstance(value, type) or callable(value):
        # Shown as takeback.Workspace, takeback.ConflictError: where a user finds them.
        value.__module__ = __name__
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
