"""Store layer: the folder that holds the history (objects, metadata, locks, caches)."""

from __future__ import annotations

from ._meta import ChangeRow, OpRow, TouchRow, TurnRow
from ._objects import ObjectStore
from ._store import FORMAT_VERSION, Store, default_store_path, moved_here, read_marker, rehome

__all__ = [
    "FORMAT_VERSION",
    "ChangeRow",
    "ObjectStore",
    "OpRow",
    "Store",
    "TouchRow",
    "TurnRow",
    "default_store_path",
    "moved_here",
    "read_marker",
    "rehome",
]
