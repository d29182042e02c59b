"""Scan layer: reading the workspace (the walk, the ignore rules, the stat cache).

The watching service's watcher (``_watcher``, which loads inotify) and its client
(``_service_client``) are imported where they are used, not here: a hook call that takes no
snapshot loads neither.
"""

from __future__ import annotations

from ._cache import (
    CACHE_KEY,
    LEGACY_KEY,
    OLDER_KEY,
    FolderCache,
    cached_ids,
    known_cache,
    load_cache,
    load_legacy_cache,
)
from ._result import ScanResult
from ._scope import TreeScope, in_scope
from ._walk import GRANULARITY_NS, Scanner

__all__ = [
    "CACHE_KEY",
    "GRANULARITY_NS",
    "LEGACY_KEY",
    "OLDER_KEY",
    "FolderCache",
    "ScanResult",
    "Scanner",
    "TreeScope",
    "cached_ids",
    "in_scope",
    "known_cache",
    "load_cache",
    "load_legacy_cache",
]
