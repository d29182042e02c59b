"""Ops layer: the difference between two trees, skipping every folder they share."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .._fs import allow_deep_trees
from ..model import DIR, Entry, Tree, entry_state

#: (path, entry before, entry after); either side None when absent.
Delta = tuple[str, Entry | None, Entry | None]


def diff_trees(
    changes: Callable[[str | None, str | None], tuple[Tree, Tree]],
    old: str | None,
    new: str | None,
    prefix: str = "",
) -> Iterator[Delta]:
    """Yield every path whose entry differs between tree ``old`` and tree ``new``.

    ``changes`` returns the entries of two trees that differ (``Objects.tree_changes``:
    of two versions of a folder, only those are decoded). Folders appear as entries of
    kind ``d`` when they appear, vanish or change mode; a folder with the same tree id on
    both sides is not opened. Paths come parents first, in name order.
    """
    allow_deep_trees()
    if old == new:
        return
    a, b = changes(old, new)
    for name in sorted(a.keys() | b.keys()):
        path = prefix + name
        ea, eb = a.get(name), b.get(name)
        da = ea is not None and ea.kind == DIR
        db = eb is not None and eb.kind == DIR
        if da and db:
            assert ea is not None and eb is not None
            if ea.mode != eb.mode:
                yield path, ea, eb
            yield from diff_trees(changes, ea.oid, eb.oid, path + "/")
            continue
        if da:
            assert ea is not None
            yield path, ea, None
            yield from diff_trees(changes, ea.oid, None, path + "/")
            if eb is not None:
                yield path, None, eb
            continue
        if db:
            assert eb is not None
            if ea is not None:
                yield path, ea, None
            yield path, None, eb
            yield from diff_trees(changes, None, eb.oid, path + "/")
            continue
        if entry_state(ea) != entry_state(eb) or (
            ea is not None and eb is not None and ea.size != eb.size
        ):
            yield path, ea, eb


def lookup(get_tree: Callable[[str], Tree], tree: str, path: str) -> Entry | None:
    """Return the entry at ``path`` in a tree, or None."""
    parts = path.split("/")
    cur = get_tree(tree)
    for i, part in enumerate(parts):
        e = cur.get(part)
        if e is None:
            return None
        if i == len(parts) - 1:
            return e
        if e.kind != DIR:
            return None
        cur = get_tree(e.oid)
    return None


def under(path: str, filters: list[str] | None) -> bool:
    """Return whether ``path`` is one of ``filters`` or lies below one (None: everything)."""
    if filters is None:
        return True
    for f in filters:
        if f in ("", ".") or path == f or path.startswith(f + "/"):
            return True
    return False
