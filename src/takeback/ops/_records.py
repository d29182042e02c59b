"""Ops layer: what a session's record says of one path: who last changed it, and when first.

The questions a one-file undo asks before it plans: the state the record says a path holds
now (what the last turn or take-back left there, newest by the store's sequence), and the
state before the session first changed it.
"""

from __future__ import annotations

from ..errors import UsageError
from ..model import Entry, decode_state
from ..store import Store, TurnRow
from ._engine import same
from ._treediff import diff_trees, lookup


def _turns(store: Store, session: str) -> list[TurnRow]:
    return store.meta.turn_rows(session)


def _changes(store: Store, session: str, n: int) -> list[tuple[str, Entry | None, Entry | None]]:
    return [
        (r.path, decode_state(r.before), decode_state(r.after))
        for r in store.meta.change_rows(session, n)
    ]


def _tree_of(store: Store, snapshot_id: str | None) -> str | None:
    if snapshot_id is None:
        return None
    snap = store.meta.snapshot(snapshot_id)
    return None if snap is None else snap.tree


def recorded_state(store: Store, session: str, path: str) -> tuple[str | None, Entry | None]:
    """Return what the session's record says ``path`` holds now, and what left it so.

    The newest of: what a turn left there (its change list), what an undo, redo, revert,
    unrevert or one-file undo wrote there, and, for a session without turns, what a
    command step outside any turn left.

    Returns:
        (source, state): ``source`` names what left the state (``turn 3``, ``the undo of
        turn 3``, ``step 5``), None when the session never recorded the path.
    """
    meta = store.meta
    # The newest by the store's sequence, never by the clock.
    ended = meta.turn_end_seqs(session)
    seen: list[tuple[int, str, Entry | None]] = []
    for t in _turns(store, session):
        for p, _before, after in _changes(store, session, t.n):
            if p == path:
                seen.append((ended.get(t.n, 0), f"turn {t.n}", after))
    times = meta.op_seqs(session)
    for op in meta.ops(session):
        wrote = op.data.get("wrote")
        if isinstance(wrote, dict) and path in wrote:
            of = f" of turn {', '.join(map(str, op.turns))}" if op.turns else ""
            seen.append((times.get(op.id, 0), f"the {op.kind}{of}", decode_state(wrote[path])))
    if seen:
        _at, source, state = max(seen, key=lambda x: x[0])
        return source, state
    for st in reversed(meta.steps(session)):
        if st.turn is None and st.after is not None:
            if _step_changed(store, st.before, st.after, path):
                after_tree = _tree_of(store, st.after)
                assert after_tree is not None
                return f"step {st.n}", lookup(store.objects.get_tree, after_tree, path)
    return None, None


def _step_changed(store: Store, before: str | None, after: str | None, path: str) -> bool:
    """Whether the snapshots before and after a step differ at ``path``."""
    a, b = _tree_of(store, before), _tree_of(store, after)
    return bool(a and b) and any(
        p == path for p, _x, _y in diff_trees(store.objects.tree_changes, a, b)
    )


def first_change(
    store: Store, session: str, path: str, open_turn: int | None = None
) -> tuple[str, str | None, Entry | None]:
    """Return (ref, snapshot before, state before) of the session's first change to ``path``.

    ``open_turn``: a turn still open whose touches count (its first touch of the path
    kept the state before it).

    Raises:
        UsageError: the session did not change the path.
    """
    for t in _turns(store, session):
        for p, before, _after in _changes(store, session, t.n):
            if p == path:
                return f"turn:{t.n}", t.before, before
    for st in store.meta.steps(session):
        if st.turn is None and st.before and _step_changed(store, st.before, st.after, path):
            tree = _tree_of(store, st.before)
            assert tree is not None
            return st.before, st.before, lookup(store.objects.get_tree, tree, path)
    if open_turn is not None:
        kept = store.meta.touches(session, open_turn).get(path)
        row = store.meta.turn_row(session, open_turn)
        if kept is not None and row is not None:
            return f"turn:{open_turn}", row.before, decode_state(kept.state)
    info = store.meta.session(session)
    if not _turns(store, session) and info is not None:
        # No change list says when (an agent that takes checkpoints and edits with tools
        # of its own): the snapshots do. The file first differs after the baseline, so
        # the state before is the baseline's.
        tree = _tree_of(store, info.baseline)
        if tree is not None:
            return info.baseline, info.baseline, lookup(store.objects.get_tree, tree, path)
    raise UsageError(f"session {session!r} did not change {path}")


def last_recorded(
    store: Store, session: str, path: str, before: Entry | None
) -> tuple[str | None, Entry | None]:
    """What the session's snapshots last saw at ``path``, when they saw it changed.

    For a session without turns: a checkpoint taken after the agent's edit holds the
    edit, and a change since is someone else's. While no snapshot of the session has
    seen the path differ from ``before``, nothing says who changed it: (None, None).
    """
    for snap in store.meta.snapshots(session):
        if snap.kind.startswith(("pre-", "after-")):
            continue  # taken by a take-back: it holds whatever was there, not a record
        now = lookup(store.objects.get_tree, snap.tree, path)
        return (f"the snapshot {snap.id[:10]}", now) if not same(now, before) else (None, None)
    return None, None
