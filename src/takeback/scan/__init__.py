"""Scan layer: reading the workspace (the walk, the ignore rules, the stat cache).

The watching service's watcher (``_watcher``, which loads inotify) is imported where it
is used, not here: a hook call never loads it. (The service's client, which a snapshot
asks what changed, is ``takeback._service_client``, below the library.)
"""

from __future__ import annotations

from ._cache import (
    CACHE_KEY,
    LEGACY_KEY,
    OLDER_KEY,
    FolderCache,
    cached_folders,
    cached_ids,
    inner_trees,
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
    "cached_folders",
    "cached_ids",
    "in_scope",
    "inner_trees",
    "known_cache",
    "load_cache",
    "load_legacy_cache",
]
