"""Store layer: the folder that holds the history (objects, metadata, locks, caches)."""

from __future__ import annotations

from ._meta import ChangeRow, OpRow, TouchRow, TurnRow
from ._objects import ObjectRow, ObjectStore
from ._sqlite import reclaim
from ._store import (
    FORMAT_VERSION,
    RESERVE_BYTES,
    Store,
    default_store_path,
    disk_free,
    disk_usage,
    make_reserve,
    moved_here,
    read_marker,
    rehome,
    release_reserve,
)

__all__ = [
    "FORMAT_VERSION",
    "RESERVE_BYTES",
    "ChangeRow",
    "ObjectRow",
    "ObjectStore",
    "OpRow",
    "Store",
    "TouchRow",
    "TurnRow",
    "default_store_path",
    "disk_free",
    "disk_usage",
    "make_reserve",
    "moved_here",
    "read_marker",
    "reclaim",
    "rehome",
    "release_reserve",
]
