"""Scan layer: whether one path is in scope, without walking the whole workspace.

Used where a single file is named (``touch``, ``undo --file``): the same rules as the walk,
applied along the path from the root.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .._fs import read_regular
from ..model import DIR, FILE, Tree
from ._gitindex import GitIndex
from ._ignore import IgnoreRules


def _read(path: str) -> bytes | None:
    return read_regular(path, limit=1 << 20)


def in_scope(
    root: str,
    rel: str,
    *,
    exclude_env: bool = True,
    is_dir: bool = False,
    exclude: tuple[str, ...] = (),
) -> bool:
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
        rules = rules.descend(
            here,
            _read(os.path.join(folder, ".gitignore")),
            _read(os.path.join(folder, ".takebackignore")),
        )
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


class TreeScope:
    """Whether paths are in scope in a recorded state, by the ignore files of its tree.

    A path absent from a snapshot may have been absent, or ignored then. A restore to that
    snapshot must remove only the first kind: what the state's own rules leave out was
    never part of it. ``info/exclude``, the built-in rules and git's index are read from
    the workspace as it is now.
    """

    def __init__(
        self,
        root: str,
        tree: str,
        *,
        get_tree: Callable[[str], Tree],
        read_blob: Callable[[str], bytes],
        exclude_env: bool = True,
    ) -> None:
        self._root = root
        self._tree = tree
        self._get_tree = get_tree
        self._read = read_blob
        self._base = IgnoreRules.for_root(root, exclude_env=exclude_env)
        self._rules: dict[str, tuple[IgnoreRules, str | None]] = {}
        self._index: GitIndex | None | bool = False

    def _inside(self, folder: str) -> tuple[IgnoreRules, str | None]:
        """Rules in force inside ``folder`` (its own ignore files included), and its tree."""
        got = self._rules.get(folder)
        if got is not None:
            return got
        tree_id: str | None
        if folder == "":
            rules, tree_id = self._base, self._tree
        else:
            parent, _, name = folder.rpartition("/")
            rules, parent_tree = self._inside(parent)
            sub = self._get_tree(parent_tree).get(name) if parent_tree else None
            tree_id = sub.oid if sub is not None and sub.kind == DIR else None
        tree = self._get_tree(tree_id) if tree_id else {}
        files: list[bytes | None] = []
        for name in (".gitignore", ".takebackignore"):
            e = tree.get(name)
            files.append(self._read(e.oid) if e is not None and e.kind == FILE else None)
        got = (rules.descend(folder, files[0], files[1]), tree_id)
        self._rules[folder] = got
        return got

    def ignored(self, rel: str, *, is_dir: bool, index: bool = True) -> bool:
        """Return whether the state's rules leave ``rel`` (or a folder above it) out.

        Args:
            rel: the path.
            is_dir: whether it is a folder.
            index: let git's index (as it is now) bring a tracked path back in, as git
                does; false asks whether the rules alone leave it out, for a question
                about the past (a file force-added since was ignored then).
        """
        parts = rel.split("/")
        for i in range(len(parts)):
            here = "/".join(parts[:i])
            path = "/".join(parts[: i + 1])
            rules, _tree = self._inside(here)
            last = i == len(parts) - 1
            if rules.ignored(path, is_dir if last else True):
                if not index:
                    return True
                if self._index is False:
                    self._index = GitIndex.load(self._root)
                git = self._index
                if isinstance(git, GitIndex) and (
                    git.is_tracked(rel) or (is_dir and git.has_tracked_under(rel))
                ):
                    return False
                return True
        return False
