"""Ops layer: retention, gc and purge: what the store keeps, and removing the rest.

What is kept (the *roots*), whatever the policy says:

- every session's baseline, every open turn, the turns an active undo or revert names
  (what redo and unrevert need) and that op's snapshot taken before it;
- for the session of an interrupted restore (a journal in the store), its whole history,
  and the snapshots the journal names;
- the scan cache: it names the trees and blobs of the last scan, which the next scan
  reuses without writing them again (were they removed, a later snapshot would name
  objects that are gone);
- the newest turn of every session (``keep_turns`` is at least 1), so numbers are never
  given out twice;
- the turn that ended last (store-wide): it names the session a plain take-back acts on.

The policy (:class:`Policy`) keeps, per session, the newest ``keep_turns`` turns and
everything from the last ``keep_days`` days, whichever keeps more. "Newest" and
"before" are the store's sequence numbers (every snapshot, turn and op has one), never
the clock: a clock set back never makes old turns look new. Time only measures age, for
the day limit, which can only keep more (an open turn is kept and does not count among
the newest). It cuts each session's history at one point of the sequence: every
turn that began, and every snapshot taken, before the oldest kept turn (or command step
outside a turn) and before the day limit goes, with its steps, touches and change list,
and the undos and reverts recorded before it (unless active).
What a kept row names is kept: a kept turn's snapshot before it (taken a moment before
it began), the states its change list and touches keep, what a kept op wrote.

Objects: every tree and blob a kept snapshot, state or cache entry reaches is kept. A
kept object stored as a delta of one that goes is rewritten whole first (or, when that
cannot be written, its base is kept).

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

A limit, left open: a scan that dies during gc leaves objects no row names, which gc
does not see (they are newer than its index); one stored as a delta of a base that only
a scan cache gc never saw named (saved and replaced between two of its reads, by scans
that wrote no snapshot) could lose that base, and a later snapshot of the same bytes
would name it without storing it again. Closing it needs the objects stored since the
mark listed by the store (a sequence on the objects' rows).

``GcResult.longest_lock_ms`` is the longest exclusive hold (what a snapshot waits at
most), ``locked_ms`` all of them together. A dry run only plans, under the shared lock.

A shared store's other machines keep scan caches this gc cannot see: before any object
goes, step 3 raises the workspace's cache generation, and a machine whose cache was made
under an older one drops it (its next scan reads every file).

The store's own parts (listing ids, deleting rows, vacuum) are small methods of the
store seam (``store/_api.py``); what is reached, and why, is decided here.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Container, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import StoreCorruptError, UsageError
from ..model import FILE, LINK, decode_state, tree_links
from ..scan import CACHE_KEY, cached_ids
from ..store import Meta, ObjectRow, Store
from ._snapshot import stored_cache
from ._turns import shared_lock

DEFAULT_KEEP_TURNS = 50
DEFAULT_KEEP_DAYS = 30.0
#: gc runs by itself at most this often (seconds)
AUTO_INTERVAL = 86400.0
_DAY = 86400.0

#: objects kept once read while gc walks the trees (about 1 KB each for a tree)
_WALK_CACHE = 16384

_KEYS = {"keep_turns": "gc.keep_turns", "keep_days": "gc.keep_days", "auto": "gc.auto"}
LAST_GC = "gc.last"


@dataclass(frozen=True, slots=True)
class Policy:
    """What gc keeps.

    The newest ``keep_turns`` turns of each session and everything from the last
    ``keep_days`` days, whichever keeps more; ``auto``: gc runs by itself once a day.
    """

    keep_turns: int = DEFAULT_KEEP_TURNS
    keep_days: float = DEFAULT_KEEP_DAYS
    auto: bool = True

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``config --json``)."""
        return {"keep_turns": self.keep_turns, "keep_days": self.keep_days, "auto": self.auto}


def check_policy(keep_turns: int | None, keep_days: float | None) -> None:
    """Refuse a policy that cannot be kept.

    Raises:
        UsageError: ``keep_turns`` below 1 (the newest turn is always kept) or
            ``keep_days`` below 0.
    """
    if keep_turns is not None and keep_turns < 1:
        raise UsageError(f"--keep-turns must be at least 1 (the newest turn is kept): {keep_turns}")
    if keep_days is not None and not keep_days >= 0:
        raise UsageError(f"--keep-days must be 0 or more: {keep_days}")


def read_policy(meta: Meta) -> Policy:
    """Return the store's policy (the defaults where it sets none)."""
    d = Policy()
    turns = meta.get_meta(_KEYS["keep_turns"])
    days = meta.get_meta(_KEYS["keep_days"])
    auto = meta.get_meta(_KEYS["auto"])
    try:
        return Policy(
            int(turns) if turns is not None else d.keep_turns,
            float(days) if days is not None else d.keep_days,
            auto != "off" if auto is not None else d.auto,
        )
    except ValueError:
        return d


def write_policy(
    store: Store,
    *,
    keep_turns: int | None = None,
    keep_days: float | None = None,
    auto: bool | None = None,
) -> Policy:
    """Set parts of the store's policy (the rest stays); return the whole policy.

    Raises:
        UsageError: a value :func:`check_policy` refuses.
    """
    check_policy(keep_turns, keep_days)
    meta = store.meta
    with meta.tx():
        if keep_turns is not None:
            meta.set_meta(_KEYS["keep_turns"], str(keep_turns))
        if keep_days is not None:
            meta.set_meta(_KEYS["keep_days"], repr(float(keep_days)))
        if auto is not None:
            meta.set_meta(_KEYS["auto"], "on" if auto else "off")
    return read_policy(meta)


def last_gc(store: Store) -> float:
    """When gc last ran (or was started by itself); the store's creation when never."""
    raw = store.meta.get_meta(LAST_GC)
    try:
        return float(raw) if raw is not None else store.created_at
    except ValueError:
        return 0.0


def claim_auto_gc(store: Store, *, now: float | None = None) -> bool:
    """Whether gc is due by itself, and if so, claim the run (one process wins).

    Due when the policy allows it and the last run is over a day old. The claim is one
    conditional write, so of several hooks that find it due at once, one starts it.
    """
    meta = store.meta
    when = time.time() if now is None else now
    if store.readonly:
        return False
    raw = meta.get_meta(LAST_GC)
    if raw is None and not store.created_at:
        # A store that says neither when it was made nor when gc last ran: the clock
        # starts now (once), rather than gc at the first command.
        with meta.tx():
            meta.set_meta(LAST_GC, repr(when))
        return False
    # The policy is read only when gc is due: every hook call asks, once a day it is.
    if when - last_gc(store) < AUTO_INTERVAL or not read_policy(meta).auto:
        return False
    return meta.swap_meta(LAST_GC, raw, repr(when))


# -- the plan ------------------------------------------------------------------------


@dataclass
class GcPlan:
    """What a gc (or purge) removes, and what it keeps.

    Attributes:
        snapshots: snapshot ids to remove.
        turns: (session, n) of turns to remove, with their touches and change lists.
        steps: (session, n) of steps to remove.
        ops: ids of op records to remove.
        sessions: sessions removed whole (purge).
        objects: object ids to remove, deepest delta first.
        rewrite: kept objects whose base is removed: stored whole first.
        freed: stored bytes of the objects removed.
        kept_objects: how many objects stay.
        drop_cache: forget the scan cache (purge of everything).
    """

    snapshots: list[str] = field(default_factory=list)
    turns: list[tuple[str, int]] = field(default_factory=list)
    steps: list[tuple[str, int]] = field(default_factory=list)
    ops: list[int] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)
    rewrite: list[str] = field(default_factory=list)
    freed: int = 0
    kept_objects: int = 0
    drop_cache: bool = False
    #: every stored object when the plan was made (kind, base, depth, size)
    index: dict[str, ObjectRow] = field(default_factory=dict, repr=False)
    #: what the mark reached (and, of it, the trees and blobs not stored then)
    marked: _Marked | None = field(default=None, repr=False)


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


def journal_names(store: Store) -> tuple[str | None, set[str]]:
    """Return the session and the snapshot ids an interrupted restore's journal names."""
    journal = store.read_journal()
    if not journal:
        return None, set()
    ids = {v for k in ("pre", "target") if isinstance(v := journal.get(k), str)}
    session = journal.get("session")
    return (session if isinstance(session, str) else ""), ids


class _History:
    """The store's history rows, read once."""

    def __init__(self, meta: Meta) -> None:
        self.snapshots = meta.snapshot_rows()
        self.turns = meta.all_turns()
        self.steps = meta.all_steps()
        self.ops = meta.all_ops()
        self.sessions = {s.name: s for s in meta.sessions()}
        self.by_id = {s[0]: s for s in self.snapshots}
        #: the store-wide sequence numbers: what is older or newer, whatever the clock says
        self.seq = meta.seqs()

    def snap_seq(self, sid: str) -> int:
        return self.seq.snapshots.get(sid, 0)

    def turn_seq(self, session: str, n: int) -> int:
        return self.seq.turns.get((session, n), (0, None))[0]

    def op_seq(self, op_id: int) -> int:
        return self.seq.ops.get(op_id, 0)

    def last_ended(self) -> tuple[str, int] | None:
        """The turn that ended last: it names the session a plain take-back acts on."""
        ended = [(e, key) for key, (_b, e) in self.seq.turns.items() if e is not None]
        return max(ended)[1] if ended else None


def _cut(
    h: _History, session: str, policy: Policy, now: float, journal_session: str | None
) -> float:
    """The sequence number before which a session's history goes (-inf: keep it all).

    Ordered by the store's sequence, never by the clock: the newest ``keep_turns`` turns
    (an open turn is kept anyway and does not count) stay whatever their times say, and
    the day limit only keeps more: what came after the newest row older than the limit.
    """
    if journal_session is not None and (journal_session in ("", session)):
        return float("-inf")
    starts: list[int] = [
        h.turn_seq(t[0], t[1]) for t in h.turns if t[0] == session and t[4] != "open"
    ]
    turn_nums = {t[1] for t in h.turns if t[0] == session}
    times: list[tuple[float, int]] = [
        (t[5], h.turn_seq(t[0], t[1])) for t in h.turns if t[0] == session
    ]
    for st in h.steps:
        if st.session == session and (st.turn is None or st.turn not in turn_nums):
            snap = h.by_id.get(st.before or st.after or "")
            if snap is not None:
                starts.append(h.snap_seq(snap[0]))
    times += [(snap[2], h.snap_seq(snap[0])) for snap in h.snapshots if snap[4] == session]
    starts.sort(reverse=True)
    by_count = starts[policy.keep_turns - 1] if len(starts) >= policy.keep_turns else float("-inf")
    limit = now - policy.keep_days * _DAY
    old = [seq for at, seq in times if at < limit]
    by_days: float = max(old) + 1 if old else float("-inf")
    cut = min(by_count, by_days)
    active = [op for op, s, _at in h.ops if s == session and op.state == "active"]
    held = {n for op in active for n in op.turns}
    for t in h.turns:
        if t[0] == session and (t[4] == "open" or t[1] in held):
            cut = min(cut, h.turn_seq(t[0], t[1]))
    for op, s, _at in h.ops:
        if s == session and op.state == "active":
            cut = min(cut, h.op_seq(op.id))
    last = h.last_ended()
    if last is not None and last[0] == session:
        # The turn that ended last decides the session a plain undo acts on: it stays.
        cut = min(cut, h.turn_seq(*last))
    return cut


def plan(
    store: Store,
    policy: Policy,
    *,
    now: float | None = None,
    purge: Iterable[str] | None = None,
    purge_all: bool = False,
    objects: bool = True,
) -> GcPlan:
    """Decide what goes.

    First the history rows the policy no longer keeps (or a purge names), then every
    object that no kept row reaches.

    Args:
        store: the open store (the caller holds its exclusive lock to act on the plan).
        policy: the retention policy (a purge keeps the rest of the history whole).
        now: the time the day limit counts from.
        purge: sessions removed whole (the policy is then not applied to the others).
        purge_all: remove every session, snapshot and the scan cache.
        objects: decide the objects too (False: the history rows only, a few queries).

    Raises:
        UsageError: a purge names the session of an interrupted restore.
        StoreCorruptError: a kept tree cannot be read.
    """
    meta = store.meta
    when = time.time() if now is None else now
    h = _History(meta)
    journal_session, journal_ids = journal_names(store)
    out = GcPlan()
    purged: set[str] = set(h.sessions) if purge_all else set(purge or ())
    if purge is not None or purge_all:
        if journal_session is not None and (
            journal_session == "" or journal_session in purged or purge_all
        ):
            raise UsageError(
                "an interrupted restore needs this history: finish it or take it back first"
            )
    cuts: dict[str, float] = {}
    if purge is None and not purge_all:
        for name in h.sessions:
            cuts[name] = _cut(h, name, policy, when, journal_session)
    else:
        for name in h.sessions:
            cuts[name] = float("inf") if name in purged else float("-inf")
    out.sessions = sorted(n for n in purged if n in h.sessions)

    def gone(session: str | None, seq: int) -> bool:
        if session is None or session not in cuts:
            return False
        return seq < cuts[session]

    # Turns: the newest of each session always stays (numbers are never given twice).
    newest: dict[str, int] = {}
    for t in h.turns:
        newest[t[0]] = max(newest.get(t[0], 0), t[1])
    kept_turns: set[tuple[str, int]] = set()
    for t in h.turns:
        key = (t[0], t[1])
        if t[0] in purged or (gone(t[0], h.turn_seq(t[0], t[1])) and t[1] != newest[t[0]]):
            if t[0] not in purged:
                out.turns.append(key)
        else:
            kept_turns.add(key)
    dropped_turns = set(out.turns)
    last_step: dict[str, int] = {}
    for st in h.steps:
        last_step[st.session] = max(last_step.get(st.session, 0), st.n)
    kept_steps = []
    for st in h.steps:
        if st.session in purged:
            continue
        snap = h.by_id.get(st.before or st.after or "")
        own = st.turn is not None and (st.session, st.turn) in dropped_turns
        old = snap is not None and gone(st.session, h.snap_seq(snap[0]))
        if (own or (old and (st.turn is None or (st.session, st.turn) not in kept_turns))) and (
            st.n != last_step[st.session]
        ):
            out.steps.append((st.session, st.n))
        else:
            kept_steps.append(st)
    kept_ops = []
    for op, s, _at in h.ops:
        if s in purged:
            continue
        if op.state != "active" and gone(s, h.op_seq(op.id)):
            out.ops.append(op.id)
        else:
            kept_ops.append(op)

    # Snapshots: those a kept row names, and those of the kept part of each history.
    named: set[str] = set(journal_ids)
    for name, info in h.sessions.items():
        if name not in purged:
            named.add(info.baseline)
    for t in h.turns:
        if (t[0], t[1]) in kept_turns:
            named.update(x for x in (t[2], t[3]) if x)
    for st in kept_steps:
        named.update(x for x in (st.before, st.after) if x)
    for op in kept_ops:
        if op.pre:
            named.add(op.pre)
    loose = [s for s in h.snapshots if s[4] is None]
    loose_keep = set()
    if not purge_all:
        newest_loose = sorted(loose, key=lambda s: h.snap_seq(s[0]), reverse=True)[
            : policy.keep_turns
        ]
        loose_keep = {s[0] for s in newest_loose}
        if purge is not None:
            loose_keep = {s[0] for s in loose}
    kept_trees: list[str] = []
    for sid, tree, created, _kind, session in h.snapshots:
        if sid in named:
            keep = True
        elif session is None:
            keep = sid in loose_keep or (
                purge is None and not purge_all and created >= when - policy.keep_days * _DAY
            )
        elif session in purged:
            keep = False
        elif session not in h.sessions:
            keep = not purge_all  # a session being started: its row comes next
        else:
            keep = not gone(session, h.snap_seq(sid))
        if keep:
            kept_trees.append(tree)
        else:
            out.snapshots.append(sid)
    if not objects:
        out.drop_cache = purge_all
        return out

    # Objects reached from what stays.
    states: list[str | None] = [
        s for sess, n, s in meta.recorded_states() if (sess, n) in kept_turns
    ]
    for op in kept_ops:
        states.extend(op_states(op.data))
    blobs = {o for o in map(state_oid, states) if o}
    marked = _Marked()
    if purge_all:
        out.drop_cache = True
    else:
        cache_trees, cache_blobs = marked.cache_ids(meta)
        kept_trees.extend(cache_trees)
        blobs |= cache_blobs
    # One read of every row's id, kind, base, depth and size: the rows hold the data too,
    # so this reads the file once (an index on the bases would cost more room than the
    # deltas it indexes).
    index = store.objects.index()
    marked.walk(store, kept_trees, blobs, index)
    reach = marked.reach
    out.marked = marked
    gone_rows: list[tuple[int, str]] = []
    for oid, row in index.items():
        if oid not in reach:
            gone_rows.append((row.depth, oid))
            out.freed += row.stored
        elif row.base is not None and row.base not in reach:
            out.rewrite.append(oid)  # a kept delta whose base goes: stored whole first
    gone_rows.sort(reverse=True)  # the deepest deltas first
    out.objects = [oid for _depth, oid in gone_rows]
    out.index = index
    out.kept_objects = len(index) - len(out.objects)
    return out


def plan_history(
    store: Store,
    policy: Policy,
    *,
    now: float | None = None,
    purge: Iterable[str] | None = None,
    purge_all: bool = False,
) -> GcPlan:
    """Decide which history rows go, as :func:`plan` does, without the objects."""
    return plan(store, policy, now=now, purge=purge, purge_all=purge_all, objects=False)


def reachable(
    store: Store, trees: Iterable[str], blobs: Iterable[str], index: Container[str]
) -> set[str]:
    """Return every object the trees reach (themselves, their subtrees and blobs) and blobs.

    A tree that is not in the store is left out (fsck names it); its id is still marked,
    so nothing of that name is removed.
    """
    marked = _Marked()
    marked.walk(store, trees, blobs, index)
    return marked.reach


class _Marked:
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


# -- acting on it --------------------------------------------------------------------


#: an exclusive slice deletes objects for about this long (seconds), then lets writers in
SLICE_SECONDS = 0.2
#: objects deleted per transaction within a slice
_SLICE_BATCH = 1024
#: the pause between two slices (seconds): snapshots waiting for the lock take it
_BETWEEN_SLICES = 0.005


class _Sweep:
    """The doomed objects, kept up to date with what the store reaches while gc sweeps.

    Only ever shrinks: an object the mark found unreached but that is reached again (a
    snapshot that found its blob stored and named it) leaves the list with every base it
    needs; a new object is never in it, and its bases leave it.
    """

    def __init__(self, store: Store, p: GcPlan) -> None:
        self.store = store
        self.index = p.index
        self.marked = p.marked or _Marked()
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

    def _keep_chain(self, oid: str | None) -> None:
        # An object that stays has every base it needs (rewritten whole, or its chain
        # kept): the walk down stops at the first one that stays.
        while oid is not None and oid in self.doomed:
            self.doomed.discard(oid)
            self.kept_again += 1
            row = self.index.get(oid)
            oid = row.base if row is not None else None

    def delete(self, until: float) -> bool:
        """Delete doomed objects in order until the clock passes ``until``; True when done."""
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


class _Holds:
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
            concurrency test takes a snapshot there.

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
    holds = _Holds(store)
    # A fence: every snapshot that began before gc (and read a scan cache older than the
    # one the mark reads) has ended by the time the mark begins.
    with holds.exclusive():
        pass
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
    sweep = _Sweep(store, p)
    step("history")
    # What was recorded during the mark is marked under the shared lock too, so that the
    # slice's own re-mark finds little (only what came between the two).
    with store.lock(exclusive=False):
        sweep.remark(p)
    with holds.exclusive():
        # The history as it is now: snapshots, turns and ops recorded since the mark
        # count, and the rows a kept one names stay.
        again = plan_history(store, policy, now=now, purge=purge, purge_all=purge_all)
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
            time.sleep(_BETWEEN_SLICES)
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
