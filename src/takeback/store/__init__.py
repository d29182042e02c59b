"""Store layer: where the history lives (a folder, or a PostgreSQL database), behind one seam."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._where import default_store_path
from ._api import Meta, Objects, Store
from ._copy import COPY_TABLES, LOCAL_SETTINGS, SEQ_COLUMNS
from ._meta import MetaStore
from ._open import find_database_root, is_database_url, local_store_path, open_store
from ._pg_address import StoreAddress
from ._rows import ChangeRow, ObjectRow, OpRow, Seqs, TouchRow, TurnRow
from ._sqlite import reclaim
from ._sqlite_objects import ObjectStore
from ._store import (
    FORMAT_VERSION,
    RESERVE_BYTES,
    FolderStore,
    HeldDatabases,
    disk_free,
    disk_usage,
    hold_databases,
    make_reserve,
    moved_here,
    read_marker,
    rehome,
    release_reserve,
)

if TYPE_CHECKING:
    from ._pg_listen import PgListener


def __getattr__(name: str) -> Any:
    """Load ``PgListener`` on first use: it needs the database store's modules."""
    if name == "PgListener":
        from ._pg_listen import PgListener

        return PgListener
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "COPY_TABLES",
    "LOCAL_SETTINGS",
    "SEQ_COLUMNS",
    "FORMAT_VERSION",
    "RESERVE_BYTES",
    "ChangeRow",
    "FolderStore",
    "Meta",
    "MetaStore",
    "ObjectRow",
    "ObjectStore",
    "Objects",
    "OpRow",
    "PgListener",
    "Seqs",
    "Store",
    "StoreAddress",
    "TouchRow",
    "TurnRow",
    "default_store_path",
    "find_database_root",
    "is_database_url",
    "local_store_path",
    "disk_free",
    "disk_usage",
    "hold_databases",
    "HeldDatabases",
    "make_reserve",
    "moved_here",
    "open_store",
    "read_marker",
    "reclaim",
    "rehome",
    "release_reserve",
]
