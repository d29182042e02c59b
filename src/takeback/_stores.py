"""API layer: where a workspace's store is: found, made, moved and adopted.

The default store lives in the user's data folder, one per workspace keyed by its real
path; a ``postgresql://`` store keeps a local folder there too. This module finds the
recorded workspace a folder lies in (as git finds its top folder) and the default store a
moved folder left behind, and copies a history between stores; ``Workspace`` holds the
open store and calls these.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from . import ops
from .errors import StoreCorruptError, UsageError
from .store import (
    StoreAddress,
    default_store_path,
    find_database_root,
    is_database_url,
    local_store_path,
    moved_here,
    open_store,
    read_marker,
)


def default_data_dir() -> str:
    """Return the user's data folder for takeback (where default stores live)."""
    import platformdirs

    return str(platformdirs.user_data_dir("takeback", appauthor=False))


def find_root(
    start: str | os.PathLike[str],
    *,
    store: str | os.PathLike[str] | StoreAddress | None = None,
    data_dir: str | None = None,
) -> str:
    """Return the recorded workspace that ``start`` lies in, as git finds its top folder.

    With ``store`` given, its root when ``start`` is inside it; otherwise the nearest folder
    at or above ``start`` that has a default store. When nothing is found, ``start``
    itself (a new workspace).
    """
    here = os.path.realpath(os.fspath(start))
    if isinstance(store, str | StoreAddress) and is_database_url(store):
        return find_database_root(store, here, data_dir or default_data_dir()) or here
    if store is not None:
        assert not isinstance(store, StoreAddress)
        try:
            with open(os.path.join(os.fspath(store), "store.json"), "rb") as f:
                import json

                root = str(json.loads(f.read())["root"])
        except (OSError, ValueError, KeyError, TypeError):
            return here
        return root if here == root or here.startswith(root.rstrip("/") + "/") else here
    base = data_dir or default_data_dir()
    cur = here
    while True:
        if os.path.exists(os.path.join(default_store_path(cur, base), "store.json")):
            return cur
        parent = os.path.dirname(cur)
        if parent == cur:
            return here
        cur = parent


def copy_history(
    root: str | os.PathLike[str],
    source: str | os.PathLike[str] | StoreAddress,
    target: str | os.PathLike[str] | StoreAddress,
    *,
    data_dir: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ops.CopyResult:
    """Copy a workspace's whole history from one store to another, verifying every object.

    Either store may be a folder or a PostgreSQL database (``postgresql://...``); the
    target must hold no history for the workspace yet (a folder target is made). Every
    object is read from the source through its hash check, and once written, read back
    from a fresh opening of the target through its own.

    Args:
        root: the workspace.
        source: the store to copy from.
        target: the store to copy into.
        data_dir: where local folders live (default: the platform's user data folder).
        on_progress: called with (objects copied, objects in all).

    Raises:
        StoreMissingError: the source holds no history for the workspace.
        UsageError: the target already holds one, or source and target are the same.
        StoreCorruptError: an object fails its check (in the source, or once copied).
    """
    real = os.path.realpath(os.fspath(root))
    base = data_dir or default_data_dir()

    def spec(s: str | os.PathLike[str] | StoreAddress) -> str | StoreAddress:
        if isinstance(s, StoreAddress):
            return s
        text = os.fspath(s)
        return StoreAddress(text) if is_database_url(text) else os.path.realpath(text)

    src_spec, dst_spec = spec(source), spec(target)
    if src_spec == dst_spec:
        raise UsageError(f"source and target are the same store: {src_spec!s}")

    def local(s: str | StoreAddress) -> str:
        return local_store_path(real, base, s if isinstance(s, StoreAddress) else None)

    src = open_store(src_spec, real, local=local(src_spec), create=False)
    try:
        dst = open_store(dst_spec, real, local=local(dst_spec), create=True)
        try:
            result, oids = ops.copy_history(src, dst, on_progress=on_progress)
        finally:
            dst.close()
        fresh = open_store(dst_spec, real, local=local(dst_spec), create=False)
        try:
            result.verified = ops.verify_objects(fresh, oids)
            # Every row's objects, not only those listed: a row naming one not copied
            # is a copy that would fail later.
            missing = [
                p for p in ops.fsck(fresh).problems if not p.startswith("journal left behind")
            ]
            if missing:
                raise StoreCorruptError(
                    f"the copy in {dst_spec} is incomplete: {missing[0]}"
                    + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                    path=str(dst_spec),
                )
        finally:
            fresh.close()
    finally:
        src.close()
    return result


def find_moved_store(root: str, data_dir: str) -> tuple[str, str] | None:
    """Return (store, old root) of a default store whose workspace was moved to ``root``.

    The default stores under ``data_dir`` are read (their ``store.json`` only): the one
    whose recorded folder no longer exists and was this very folder (same device and
    inode) is it. None when there is none.
    """
    base = os.path.join(data_dir, "workspaces")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return None
    for name in names:
        path = os.path.join(base, name)
        info = read_marker(path)
        if info is not None and moved_here(info, root):
            return path, str(info["root"])
    return None
