"""Store layer: opening the store a ``--store`` value names (a folder or a database URL).

The PostgreSQL store's module (and its driver) load only when a URL names one: a folder
store's hook call pays nothing for it.
"""

from __future__ import annotations

import hashlib
import os

from ._api import Store
from ._pg_address import StoreAddress, address_of, is_address
from ._store import FolderStore


def is_database_url(spec: str | os.PathLike[str] | StoreAddress | None) -> bool:
    """Return whether a ``--store`` value names a PostgreSQL database, not a folder."""
    return is_address(spec)


def local_store_path(root: str, data_dir: str, address: StoreAddress | None = None) -> str:
    """Return this machine's folder for a workspace whose history is in a database.

    Keyed by the folder and the history: the database's server, port and name, and the
    workspace's key in it (``address``), so two histories of one folder (two keys, two
    databases) never share a scan cache or a hook's records. (A database made again at
    the same address is told apart inside the folder, by the id of its history.)
    """
    ident = os.fsencode(root) + (b"\0" + address.local_name().encode() if address else b"")
    digest = hashlib.sha256(ident).hexdigest()[:16]
    base = os.path.basename(root.rstrip("/")) or "root"
    return os.path.join(data_dir, "local", f"{base}-{digest}")


def open_store(spec: str | StoreAddress, root: str, *, local: str, create: bool) -> Store:
    """Open the store ``spec`` names for workspace ``root``.

    Args:
        spec: a store folder, or ``postgresql://...`` (``#key`` names the workspace).
        root: the workspace.
        local: this machine's folder for a database store (ignored for a folder).
        create: make it when missing.

    Raises:
        StoreError: and its kinds, as :meth:`FolderStore.open` and ``PgStore.open`` say.
    """
    if is_address(spec):
        from ._pg import PgStore

        return PgStore.open(address_of(spec), root, local=local, create=create)
    assert isinstance(spec, str)
    return FolderStore.open(spec, root, create=create)


def find_database_root(url: str | StoreAddress, here: str, data_dir: str) -> str | None:
    """Return the recorded workspace that ``here`` lies in, for a database store.

    This machine's local folders answer first (one exists for each workspace recorded
    or read here); else the database, in one query.
    """
    candidates = []
    cur = here
    while True:
        candidates.append(cur)
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    address = address_of(url)
    if address.key is None:
        for c in candidates:
            if os.path.isdir(local_store_path(c, data_dir, address)):
                return c
    from ._pg import find_workspace

    return find_workspace(address, candidates)
