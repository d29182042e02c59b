"""API layer: where a workspace's store is: found, made, moved and adopted.

The default store lives in the user's data folder, one per workspace keyed by its real
path; a ``postgresql://`` store keeps a local folder there too. This module finds the
recorded workspace a folder lies in (as git finds its top folder) and the default store a
moved folder left behind, and copies a history between stores. ``Workspace`` has its
store from :class:`StoreHome`: opened (or made) on first use, the moved one found and
adopted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import ops
from ._where import recorded_root
from .errors import StoreCorruptError, StoreMissingError, UsageError
from .store import (
    Store,
    StoreAddress,
    find_database_root,
    is_database_url,
    local_store_path,
    moved_here,
    open_store,
    read_marker,
    rehome,
)

if TYPE_CHECKING:
    from ._likeness import Likeness


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
    return recorded_root(here, data_dir or default_data_dir()) or here


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


class StoreHome:
    """Where a workspace's store is, and the store once open (``Workspace`` is one).

    Attributes:
        root: the workspace's folder (absolute and real).
        store_path: the store's folder (a database store's local folder).
        store_url: the database a shared store is in (None: a folder store).
        last_likeness: how much the folder looked like the recorded one at the last
            ``adopt``.
    """

    root: str
    store_path: str
    store_url: StoreAddress | None
    last_likeness: Likeness | None
    _store: Store | None
    _data_dir: str | None
    _default_store: bool

    def close(self) -> None:
        """Close the store (given by ``Workspace``)."""
        raise NotImplementedError

    def open_store(self, *, create: bool = False) -> Store:
        """Return the open store, opening (or, with ``create``, making) it on first use.

        Raises:
            StoreMissingError: there is none and ``create`` is false.
            StoreError: the store is unusable (version, root, damage).
        """
        if self._store is None:
            try:
                self._store = open_store(
                    self.store_url or self.store_path,
                    self.root,
                    local=self.store_path,
                    create=create,
                )
            except StoreMissingError as e:
                moved = self.moved_store() if self._default_store else None
                if moved is None:
                    raise
                raise StoreMissingError(
                    f"{e.message}; this folder looks like {moved[1]}, moved: adopt its "
                    f"history with `takeback adopt {moved[0]}`",
                    path=self.store_path,
                ) from e
        return self._store

    def moved_store(self) -> tuple[str, str] | None:
        """Return (store, old root) of this folder's history from before it was moved.

        A default store (in the user's data folder) whose recorded folder no longer
        exists and was this one (same device and inode); None when there is none.
        """
        return find_moved_store(self.root, self._data_dir or default_data_dir())

    def adopt(
        self,
        store: str | os.PathLike[str] | None = None,
        *,
        force: bool = False,
        dry_run: bool = False,
    ) -> str:
        """Make a moved workspace's history this folder's (nothing in the folder is written).

        The store's ``store.json`` is given this root; a default store (in the user's
        data folder) is renamed to this folder's default store, where commands look.
        The folder must look like the recorded one (see ``_likeness.py``): a reused
        inode number alone never attaches another project's history.

        Args:
            store: the store to adopt (default: the one :meth:`moved_store` finds).
            force: adopt it even when this folder does not look like the recorded one.
            dry_run: check and return where it would be, changing nothing.

        Returns:
            Where the adopted store is now (would be, with ``dry_run``).

        Raises:
            UsageError: no moved store found, its folder still exists (a copy, not a
                move), this folder has a store already, or it does not look like the
                recorded folder (without ``force``).
            StoreCorruptError: the store's marker is unreadable.
        """
        self.close()
        if self.store_url is not None:
            raise UsageError(
                "a database store finds a workspace by its key, not by its folder: "
                "nothing to adopt (name the key with #key after the address)"
            )
        if store is None:
            found = self.moved_store()
            if found is None:
                raise UsageError(f"no moved workspace's store found for {self.root}")
            path = found[0]
        else:
            path = os.path.realpath(os.fspath(store))
        info = read_marker(path)
        if info is None:
            raise UsageError(f"not a takeback store: {path}")
        old = str(info["root"])
        if old == self.root:
            return path
        if os.path.lexists(old):
            raise UsageError(
                f"store {path} belongs to {old}, which still exists: a copy of a "
                "workspace does not take its history (snapshot the copy instead)"
            )
        base = os.path.join(self._data_dir or default_data_dir(), "workspaces")
        target = path
        if self._default_store and os.path.dirname(path) == base:
            target = self.store_path
            if target != path and os.path.lexists(target):
                raise UsageError(
                    f"this folder has a store already ({target}); remove it to adopt {path}"
                )
        from ._likeness import likeness

        self.last_likeness = like = likeness(path, old, self.root)
        if not like.alike and not force:
            raise UsageError(
                f"{self.root} does not look like {old}, whose history {path} holds "
                f"({like.describe()}); adopt it anyway with --force"
            )
        if dry_run:
            return target
        # Renamed first: a failure between the two leaves a store at this folder's key
        # that names the old root, which the next command recognizes (and offers again).
        if target != path:
            os.rename(path, target)
        rehome(target, self.root)
        self.store_path = target
        return target

    def has_store(self) -> bool:
        """Return whether a store exists for this workspace."""
        if self.store_url is not None:
            try:
                self.open_store()
            except StoreMissingError:
                return False
            return True
        return os.path.exists(os.path.join(self.store_path, "store.json"))
