"""Ops layer: gc's sweep: the doomed objects deleted in short exclusive slices.

Snapshots go on while gc sweeps; they wait only for a slice. :class:`Holds` takes the
store's exclusive lock one slice at a time and times each hold. :class:`Sweep` keeps
the doomed list up to date with what the store reaches now: before each slice, and
again first thing inside it, it marks every snapshot, kept state and op now in the store,
and the scan cache when its token changed (``_mark.Marked``). An object reached again (a
snapshot that found a doomed blob or tree stored and named it, storing nothing) leaves
the doomed list with the chain of bases it needs; an object stored since the mark is
never in it, and its bases (read row by row, ``Objects.bases``) leave it too. Every row
stored since gc's fence, named by anything or not, is kept with its bases too
(``Objects.stored_after``). Then it deletes batches, deepest delta first, for about
``SLICE_SECONDS``. The order of the steps around it is ``_gc``'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from ..store import Store
from ._keep import GcPlan
from ._mark import Marked, op_states, state_oid

#: an exclusive slice deletes objects for about this long (seconds), then lets writers in
SLICE_SECONDS = 0.2
#: objects deleted per transaction within a slice
_SLICE_BATCH = 1024
#: the pause between two slices (seconds): snapshots waiting for the lock take it
BETWEEN_SLICES = 0.005


class Sweep:
    """The doomed objects, kept up to date with what the store reaches while gc sweeps.

    Only ever shrinks: an object the mark found unreached but that is reached again (a
    snapshot that found its blob stored and named it) leaves the list with every base it
    needs; a new object is never in it, and its bases leave it.
    """

    def __init__(self, store: Store, p: GcPlan, since: int) -> None:
        self.store = store
        #: where the order of stored rows stood at gc's fence, then after each slice
        self.since = since
        self.index = p.index
        self.marked = p.marked or Marked()
        self.order = p.objects
        self.doomed = set(p.objects)
        self.pos = 0
        self.deleted = 0
        self.freed = 0
        self.kept_again = 0

    def remark(self, drop: GcPlan | None) -> None:
        """Mark what the store's rows and scan cache reach now.

        Under the shared lock (snapshots going on), it marks most of what they added;
        then under the exclusive lock, before anything is deleted, the rest.

        Args:
            drop: the history rows about to be deleted (their reach is not marked), or
                None once they are gone.
        """
        store, meta, marked = self.store, self.store.meta, self.marked
        gone_snaps = set(drop.snapshots) if drop else set()
        gone_turns = set(drop.turns) if drop else set()
        gone_sessions = set(drop.sessions) if drop else set()
        gone_ops = set(drop.ops) if drop else set()
        trees = [
            tree
            for sid, tree, _at, _kind, session in meta.snapshot_rows()
            if sid not in gone_snaps and session not in gone_sessions
        ]
        states: list[str | None] = [
            st
            for sess, n, st in meta.recorded_states()
            if (sess, n) not in gone_turns and sess not in gone_sessions
        ]
        for op, sess, _at in meta.all_ops():
            if op.id not in gone_ops and sess not in gone_sessions:
                states.extend(op_states(op.data))
        blobs = {o for o in map(state_oid, states) if o}
        if not (drop is not None and drop.drop_cache) and marked.cache_changed(meta):
            cache_trees, cache_blobs = marked.cache_ids(meta)
            trees.extend(cache_trees)
            blobs |= cache_blobs
        again_trees, again_blobs = marked.stored_since(store)
        trees.extend(again_trees)
        new = marked.walk(store, trees, blobs, self.index)
        new.extend(again_blobs)
        self.keep(new)

    def keep(self, reached: Iterable[str]) -> None:
        """Take reached objects, and the delta bases each needs, off the doomed list."""
        unknown: list[str] = []
        for oid in reached:
            if oid in self.index:
                self._keep_chain(oid)
            else:
                unknown.append(oid)
        seen: set[str] = set()
        # Objects stored since the index was read: their bases are read row by row.
        while unknown:
            seen.update(unknown)
            bases = self.store.objects.bases(unknown)
            unknown = []
            for base in bases.values():
                if base is None:
                    continue
                if base in self.index:
                    self._keep_chain(base)
                elif base not in seen:
                    unknown.append(base)

    def keep_stored(self) -> None:
        """Keep every row stored since :attr:`since` and the delta chain each needs.

        Under the exclusive lock, before anything is deleted. A row no snapshot or cache
        names (a scan that died after storing it) is kept too: it is newer than the
        index, and a later snapshot of the same bytes would name it, stored already. The
        rows of one range query: their bases need no lookup row by row.
        """
        rows = self.store.objects.stored_after(self.since)
        new = {oid for oid, _base in rows}
        unknown: list[str] = []
        for oid, base in rows:
            if oid in self.index:
                self._keep_chain(oid)
            elif base is not None and base not in new:
                if base in self.index:
                    self._keep_chain(base)
                else:
                    unknown.append(base)
        if unknown:
            self.keep(unknown)

    def _keep_chain(self, oid: str | None) -> None:
        # An object that stays has every base it needs (rewritten whole, or its chain
        # kept): the walk down stops at the first one that stays.
        while oid is not None and oid in self.doomed:
            self.doomed.discard(oid)
            self.kept_again += 1
            row = self.index.get(oid)
            oid = row.base if row is not None else None

    def delete(self, until: float) -> bool:
        """Delete doomed objects in order until the clock passes ``until``; True when done.

        Under the exclusive lock: first what was stored since the last slice is kept
        (:meth:`keep_stored`); after the deletions, :attr:`since` is read again (a
        folder store numbers a new row one past the greatest left).
        """
        self.keep_stored()
        try:
            return self._delete(until)
        finally:
            self.since = self.store.objects.stored_mark()

    def _delete(self, until: float) -> bool:
        order = self.order
        while self.pos < len(order):
            batch: list[str] = []
            while self.pos < len(order) and len(batch) < _SLICE_BATCH:
                oid = order[self.pos]
                self.pos += 1
                if oid in self.doomed:
                    batch.append(oid)
            if batch:
                self.store.objects.delete(batch)
                self.doomed.difference_update(batch)
                self.deleted += len(batch)
                self.freed += sum(self.index[o].stored for o in batch)
            if time.monotonic() >= until:
                break
        return self.pos >= len(order)


class Holds:
    """The exclusive lock taken in slices, each hold timed."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.total = 0.0
        self.longest = 0.0
        self.count = 0

    @contextmanager
    def exclusive(self) -> Iterator[float]:
        with self.store.lock(exclusive=True):
            t = time.monotonic()
            try:
                yield t
            finally:
                held = time.monotonic() - t
                self.total += held
                self.longest = max(self.longest, held)
                self.count += 1
