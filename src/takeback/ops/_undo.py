"""Ops layer: undo, redo, revert (and moving a standing revert) and unrevert of turns.

Each builds a :class:`._takeback.TakeBack` from the turns' change lists and the op stack
(see :mod:`._takeback` for the rules every take-back shares) and runs it, under the
store's exclusive lock. One-file undo and its redo are :mod:`._undo_file`; some hunks of a
turn, :mod:`._hunks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._fs import check_relpath
from ..errors import UsageError
from ..model import Entry, TurnOpResult, decode_state
from ..store import OpRow, Store
from ._snapshot import Recording
from ._takeback import (
    How,
    MergeOption,
    TakeBack,
    _changes,
    _Pair,
    _tree_of,
    _Turn,
    _turns,
    _unconfirmed,
)
from ._treediff import lookup

if TYPE_CHECKING:
    from ..store import Meta


def undo(
    rec: Recording,
    session: str,
    *,
    turn: int | None = None,
    file: str | None = None,
    force: bool = False,
    merge: MergeOption = False,
    dry_run: bool = False,
    plan: str | None = None,
) -> TurnOpResult:
    """Take back a turn (the last one that changed something, or ``turn``), or one file of it.

    Args:
        rec: the store, options and event sink.
        session: the session's name.
        turn: the turn to take back (default: the last done turn with changes; with
            ``file``, the last done turn that changed it).
        file: take back only this path (relative to the root) of the turn.
        force: overwrite files changed since the turn.
        merge: merge files changed since the turn (see :class:`._takeback.How`).
        dry_run: plan only (nothing is written, no snapshot is taken).
        plan: the token of a plan (a dry run's): do exactly that plan or refuse.

    Raises:
        ConflictError: a file changed after the turn (and ``force`` is false).
        UsageError: no such turn, or the turn did not change ``file``.
    """
    store = rec.store
    if file is not None:
        check_relpath(file)
    with store.lock(exclusive=True):
        turns = _turns(store, session)
        if turn is None:
            # The last turn that changed something (or this file): a turn that changed
            # nothing (the agent's reply asking for the undo) is not the one meant.
            done = [
                t
                for t in turns
                if t.state == "done"
                and any(
                    file is None or c.path == file for c in store.meta.change_rows(session, t.n)
                )
            ]
            if not done:
                if file is not None:
                    raise UsageError(f"no turn to take {file} back from")
                return TurnOpResult("undo", [], None, nothing=True, session=session)
            t = done[-1]
        else:
            match = [t for t in turns if t.n == turn]
            if not match:
                raise UsageError(f"no turn {turn} in session {session!r}")
            t = match[0]
            if t.state != "done" and file is None:
                raise UsageError(f"turn {turn} is {t.state}, not something undo can take back")
        changes = _changes(store, session, t.n)
        if file is not None:
            changes = [c for c in changes if c[0] == file]
            if not changes:
                raise UsageError(f"turn {t.n} did not change {file}")
        n = t.n
        doubted = _unconfirmed(store, session, [n])

        def on_done(meta: Meta) -> None:
            if file is None:
                meta.set_turn_state(session, n, "undone")

        return TakeBack(
            session=session,
            kind="undo",
            turns=[n],
            pairs=[(p, after, before) for p, before, after in changes],
            describe=lambda p: f"{p} changed after turn {n}",
            target_tree=_tree_of(store, t.before),
            prune=True,
            data={"file": file},
            on_done=on_done,
            created=lambda _p: True,
            labels=(f"turn {n}", f"before turn {n}"),
            unconfirmed=doubted,
            nothing_why=_gone([n], file),
            since=store.meta.turn_end_seqs(session).get(n),
            on_nothing=on_done,
        ).run(rec, How(force=force, merge=merge, dry_run=dry_run, plan=plan))


def _merged_back(
    store: Store, data: dict[str, Any], pre: str | None
) -> tuple[dict[str, Entry | None], str | None]:
    """What an op that merged wrote at each merged path, and the tree before it.

    The way back from a merge is not the record's state (the merge kept edits that the
    record does not hold) but the file as it was before the op: the snapshot taken then
    keeps it. Returns ({path: the merge written there}, that snapshot's tree).
    """
    wrote = data.get("wrote") if isinstance(data.get("wrote"), dict) else {}
    assert isinstance(wrote, dict)
    paths = [p for p in data.get("merged") or () if isinstance(p, str) and p in wrote]
    if not paths:
        return {}, None
    tree = _tree_of(store, pre)
    if tree is None:
        raise UsageError(f"the snapshot taken before the merge ({pre}) is missing")
    return {p: decode_state(wrote[p]) for p in paths}, tree


def redo(
    rec: Recording,
    session: str,
    *,
    force: bool = False,
    merge: MergeOption = False,
    dry_run: bool = False,
    plan: str | None = None,
) -> TurnOpResult:
    """Bring back what the last undo still to be redone took back.

    A file the undo merged (it kept edits made since the turn) is expected to hold that
    merge, and goes back to what it held when the undo began: the turn's hunks and the
    edits both.

    Raises:
        ConflictError: a file changed since the undo (and ``force`` is false).
    """
    store = rec.store
    with store.lock(exclusive=True):
        ops = [
            op for op in store.meta.ops(session, state="active") if op.kind in ("undo", "undo-file")
        ]
        if not ops:
            return TurnOpResult("redo", [], None, nothing=True, session=session)
        op = ops[0]
        op_id, turns, pre, data = op.id, op.turns, op.pre, op.data
        if op.kind == "undo-file":
            from ._undo_file import redo_file

            return redo_file(
                rec, session, op_id, pre, data, force=force, merge=merge, dry_run=dry_run, plan=plan
            )
        n = turns[0]
        file = data.get("file")
        # Only what that undo took back: files an earlier `undo --file` restored, or that
        # were already as before, were not written by it and are not brought back now.
        took = set(data.get("paths") or ())
        changes = [
            c
            for c in _changes(store, session, n)
            if c[0] in took and (file is None or c[0] == file)
        ]

        def on_done(meta: Meta) -> None:
            meta.set_op_state(op_id, "redone")
            if file is None:
                meta.set_turn_state(session, n, "done")

        merged, pre_tree = _merged_back(store, data, pre)
        get_tree = store.objects.get_tree
        return TakeBack(
            session=session,
            kind="redo",
            turns=[n],
            pairs=[
                (p, merged[p], lookup(get_tree, pre_tree, p))
                if p in merged and pre_tree
                else (p, before, after)
                for p, before, after in changes
            ],
            describe=lambda p: f"{p} changed after the undo of turn {n}",
            target_tree=_tree_of(store, pre),
            prune=False,
            data={"undo_op": op_id, "file": file},
            on_done=on_done,
            labels=(f"undo of turn {n}", f"turn {n}"),
            nothing_why=_back([n]),
            since=store.meta.op_seqs(session).get(op_id),
            on_nothing=on_done,
        ).run(rec, How(force=force, merge=merge, dry_run=dry_run, plan=plan))


def revert(
    rec: Recording,
    session: str,
    *,
    to_turn: int,
    force: bool = False,
    merge: MergeOption = False,
    dry_run: bool = False,
    plan: str | None = None,
) -> TurnOpResult:
    """Take back every turn after ``to_turn`` at once (or move a standing revert there).

    Each file goes back to its state before the first of those turns changed it (the
    caller ends an open turn first). While a revert stands, the workspace goes to exactly
    the state ``to_turn`` names: the reverted turns up to it come back, later ones are
    taken back.

    Raises:
        ConflictError: a file changed after the turn that last changed it.
        UsageError: ``to_turn`` is not 0 or a turn of the session.
    """
    store = rec.store
    with store.lock(exclusive=True):
        all_turns = _turns(store, session)
        last = all_turns[-1].n if all_turns else 0
        if to_turn < 0 or to_turn > last:
            raise UsageError(
                f"no turn {to_turn} in session {session!r} (it has turns 1 to {last})"
                if last
                else f"session {session!r} has no turn to revert to"
            )
        standing = store.meta.ops(session, kind="revert", state="active")
        if standing:
            return _move_revert(
                rec, session, all_turns, standing[0], to_turn, force, merge, dry_run, plan
            )
        turns = [t for t in all_turns if t.n > to_turn and t.state == "done"]
        if not turns:
            return TurnOpResult("revert", [], None, nothing=True, session=session)
        first: dict[str, Entry | None] = {}
        last_after: dict[str, Entry | None] = {}
        who: dict[str, int] = {}
        for t in turns:
            for p, before, after in _changes(store, session, t.n):
                first.setdefault(p, before)
                last_after[p] = after
                who[p] = t.n
        nums = [t.n for t in turns]

        def on_done(meta: Meta) -> None:
            for n in nums:
                meta.set_turn_state(session, n, "reverted")

        return TakeBack(
            session=session,
            kind="revert",
            turns=nums,
            pairs=[(p, last_after[p], first[p]) for p in sorted(first)],
            describe=lambda p: f"{p} changed after turn {who[p]}",
            target_tree=_tree_of(store, turns[0].before),
            prune=True,
            data={"to_turn": to_turn},
            on_done=on_done,
            unconfirmed=_unconfirmed(store, session, nums),
            created=lambda _p: True,
            labels=(
                f"turn {nums[-1]}" if len(nums) == 1 else f"turns {nums[0]}-{nums[-1]}",
                f"turn {to_turn}" if to_turn else "before turn 1",
            ),
            nothing_why=_gone(nums),
            since=max(store.meta.turn_end_seqs(session).get(n, 0) for n in nums),
        ).run(rec, How(force=force, merge=merge, dry_run=dry_run, plan=plan))


def _move_revert(
    rec: Recording,
    session: str,
    all_turns: list[_Turn],
    op: OpRow,
    to_turn: int,
    force: bool,
    merge: MergeOption,
    dry_run: bool,
    plan: str | None,
) -> TurnOpResult:
    """Move a standing revert to ``to_turn``: the state that turn left, exactly."""
    store = rec.store
    op_id, reverted, data = op.id, op.turns, op.data
    held = set(reverted)
    old_to = int(data.get("to_turn", min(reverted, default=1) - 1))
    if to_turn == old_to:
        return TurnOpResult("revert", [], None, nothing=True, session=session)
    # The turns the record applies: those done, and those the standing revert took back.
    live = [t for t in all_turns if t.state == "done" or (t.state == "reverted" and t.n in held)]
    lists = {t.n: _changes(store, session, t.n) for t in live}
    low = min(old_to, to_turn)
    paths = sorted({p for t in live if t.n > low for p, _b, _a in lists[t.n]})
    pairs: list[_Pair] = []
    for p in paths:
        touching = [(t.n, before, after) for t in live for q, before, after in lists[t.n] if q == p]
        later = [x for x in touching if x[0] > to_turn]
        want = later[0][1] if later else [x for x in touching if x[0] <= to_turn][-1][2]
        by_revert = [x for x in touching if x[0] in held]
        now = by_revert[0][1] if by_revert else touching[-1][2]
        pairs.append((p, now, want))
    after = [t.n for t in live if t.n > to_turn]
    first_later = next((t for t in live if t.n > to_turn), None)

    def on_done(meta: Meta) -> None:
        for t in live:
            meta.set_turn_state(session, t.n, "reverted" if t.n > to_turn else "done")
        meta.update_op(op_id, after, {**data, "to_turn": to_turn})
        if not after:
            meta.set_op_state(op_id, "unreverted")

    moved = sorted(held.symmetric_difference(after))
    return TakeBack(
        session=session,
        kind="revert",
        turns=moved,
        pairs=pairs,
        describe=lambda p: f"{p} changed after the revert to turn {old_to}",
        target_tree=_tree_of(store, first_later.before) if first_later else None,
        prune=first_later is not None and to_turn < old_to,
        data={"to_turn": to_turn, "moved": op_id},
        on_done=on_done,
        record_as="revert-move",
        record_state="final",
        labels=(f"revert to turn {old_to}", f"turn {to_turn}" if to_turn else "before turn 1"),
        nothing_why=lambda _r: (
            "the workspace already holds "
            + (f"the state turn {to_turn} left" if to_turn else "the state before turn 1")
        ),
        on_nothing=on_done,
    ).run(rec, How(force=force, merge=merge, dry_run=dry_run, plan=plan))


def unrevert(
    rec: Recording,
    session: str,
    *,
    force: bool = False,
    merge: MergeOption = False,
    dry_run: bool = False,
    plan: str | None = None,
) -> TurnOpResult:
    """Put back what the standing revert took back, as the files were when it began.

    A file the revert merged is expected to hold that merge.

    Raises:
        ConflictError: a file changed since the revert.
    """
    store = rec.store
    with store.lock(exclusive=True):
        ops = store.meta.ops(session, kind="revert", state="active")
        if not ops:
            return TurnOpResult("unrevert", [], None, nothing=True, session=session)
        op_id, turns, pre, op_data = ops[0].id, ops[0].turns, ops[0].pre, ops[0].data
        pre_tree = _tree_of(store, pre)
        if pre_tree is None:
            raise UsageError(f"the snapshot taken before the revert ({pre}) is missing")
        first: dict[str, Entry | None] = {}
        for n in turns:
            for p, before, _after in _changes(store, session, n):
                first.setdefault(p, before)
        get_tree = store.objects.get_tree
        merged, _tree = _merged_back(store, op_data, pre)
        first.update({p: e for p, e in merged.items() if p in first})

        def on_done(meta: Meta) -> None:
            meta.set_op_state(op_id, "unreverted")
            for n in turns:
                meta.set_turn_state(session, n, "done")

        return TakeBack(
            session=session,
            kind="unrevert",
            turns=turns,
            pairs=[(p, first[p], lookup(get_tree, pre_tree, p)) for p in sorted(first)],
            describe=lambda p: f"{p} changed after the revert",
            target_tree=pre_tree,
            prune=False,
            data={"revert_op": op_id},
            on_done=on_done,
            labels=("the revert", "before the revert"),
            nothing_why=_back(turns),
            since=store.meta.op_seqs(session).get(op_id),
            on_nothing=on_done,
        ).run(rec, How(force=force, merge=merge, dry_run=dry_run, plan=plan))


def _turn_words(turns: list[int]) -> str:
    return f"turn {turns[0]}" if len(turns) == 1 else "turns " + ", ".join(map(str, turns))


def _gone(turns: list[int], path: str | None = None) -> Callable[[bool], str]:
    """The words of a take-back whose turns' changes are not in the workspace."""

    def why(rewound: bool) -> str:
        if path is not None:
            cause = "a rewind took it back" if rewound else "it is already as before the turn"
            return f"{_turn_words(turns)}'s change to {path} is not in the workspace ({cause})"
        if rewound:
            cause = "a rewind took them back"
        elif len(turns) == 1:
            cause = "its files are already as before it"
        else:
            cause = "their files are already as before them"
        return f"{_turn_words(turns)}'s changes are not in the workspace ({cause})"

    return why


def _back(turns: list[int]) -> Callable[[bool], str]:
    """The words of a bringing back whose turns' changes are in the workspace already."""

    def why(rewound: bool) -> str:
        if rewound:
            cause = "a rewind brought them back"
        elif len(turns) == 1:
            cause = "its files already hold what it left"
        else:
            cause = "their files already hold what they left"
        return f"{_turn_words(turns)}'s changes are already in the workspace ({cause})"

    return why
