"""Scan layer: reading the workspace (the walk, the ignore rules, the stat cache)."""

from __future__ import annotations

from ._scope import TreeScope, in_scope
from ._walk import CACHE_KEY, GRANULARITY_NS, Scanner, ScanResult, cached_ids

__all__ = [
    "CACHE_KEY",
    "GRANULARITY_NS",
    "ScanResult",
    "Scanner",
    "TreeScope",
    "cached_ids",
    "in_scope",
]
