"""Scan layer: the folders a scan lists again, from the changes a watcher or a check names."""

from __future__ import annotations

from collections.abc import Collection, Iterable


def with_parents(paths: Iterable[str]) -> set[str]:
    """Return the folders to list again: each named folder and every folder above it."""
    out: set[str] = set()
    for p in paths:
        while p not in out:
            out.add(p)
            if not p:
                break
            p = p.rpartition("/")[0]
    return out


def to_list(named: Collection[str], known: Collection[str]) -> tuple[set[str], set[str]]:
    """Return the folders a hinted scan revisits, and those of them above a change only.

    ``named`` are the paths a watcher named (folders, or any path: its folder is named
    then), ``known`` the folders the cache holds. A folder above a change is one no
    named path is in: what it holds is as it was but for its subfolders' trees.
    """
    revisit = with_parents(named)
    return revisit, revisit.difference(named, (_folder_of(p, known) for p in named))


def _folder_of(path: str, known: Collection[str]) -> str:
    """The nearest folder the cache knows at or above a path (a file, a new folder)."""
    while path and path not in known:
        path = path.rpartition("/")[0]
    return path
