"""Scan layer: whether one path is in scope, without walking the whole workspace.

Used where a single file is named (``touch``, ``undo --file``): the same rules as the walk,
applied along the path from the root.
"""

from __future__ import annotations

import os

from ._gitindex import GitIndex
from ._ignore import IgnoreRules


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return None


def in_scope(root: str, rel: str, *, exclude_env: bool = True, is_dir: bool = False,
             exclude: tuple[str, ...] = ()) -> bool:
    """Return whether the workspace-relative path ``rel`` is recorded by a snapshot.

    Args:
        root: the workspace root.
        rel: the path, relative to the root, '/'-separated.
        exclude_env: leave ``.env`` and ``.env.*`` out.
        is_dir: whether the path itself is a folder.
        exclude: absolute paths never in scope (the store).
    """
    parts = rel.split("/")
    if ".git" in parts:
        return False
    full = os.path.join(root, rel)
    for ex in exclude:
        if full == ex or full.startswith(ex.rstrip("/") + "/"):
            return False
    rules = IgnoreRules.for_root(root, exclude_env=exclude_env)
    index: GitIndex | None | bool = False
    here = ""
    for i, part in enumerate(parts):
        folder = os.path.join(root, here) if here else root
        rules = rules.descend(here, _read(os.path.join(folder, ".gitignore")),
                              _read(os.path.join(folder, ".takebackignore")))
        path = f"{here}/{part}" if here else part
        last = i == len(parts) - 1
        if rules.ignored(path, is_dir if last else True):
            if index is False:
                index = GitIndex.load(root)
            if not isinstance(index, GitIndex):
                return False
            if last and not is_dir:
                return index.is_tracked(path)
            if not index.has_tracked_under(path):
                return False
            # An ignored folder git tracks files in: only tracked paths inside count.
            return index.is_tracked(rel) if not is_dir else index.has_tracked_under(rel)
        here = path
    return True
