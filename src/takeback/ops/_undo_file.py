"""Ops layer: one-file undo: a file put back as it was before the session first changed it.

The record's history of the file (which turn or snapshot first changed it, what the last
word on it says it holds now) is asked of :mod:`._records`; the file then goes through a
:class:`._takeback.TakeBack` like any take-back, and its redo brings the file back as it
was when the undo began.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._fs import check_relpath
from ..errors import UsageError
from ..model import TurnOpResult, decode_state
from ._records import first_change, last_recorded, recorded_state
from ._snapshot import Recording
from ._takeback import How, MergeOption, TakeBack, _Pair, _tree_of
from ._treediff import lookup


def redo_file(
    rec: Recording,
    session: str,
    op_id: int,
    pre: str | None,
    data: dict[str, Any],
    *,
    force: bool,
    merge: MergeOption,
    dry_run: bool,
    plan: str | None,
) -> TurnOpResult:
    """Bring back what a one-file undo took back: the file as it was when the undo began."""
    store = rec.store
    pre_tree = _tree_of(store, pre)
    wrote = data.get("wrote") if isinstance(data.get("wrote"), dict) else {}
    assert isinstance(wrote, dict)
    if pre_tree is None:
        raise UsageError(f"the snapshot taken before the undo ({pre}) is missing")
    pairs: list[_Pair] = [
        (p, decode_state(w), lookup(store.objects.get_tree, pre_tree, p))
        for p, w in sorted(wrote.items())
    ]
    return TakeBack(
        session=session,
        kind="redo",
        turns=[],
        pairs=pairs,
        describe=lambda p: f"{p} changed after its undo",
        target_tree=pre_tree,
        prune=False,
        data={"undo_op": op_id, "file": data.get("file")},
        on_done=lambda meta: meta.set_op_state(op_id, "redone"),
        labels=("its undo", "before its undo"),
        nothing_why=lambda rewound: (
            f"{data.get('file')} already holds what it held before "
            + ("its undo (a rewind brought it back)" if rewound else "its undo")
        ),
        since=store.meta.op_seqs(session).get(op_id),
        on_nothing=lambda meta: meta.set_op_state(op_id, "redone"),
    ).run(rec, How(force=force, merge=merge, dry_run=dry_run, plan=plan))


def undo_file(
    rec: Recording,
    session: str,
    path: str,
    *,
    force: bool = False,
    open_turn: int | None = None,
    merge: MergeOption = False,
    dry_run: bool = False,
    plan: str | None = None,
) -> TurnOpResult:
    """Put one file back as it was before the session first changed it.

    A file the session created is removed (and the folders made for it, when empty). The
    file is checked against what the record says it holds now (what the last turn or
    operation left there): a person's edit since is a conflict (the caller ends an open
    turn first, or names it in ``open_turn``: the agent asking inside its reply, whose
    own writes to the file since its touch are what it holds now).

    Raises:
        ConflictError: the file changed since the record's last word on it.
        UsageError: the session did not change the path.
    """
    store = rec.store
    check_relpath(path)
    with store.lock(exclusive=True):
        ref, snap, before = first_change(store, session, path, open_turn)
        source, now = recorded_state(store, session, path)
        if open_turn is not None and path in store.meta.touches(session, open_turn):
            source = None  # the open turn's own write, whatever it holds now
        elif source is None:
            source, now = last_recorded(store, session, path, before)
        pairs: list[_Pair] | Callable[[str], list[_Pair]] = [(path, now, before)]
        if source is None:
            # Nobody recorded who changed it: whatever is there is expected (the snapshot
            # taken before keeps it).
            get_tree = store.objects.get_tree
            pairs = lambda pre_tree: [(path, lookup(get_tree, pre_tree, path), before)]  # noqa: E731
        result = TakeBack(
            session=session,
            kind="undo-file",
            turns=[],
            pairs=pairs,
            describe=lambda p: f"{p} changed after {source}",
            target_tree=_tree_of(store, snap),
            prune=True,
            data={"file": path},
            on_done=lambda meta: None,
            created=lambda _p: True,
            labels=(source or "the record", f"before {ref}"),
            nothing_why=lambda _r: f"{path} is already as before {ref}",
        ).run(rec, How(force=force, merge=merge, dry_run=dry_run, plan=plan))
        result.ref = ref
        return result
