"""Store layer: where the history lives (a folder, or a PostgreSQL database), behind one seam."""

from __future__ import annotations

from ._api import Meta, Objects, Store
from ._copy import COPY_TABLES, LOCAL_SETTINGS
from ._meta import ChangeRow, MetaStore, OpRow, TouchRow, TurnRow
from ._objects import ObjectStore
from ._open import find_database_root, is_database_url, local_store_path, open_store
from ._store import (
    FORMAT_VERSION,
    FolderStore,
    default_store_path,
    moved_here,
    read_marker,
    rehome,
)

__all__ = [
    "COPY_TABLES",
    "LOCAL_SETTINGS",
    "FORMAT_VERSION",
    "ChangeRow",
    "FolderStore",
    "Meta",
    "MetaStore",
    "ObjectStore",
    "Objects",
    "OpRow",
    "Store",
    "TouchRow",
    "TurnRow",
    "default_store_path",
    "find_database_root",
    "is_database_url",
    "local_store_path",
    "moved_here",
    "open_store",
    "read_marker",
    "rehome",
]
