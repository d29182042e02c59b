"""Scan layer: reading the workspace (the walk, the ignore rules, the stat cache)."""

from __future__ import annotations

from ._scope import TreeScope, in_scope
from ._service import Changes, Mark, ServicePaths, ServiceReply, ask_service, changes_since
from ._walk import CACHE_KEY, GRANULARITY_NS, Scanner, ScanResult
from ._watcher import Answer, Watcher

__all__ = [
    "Answer",
    "CACHE_KEY",
    "GRANULARITY_NS",
    "Changes",
    "Mark",
    "ScanResult",
    "Scanner",
    "ServicePaths",
    "ServiceReply",
    "Watcher",
    "ask_service",
    "TreeScope",
    "changes_since",
    "in_scope",
]
