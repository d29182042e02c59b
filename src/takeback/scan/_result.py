"""Scan layer: what a scan returns: the root tree, the counts a snapshot records, the cache."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ScanResult:
    """What a scan found: the root tree and the counts a snapshot records."""

    tree: str
    files: int
    skipped: list[str]
    skipped_count: int
    duration_ms: int
    #: paths that could not be read (the first SKIPPED_NAMED), with why
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    unreadable_count: int = 0
    changed_dirs: int = 0
    hashed_files: int = 0
    #: The folder cache's rows to save once the objects are committed (None: the cache is
    #: as it was), with the header first; see ``_cache.py``.
    cache: dict[str, bytes | None] | None = None
    cache_rows: dict[str, bytes | None] = field(default_factory=dict)
    #: "service" (only the folders a watching service named were listed) or "full"
    mode: str = "full"
    #: why a full scan was taken, or how many folders the service named
    reason: str = ""
