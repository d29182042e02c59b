"""Ops layer: gc and purge: removing what the store no longer keeps, in a crash-safe order.

What stays is decided elsewhere: the retention policy in ``_policy``, the history rows
it keeps (and a purge's) in ``_keep``, the objects they reach in ``_mark``; the sweep's
slices are ``_sweep``'s. This module holds the order of the steps and the locks each
step takes, and what gc returns.

The order. Snapshots go on while gc marks; they wait only for short exclusive slices,
and nothing kept is ever lost (each step commits; a crash between or inside any of them
leaves a store that passes fsck and has lost nothing kept):

0. A fence: the exclusive lock taken and let go at once, so that every snapshot begun
   before gc (which may have read an older scan cache, and may take a delta base from
   it) has ended before the mark reads the cache.
1. The mark, under the *shared* lock (snapshots, touches and turns go on meanwhile):
   the history plan, the scan cache's ids (and its token), every object's row
   (``Objects.index``), and the walk from every kept tree. What it finds unreached is
   *doomed*, deepest delta first.
2. Still under the shared lock, kept objects whose delta base is doomed are stored whole
   (``rewrite_whole``). This needs no exclusive hold: the row keeps its id and its bytes
   (a delta or the whole, each batch one transaction), so a reader gets either form and
   both are right; a writer only ever inserts a row that is not there; and the list
   only shrinks, so a base this step did not free is never deleted (one it freed for
   nothing, when its base is kept after all, costs room, not data).
3. The first exclusive slice: the history plan made again from the rows as they are
   now, then a re-mark, then the history rows go in one transaction (what refers first,
   then snapshots).
4. Exclusive slices, each deleting batches for about ``SLICE_SECONDS`` (then the lock is
   let go so that waiting snapshots run). Before each slice (and before step 3), a
   re-mark under the shared lock takes in most of what was recorded meanwhile, so that
   the slice's own finds little. Each slice first re-marks: every snapshot, kept
   state and op now in the store, and the scan cache when its token changed (only the
   rows not read before), walking only from trees not marked already (a marked tree's
   subtrees and blobs are marked with it). An object reached again (a snapshot that
   found a doomed blob or tree stored and named it, storing nothing) leaves the doomed
   list with the chain of bases it needs; an object stored since the mark is never in
   it, and its bases (read row by row, ``Objects.bases``) leave it too.
5. With no lock held, the store gives the room back (``Store.reclaim``: a folder store's
   SQLite incremental vacuum, a few pages per transaction; a database leaves it to
   autovacuum).

Objects named by nothing: a scan that dies during gc leaves the objects it stored, which
no row names and which are newer than gc's index. One may be a delta of a base only a
scan cache gc never saw named (saved and replaced between two of its reads, by scans
that wrote no snapshot); a later snapshot of the same bytes names it without storing it
again. So the store numbers its rows in the order they are stored
(``Objects.stored_mark``), gc reads the number at its fence, and before each slice that
deletes it keeps every row stored since, with the chain of bases each needs
(``Sweep.keep_stored``), and reads the number again after the slice. One gc runs at a
time (``Store.gc_lock``; a second waits): a folder store numbers a new row one past the
greatest left, so only deletions gc itself has seen may lower it.

``GcResult.longest_lock_ms`` is the longest exclusive hold (what a snapshot waits at
most), ``locked_ms`` all of them together. A dry run only plans, under the shared lock.

A shared store's other machines keep scan caches this gc cannot see: before any object
goes, step 3 raises the workspace's cache generation, and a machine whose cache was made
under an older one drops it (its next scan reads every file).

The store's own parts (listing ids, deleting rows, vacuum) are small methods of the
store seam (``store/_api.py``); what is reached, and why, is decided in ``_keep`` and
``_mark``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..store import ObjectRow, Store
from ._keep import GcPlan, plan
from ._policy import Policy
from ._sweep import BETWEEN_SLICES, SLICE_SECONDS, Holds, Sweep
from ._turns import shared_lock


@dataclass
class GcResult:
    """What gc or purge did (or, for a dry run, would do)."""

    dry_run: bool
    policy: Policy | None
    snapshots: int
    turns: int
    steps: int
    ops: int
    sessions: list[str]
    objects: int
    freed: int
    rewritten: int
    kept_objects: int
    size_before: int
    size_after: int
    duration_ms: int = 0
    #: how long the store's exclusive lock was held in all (ms), over every slice
    locked_ms: int = 0
    #: the longest single hold of the exclusive lock (ms): how long a snapshot waited at most
    longest_lock_ms: int = 0
    #: how many times the exclusive lock was taken
    slices: int = 0

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``gc --json``, ``purge --json``)."""
        return {
            "dry_run": self.dry_run,
            "policy": self.policy.to_json() if self.policy else None,
            "removed": {
                "snapshots": self.snapshots,
                "turns": self.turns,
                "steps": self.steps,
                "ops": self.ops,
                "sessions": self.sessions,
                "objects": self.objects,
            },
            "freed_bytes": self.freed,
            "rewritten_objects": self.rewritten,
            "kept_objects": self.kept_objects,
            "size_before": self.size_before,
            "size_after": self.size_after,
            "duration_ms": self.duration_ms,
            "locked_ms": self.locked_ms,
            "longest_lock_ms": self.longest_lock_ms,
            "lock_slices": self.slices,
        }


def _keep_bases(failed: Iterable[str], index: dict[str, ObjectRow], out: GcPlan) -> None:
    """Keep the delta chains of objects that could not be rewritten whole."""
    keep: set[str] = set()
    for oid in failed:
        base = index[oid].base if oid in index else None
        while base is not None and base not in keep and base in index:
            keep.add(base)
            base = index[base].base
    if keep:
        out.objects = [o for o in out.objects if o not in keep]
        out.freed = sum(index[o].stored for o in out.objects)


def gc(
    store: Store,
    policy: Policy,
    *,
    dry_run: bool = False,
    now: float | None = None,
    purge: Iterable[str] | None = None,
    purge_all: bool = False,
    pause: Callable[[str], None] | None = None,
) -> GcResult:
    """Remove what the policy (or a purge) no longer keeps; see the module's docstring.

    Args:
        store: the open store.
        policy: the retention policy.
        dry_run: only say what would go.
        now: the time the day limit counts from (default: now).
        purge: remove these sessions whole, and what only they reached.
        purge_all: remove every session and snapshot.
        pause: called between the steps with the next one's name (``rewrite``,
            ``history``, ``objects``, ``reclaim``), never holding the exclusive lock
            (``rewrite``: the shared one): a crash test stops the process there, a
            concurrency test takes a snapshot there. Called with ``wait`` first when
            another gc runs (this one waits for it to end).

    Raises:
        UsageError: a purge names the session of an interrupted restore.
        StoreError: the store cannot be written (what was done before stays done).
    """
    t0 = time.monotonic()
    size_before = store.size_on_disk()
    step = pause or (lambda _name: None)
    if dry_run:
        with shared_lock(store):
            p = plan(store, policy, now=now, purge=purge, purge_all=purge_all)
        return _result(
            p,
            policy,
            purge,
            purge_all,
            dry_run=True,
            size_before=size_before,
            size_after=size_before,
            t0=t0,
            rewritten=len(p.rewrite),
        )
    with store.gc_lock(on_wait=lambda: step("wait")):
        return _collect(store, policy, now, purge, purge_all, step, t0, size_before)


def _collect(
    store: Store,
    policy: Policy,
    now: float | None,
    purge: Iterable[str] | None,
    purge_all: bool,
    step: Callable[[str], None],
    t0: float,
    size_before: int,
) -> GcResult:
    """Run gc holding the gc lock (see :func:`gc`)."""
    holds = Holds(store)
    # A fence: every snapshot that began before gc (and read a scan cache older than the
    # one the mark reads) has ended by the time the mark begins. Every row stored from
    # here on is kept, with its delta bases, whatever names it (``Sweep.keep_stored``).
    with holds.exclusive():
        since = store.objects.stored_mark()
    with store.lock(exclusive=False):
        p = plan(store, policy, now=now, purge=purge, purge_all=purge_all)
        rewritten = 0
        if p.rewrite:
            # Same bytes, stored whole: a reader gets the old row or the new, both right,
            # so this needs no exclusive hold (see the module's docstring).
            step("rewrite")
            failed = store.objects.rewrite_whole(p.rewrite)
            rewritten = len(p.rewrite) - len(failed)
            _keep_bases(failed, p.index, p)
    sweep = Sweep(store, p, since)
    step("history")
    # What was recorded during the mark is marked under the shared lock too, so that the
    # slice's own re-mark finds little (only what came between the two).
    with store.lock(exclusive=False):
        sweep.remark(p)
    with holds.exclusive():
        # The history as it is now: snapshots, turns and ops recorded since the mark
        # count, and the rows a kept one names stay.
        again = plan(store, policy, now=now, purge=purge, purge_all=purge_all, objects=False)
        sweep.remark(again)
        store.meta.drop_history_tx(
            turns=again.turns,
            steps=again.steps,
            ops=again.ops,
            sessions=again.sessions,
            snapshots=again.snapshots,
            scan_cache=again.drop_cache,
            last_gc=repr(time.time()),
            objects_go=bool(sweep.doomed),
        )
    step("objects")
    done = not sweep.doomed
    while not done:
        with store.lock(exclusive=False):
            sweep.remark(None)
        with holds.exclusive() as began:
            sweep.remark(None)
            done = sweep.delete(began + SLICE_SECONDS)
        if not done:
            time.sleep(BETWEEN_SLICES)
    step("reclaim")
    store.reclaim()
    r = _result(
        again,
        policy,
        purge,
        purge_all,
        dry_run=False,
        size_before=size_before,
        size_after=store.size_on_disk(),
        t0=t0,
        rewritten=rewritten,
    )
    r.objects = sweep.deleted
    r.freed = sweep.freed
    r.kept_objects = len(p.index) - sweep.deleted
    r.locked_ms = int(holds.total * 1000)
    r.longest_lock_ms = int(holds.longest * 1000)
    r.slices = holds.count
    return r


def _result(
    p: GcPlan,
    policy: Policy,
    purge: Iterable[str] | None,
    purge_all: bool,
    *,
    dry_run: bool,
    size_before: int,
    size_after: int,
    t0: float,
    rewritten: int,
) -> GcResult:
    return GcResult(
        dry_run=dry_run,
        policy=None if purge is not None or purge_all else policy,
        snapshots=len(p.snapshots),
        turns=len(p.turns),
        steps=len(p.steps),
        ops=len(p.ops),
        sessions=p.sessions,
        objects=len(p.objects),
        freed=p.freed,
        rewritten=rewritten,
        kept_objects=p.kept_objects,
        size_before=size_before,
        size_after=size_after,
        duration_ms=int((time.monotonic() - t0) * 1000),
    )
