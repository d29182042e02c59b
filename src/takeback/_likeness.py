"""API layer: whether a folder looks like the workspace a store recorded.

A moved workspace is recognized by its folder's device and inode, but an inode number
is reused: after a project is deleted, a new folder nearby often gets it. Adopting a
history on the inode alone attached the old project's history to a new folder, and
``rewind --to start`` then deleted the new folder's files. So a folder must also look
like the recorded one: of the files in the store's last snapshot (up to ``SAMPLE``, in
tree order), at least half must be there, of the same kind and size.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from .model import DIR, FILE, LARGE, LINK
from .store import open_store

#: How many of the last snapshot's files are compared at most.
SAMPLE = 500


@dataclass(frozen=True)
class Likeness:
    """How much of a store's last snapshot a folder holds as recorded."""

    matched: int
    compared: int
    #: the folder has entries of its own (with nothing recorded to compare)
    folder_empty: bool

    @property
    def alike(self) -> bool:
        """Whether the folder looks like the recorded workspace."""
        if self.compared == 0:
            return self.folder_empty
        return self.matched * 2 >= self.compared

    def describe(self) -> str:
        """Say it in words, for people."""
        if self.compared == 0:
            return "the history has no files" + (
                "" if self.folder_empty else ", and this folder has some"
            )
        return f"{self.matched} of {self.compared} files of its last snapshot are here as recorded"


def likeness(store_path: str, recorded_root: str, root: str) -> Likeness:
    """Compare the folder ``root`` with the last snapshot of the store at ``store_path``.

    Args:
        store_path: the store's folder.
        recorded_root: the root the store records (it is opened as that root's).
        root: the folder that would adopt the history.

    Raises:
        StoreError: the store cannot be opened.
    """
    store = open_store(store_path, recorded_root, local=store_path, create=False)
    try:
        latest = store.meta.latest_snapshot()
        compared = matched = 0
        stack = [("", latest.tree)] if latest is not None else []
        while stack and compared < SAMPLE:
            prefix, oid = stack.pop(0)
            for name, entry in sorted(store.objects.get_tree(oid).items()):
                rel = prefix + name
                if entry.kind == DIR:
                    stack.append((rel + "/", entry.oid))
                    continue
                if entry.kind not in (FILE, LARGE, LINK) or compared >= SAMPLE:
                    continue
                compared += 1
                try:
                    st = os.lstat(os.path.join(root, rel))
                except OSError:
                    continue
                if entry.kind == LINK:
                    matched += stat.S_ISLNK(st.st_mode)
                else:
                    matched += stat.S_ISREG(st.st_mode) and st.st_size == entry.size
    finally:
        store.close()
    try:
        empty = not [n for n in os.listdir(root) if n != ".git"]
    except OSError:
        empty = False
    return Likeness(matched, compared, empty)
