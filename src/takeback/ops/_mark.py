"""Ops layer: gc's mark: every object what the store keeps reaches.

Every tree and blob a kept snapshot, state or cache entry reaches is kept. The mark
(:class:`Marked`) only grows: gc marks once from the kept history (``_keep``), and
marks again before each step that deletes (``_sweep``), walking only from trees it has
not reached before (a reached tree's subtrees and blobs are reached with it). What it
never reached is what gc may remove.

fsck and du ask the same questions: which blob a stored state names (:func:`state_oid`),
which states an op wrote (:func:`op_states`), and what a set of trees reaches
(:func:`reachable`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Container, Iterable
from typing import Any

from ..errors import StoreCorruptError
from ..model import FILE, LINK, decode_state, tree_links
from ..scan import CACHE_KEY, cached_ids
from ..store import Meta, Store
from ._snapshot import stored_cache

#: objects kept once read while gc walks the trees (about 1 KB each for a tree)
_WALK_CACHE = 16384


def state_oid(text: str | None) -> str | None:
    """The object a stored state names (a file's or link's blob), if any."""
    if not text:
        return None
    try:
        e = decode_state(text)
    except ValueError:
        return None
    return e.oid if e is not None and e.kind in (FILE, LINK) and e.oid else None


def op_states(data: dict[str, Any]) -> Iterable[str | None]:
    wrote = data.get("wrote")
    if isinstance(wrote, dict):
        for v in wrote.values():
            if isinstance(v, str):
                yield v


def reachable(
    store: Store, trees: Iterable[str], blobs: Iterable[str], index: Container[str]
) -> set[str]:
    """Return every object the trees reach (themselves, their subtrees and blobs) and blobs.

    A tree that is not in the store is left out (fsck names it); its id is still marked,
    so nothing of that name is removed.
    """
    marked = Marked()
    marked.walk(store, trees, blobs, index)
    return marked.reach


class Marked:
    """What gc's mark reached, grown by each re-mark; never shrinks.

    Attributes:
        reach: every id reached (a reached tree's subtrees and blobs are in it too, so a
            re-mark walks only from trees not in it).
        absent_trees: trees reached but not stored when walked (not walked yet).
        absent_blobs: blobs reached but not stored when seen.
        cache_token: the scan cache's header token when its ids were read last.
        cache_rows: digests of the scan cache's detailed rows already read.
    """

    def __init__(self) -> None:
        self.reach: set[str] = set()
        self.absent_trees: set[str] = set()
        self.absent_blobs: set[str] = set()
        self.cache_token: bytes | None = None
        self.cache_rows: set[bytes] = set()

    def cache_ids(self, meta: Meta) -> tuple[set[str], set[str]]:
        """Return the ids the scan cache names, reading only detailed rows not read before."""
        self.cache_token = meta.get_kv(CACHE_KEY)
        trees, _ = cached_ids(stored_cache(meta)[1], ())
        fresh = []
        for raw in meta.dircache_rows():
            digest = hashlib.blake2b(raw, digest_size=16).digest()
            if digest not in self.cache_rows:
                self.cache_rows.add(digest)
                fresh.append(raw)
        _, blobs = cached_ids(None, fresh)
        return trees, blobs

    def cache_changed(self, meta: Meta) -> bool:
        """Whether the scan cache was saved since its ids were read (a token per save)."""
        token = meta.get_kv(CACHE_KEY)
        return token is None or token != self.cache_token

    def walk(
        self, store: Store, trees: Iterable[str], blobs: Iterable[str], index: Container[str]
    ) -> list[str]:
        """Mark what the trees and blobs reach, walking only trees not reached before.

        Args:
            store: the open store.
            trees: root trees.
            blobs: root blobs.
            index: the ids the mark's index holds; an id outside it is looked up.

        Returns:
            The ids newly reached.

        Raises:
            StoreCorruptError: a tree cannot be read.
        """
        reach = self.reach
        new: list[str] = []
        objs = store.objects
        for b in blobs:
            if b and b not in reach:
                reach.add(b)
                new.append(b)
                if b not in index and not objs.has(b):
                    self.absent_blobs.add(b)
        stack = [t for t in trees if t and t not in reach]
        get = objs.get
        # A folder's versions are deltas of each other: each base read once, then kept.
        objs.raw_cache = max(objs.raw_cache, _WALK_CACHE)
        while stack:
            tid = stack.pop()
            if tid in reach:
                continue
            reach.add(tid)
            new.append(tid)
            if tid not in index and not objs.has(tid):
                self.absent_trees.add(tid)
                continue
            try:
                subtrees, files = tree_links(get(tid))
            except ValueError as e:
                raise StoreCorruptError(
                    f"store tree {tid[:12]} is malformed", path=store.path
                ) from e
            for f in files:
                if f not in reach:
                    reach.add(f)
                    new.append(f)
                    if f not in index and not objs.has(f):
                        self.absent_blobs.add(f)
            stack.extend(t for t in subtrees if t not in reach)
        return new

    def stored_since(self, store: Store) -> tuple[list[str], list[str]]:
        """Return the absent trees and blobs stored since, no longer counted absent.

        The trees leave ``reach`` so that a walk goes through them.
        """
        objs = store.objects
        trees = [t for t in self.absent_trees if objs.has(t)]
        blobs = [b for b in self.absent_blobs if objs.has(b)]
        for t in trees:
            self.absent_trees.discard(t)
            self.reach.discard(t)
        self.absent_blobs.difference_update(blobs)
        return trees, blobs
