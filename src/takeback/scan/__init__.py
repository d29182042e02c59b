"""Scan layer: reading the workspace (the walk, the ignore rules, the stat cache).

The watching service's watcher (``_watcher``, which loads inotify) is imported only by
the service itself.
"""

from __future__ import annotations

from ._scope import TreeScope, in_scope
from ._service import Changes, Mark, ServicePaths, ServiceReply, ask_service, changes_since
from ._walk import CACHE_KEY, GRANULARITY_NS, Scanner, ScanResult

__all__ = [
    "CACHE_KEY",
    "GRANULARITY_NS",
    "Changes",
    "Mark",
    "ScanResult",
    "Scanner",
    "ServicePaths",
    "ServiceReply",
    "ask_service",
    "TreeScope",
    "changes_since",
    "in_scope",
]
