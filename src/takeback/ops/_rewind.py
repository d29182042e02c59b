"""Ops layer: rewind, the workspace (or some paths) put back as a snapshot holds it.

A rewind's moves are the differences between the pre-rewind snapshot and the target: the
plan and the state that undoes it come from one scan. A dry run plans against a scan of
the files now and writes nothing, not even a snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import StoreError
from ..model import Entry, Plan, PlanItem, RewindResult, SnapshotInfo
from ..scan import TreeScope
from ..store import Store
from . import _engine as engine
from ._after import record_after
from ._plan import check_plan, plan_token
from ._snapshot import Options, Recording, record, scan
from ._treediff import diff_trees, under

#: The name ops used for the one rewind result (the same type: ``model.RewindResult``).
RewindOutcome = RewindResult


def _token(
    session: str | None, target: SnapshotInfo, paths: Sequence[str] | None, checked: engine.Checked
) -> str:
    # A rewind goes to a snapshot: no history decides it (0), the target and paths do.
    return plan_token(
        kind="rewind",
        session=session,
        history=0,
        subject=[target.id, sorted(paths) if paths is not None else None],
        checked=checked,
    )


def target_scope(store: Store, opts: Options, tree: str) -> TreeScope:
    """The ignore rules a recorded state had (its own ``.gitignore`` files)."""
    return TreeScope(
        store.root,
        tree,
        get_tree=store.objects.get_tree,
        read_blob=store.objects.get,
        exclude_env=opts.exclude_env,
    )


def plan(
    store: Store,
    opts: Options,
    current: str,
    target: SnapshotInfo,
    paths: Sequence[str] | None = None,
) -> tuple[Plan, engine.Checked]:
    """Return the plan that turns tree ``current`` into the target's, and the engine's check.

    Args:
        store: the open store.
        opts: the workspace's options.
        current: the tree of the workspace now (the pre-rewind snapshot's).
        target: the snapshot to restore.
        paths: restrict the plan to these paths and what lies below them.
    """
    filters = list(paths) if paths is not None else None
    # A path whose kind changed comes twice from diff_trees (the old entry going, the new
    # one coming): one move, so that a folder kept for what is in it blocks the file.
    merged: dict[str, tuple[Entry | None, Entry | None]] = {}
    for p, old, new in diff_trees(store.objects.tree_changes, current, target.tree):
        if under(p, filters):
            merged[p] = (merged[p][0] if p in merged else old, new)
    moves = [engine.Move(p, old, old, new) for p, (old, new) in merged.items()]
    checked = engine.check(store, moves, target_scope=target_scope(store, opts, target.tree))
    items = tuple(
        PlanItem(
            "M" if m.now is not None and m.write is not None else "A" if m.now is not None else "D",
            m.path,
            m.now,
            m.write,
        )
        for m in checked.todo
    )
    return Plan(
        target=target.id,
        items=items,
        not_restorable=tuple(checked.not_restored),
        left=dict(checked.left),
    ), checked


def rewind(
    rec: Recording,
    target: SnapshotInfo,
    *,
    paths: Sequence[str] | None = None,
    dry_run: bool = False,
    session: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    plan_of: str | None = None,
) -> RewindResult:
    """Put the workspace (or just ``paths``) back as it was at ``target``.

    ``plan_of``: the token of the plan the caller confirmed (a dry run's): the rewind
    writes only if its plan now is that one.

    Raises:
        StalePlanError: the plan now is not ``plan_of``; nothing was written.
        StoreCorruptError: the store cannot give back what the rewind would overwrite,
            or what it must write; nothing was written.
        RestoreError: writes failed part way (what was done is attached).
    """
    store, opts = rec.store, rec.options
    if dry_run:
        with store.lock(exclusive=False):
            now = scan(store, opts).tree
            the_plan, checked = plan(store, opts, now, target, paths)
        # What the rewind would leave, and not restore, as the rewind itself says it.
        return RewindResult(
            the_plan,
            target,
            dry_run=True,
            not_restored=list(the_plan.not_restorable),
            left=dict(the_plan.left),
            token=_token(session, target, paths, checked),
        )
    with store.lock(exclusive=True):
        pre = record(
            rec,
            scan(store, opts),
            kind="pre-rewind",
            session=session,
            message=f"before rewind to {target.id[:10]}",
        )
        the_plan, checked = plan(store, opts, pre.tree, target, paths)
        token = _token(session, target, paths, checked)
        if plan_of is not None:
            check_plan(plan_of, token, kind="rewind")
        done = engine.apply(
            store,
            checked,
            pre=pre.id,
            on_progress=on_progress,
            claim=rec.claim,
            journal={
                "op": "rewind",
                "session": session,
                "target": target.id,
                "paths": list(paths) if paths is not None else None,
            },
        )
        try:
            record_after(
                rec,
                pre,
                [m.path for m in checked.todo],
                kind="after-rewind",
                session=session,
                message=f"after rewind to {target.id[:10]}",
            )
        except StoreError as e:
            # The writes are done: a store that fails now is exit 1 with the way back.
            raise engine.not_recorded("rewind", e, done, pre.id) from e
    out = RewindResult(
        the_plan,
        target,
        pre=pre.id,
        restored=done.restored,
        not_restored=done.not_restored,
        kept_dirs=done.kept_dirs,
        left=done.left,
        token=token,
    )
    engine.raise_if_failed(done, "rewind", pre.id)
    return out
