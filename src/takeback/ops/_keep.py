"""Ops layer: what gc keeps: the history plan, and the mark from what it keeps.

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

The policy (``_policy.Policy``) keeps, per session, the newest ``keep_turns`` turns and
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

Objects: every tree and blob a kept snapshot, state or cache entry reaches is kept
(``_mark``); what no kept row reaches goes, deepest delta first. A kept object stored
as a delta of one that goes is rewritten whole first (or, when that cannot be written,
its base is kept: ``_gc``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import UsageError
from ..store import Meta, ObjectRow, Store
from ._mark import Marked, op_states, state_oid
from ._policy import Policy

_DAY = 86400.0


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
    marked: Marked | None = field(default=None, repr=False)


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
    marked = Marked()
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
