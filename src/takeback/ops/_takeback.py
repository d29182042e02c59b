"""Ops layer: what every take-back (undo, one-file undo, redo, revert, unrevert) shares.

Each is a :class:`TakeBack`, a spec its builder (:mod:`._undo`, :mod:`._undo_file`,
:mod:`._hunks`) makes from the turns' change lists; :meth:`TakeBack.run` hands its moves
to the one restore engine (:mod:`._engine`), which checks, journals and writes. Every
one of them decides and writes under the store's exclusive lock (two of them at once
cannot both take back the same turn), writes nothing on a conflict, takes a snapshot
before writing, and is recorded in the ``ops`` table, in the same transaction as the
turn states it changes, with the state it wrote to each path (so a later one-file undo
knows what the record says a file holds now).

Undo and revert while a turn is still open (a design choice): the open turn is ended
first (by the API, the one place turns end, so that their events go out), its change
list made as at any end, and it is then the last turn. With hooks, an
interrupted reply leaves its turn open, and the person who types ``takeback undo`` means
that reply; undoing the last *ended* turn instead would skip the newest changes. A plain
undo takes back the last turn that changed something: a turn with an empty change list
(the agent's own reply asking for the undo, before it wrote anything) is not it.

The op stack: each undo and revert is an ``active`` op until redo (or unrevert) takes the
newest active one, or a new turn makes every active op ``final``. A standing revert moves:
``revert --to-turn N`` while one stands brings the workspace to exactly the state turn N
left (turns up to N applied, the later ones taken back), and ``unrevert`` still returns
to the state before the first revert began.

An operation killed half way and run again finishes the first run's work: it finds that
run's journal, and records the paths the first run wrote as its own, so that redo or
unrevert brings back the whole turn.

With ``merge``, a file changed since its record is not a conflict but a three-way merge
(:mod:`._merge`), whose bytes are stored and become that path's state to write; the op
records which paths it merged, and the way back (redo, unrevert) expects the merge there
and writes the file as the snapshot before the op has it. With ``dry_run``, the moves
are planned against a scan (no snapshot is recorded) and returned, with the diff each
merge would write; nothing is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConflictError, StoreError, UsageError
from ..model import DIR, Entry, PlanAction, Region, decode_state, encode_state
from ..model import TurnOpResult as TurnOpResult  # ops.TurnOpResult: the model's type
from ..store import Store
from . import _engine as engine
from ._after import record_after
from ._merge import MergePlan, merge_moves, refusal_lines
from ._patch import file_patch
from ._plan import check_plan, plan_token
from ._rewind import target_scope
from ._snapshot import Recording, _scan, record, scan
from ._treediff import lookup

if TYPE_CHECKING:
    from ..store import Meta


#: (path, state the record says is there now, state to write)
_Pair = tuple[str, Entry | None, Entry | None]

#: How a take-back treats a file changed since its record: refuse (False), merge and
#: refuse where regions conflict (True), or write conflict markers there ("markers").
MergeOption = bool | Literal["markers"]


@dataclass(frozen=True)
class _Turn:
    n: int
    before: str | None
    state: str


def _turns(store: Store, session: str) -> list[_Turn]:
    return [_Turn(r.n, r.before, r.state) for r in store.meta.turn_rows(session)]


def _changes(store: Store, session: str, n: int) -> list[tuple[str, Entry | None, Entry | None]]:
    return [
        (r.path, decode_state(r.before), decode_state(r.after))
        for r in store.meta.change_rows(session, n)
    ]


def _unconfirmed(store: Store, session: str, turns: list[int]) -> set[str]:
    """The paths of these turns' change lists that a step whose end was never seen changed."""
    return {r.path for n in turns for r in store.meta.change_rows(session, n) if r.unconfirmed}


def _tree_of(store: Store, snapshot_id: str | None) -> str | None:
    if snapshot_id is None:
        return None
    snap = store.meta.snapshot(snapshot_id)
    return None if snap is None else snap.tree


@dataclass(frozen=True)
class How:
    """How the caller asks a take-back to go: the options every take-back takes.

    Attributes:
        force: write over paths that are not in the state expected.
        merge: a file not as the record says is merged (:mod:`._merge`): the record's
            state is the base, the file now one side, the state to write the other;
            ``"markers"`` writes a merge with conflicts too, with conflict markers.
        dry_run: plan only: no snapshot is taken and nothing is written or recorded.
        plan: the token of the plan the caller confirmed: the operation writes only if
            its plan now is that one.
    """

    force: bool = False
    merge: MergeOption = False
    dry_run: bool = False
    plan: str | None = None


@dataclass(frozen=True)
class TakeBack:
    """One take-back, as its builder (undo, redo, revert, ...) decided it from the record.

    :meth:`run` snapshots, checks, writes through the engine and records it, under the
    store's exclusive lock, which the builder holds.

    Attributes:
        session: the session's name.
        kind: what it is called in the journal and the result.
        turns: the turns it concerns, for the record.
        pairs: (path, state expected now, state to write) for each path, or what makes
            them from the pre-operation snapshot's tree.
        describe: the line that names a conflict on a path.
        target_tree: the state the operation goes back to, where there is one: its
            ignore rules say what it never held, and its folders give their modes to
            folders made again.
        prune: remove folders a removal leaves empty that ``target_tree`` lacks.
        data: what the op row keeps, beside the paths written.
        on_done: updates turn and op states, in the transaction that records the op.
        record_as: the op's kind in the record (default: ``kind``).
        record_state: the op's state in the record.
        created: whether the record says the source created a path (what it writes
            there is nothing): its own output is removed even where the target's rules
            ignore it.
        labels: the conflict markers' names of the record's state and the state to write.
        unconfirmed: paths a step whose end was never seen changed: conflicts (what
            they hold may be a person's edit), written over only with ``force``.
        nothing_why: when every path already is as the operation would leave it, the
            words that say why, given whether a rewind was taken after ``since``.
        since: the sequence number of what the operation takes back (a turn's end, an
            op); None: no rewind is looked for.
        on_nothing: when there is nothing to write, what the record notes instead of an
            operation (so that the stack walks on: an undo's turn is taken back).
    """

    session: str
    kind: str
    turns: list[int]
    pairs: list[_Pair] | Callable[[str], list[_Pair]]
    describe: Callable[[str], str]
    target_tree: str | None
    prune: bool
    data: dict[str, Any]
    on_done: Callable[[Meta], None]
    record_as: str | None = None
    record_state: str = "active"
    created: Callable[[str], bool] | None = None
    labels: tuple[str, str] = ("record", "target")
    unconfirmed: Collection[str] = ()
    nothing_why: Callable[[bool], str] | None = None
    since: int | None = None
    on_nothing: Callable[[Meta], None] | None = None

    def run(self, rec: Recording, how: How) -> TurnOpResult:
        """Snapshot, check, write through the engine, and record it (under the lock).

        Args:
            rec: the store (the caller holds its exclusive lock), options and event sink.
            how: force, merge, dry run, and the plan confirmed.

        Returns:
            What it wrote; or, with every path already as it would leave it, a result
            with ``nothing`` and ``reason``: no snapshot taken, no operation recorded.

        Raises:
            StalePlanError: ``plan`` is not the plan now; nothing was written.
            ConflictError: a path is not as the record says, and ``force`` is false
                (with ``merge``: a path cannot be merged, or, without markers, its
                merge has conflicting regions, which the error names).
            StoreCorruptError: the store cannot give back what would be overwritten.
            RestoreError: some writes failed; the op is recorded with what was written.
        """
        return _run(rec, self, how)


def _run(rec: Recording, spec: TakeBack, how: How) -> TurnOpResult:
    """The body of :meth:`TakeBack.run`."""
    session, kind, turns, pairs = spec.session, spec.kind, spec.turns, spec.pairs
    describe, target_tree, prune, data = spec.describe, spec.target_tree, spec.prune, spec.data
    created, labels, unconfirmed = spec.created, spec.labels, spec.unconfirmed
    force, merge, dry_run, plan = how.force, how.merge, how.dry_run, how.plan
    store, opts = rec.store, rec.options
    if merge and force:
        raise UsageError("merge and force do not go together: force overwrites, merge keeps")
    previous = store.read_journal()
    save: Callable[[], None] | None = None
    if dry_run:
        now_tree = scan(store, opts).tree
    else:
        # Recorded as the snapshot before only once there is something to write.
        with store.lock(exclusive=False):
            scanned, save = _scan(store, opts)
        now_tree = scanned.tree
    if callable(pairs):
        pairs = pairs(now_tree)
    moves = engine.moves_from(store, now_tree, pairs, created=created)
    scope = target_scope(store, opts, target_tree) if target_tree else None
    checked = engine.check(store, moves, force=force, target_scope=scope)
    # The plan's token, from what decides it (the merges follow from the same states).
    token = plan_token(
        kind=kind,
        session=session,
        history=store.meta.history_seq(),
        subject=[turns, json.dumps(data, sort_keys=True, default=str), merge, force],
        checked=checked,
    )
    journal: dict[str, Any] = {
        "op": kind,
        "session": session,
        "turns": turns,
        "file": data.get("file"),
    }
    resumed = isinstance(previous, dict) and all(previous.get(k) == v for k, v in journal.items())
    if not (checked.todo or checked.conflicts or checked.left or checked.not_restored or resumed):
        # Every path already is as it would leave it: say why, record no operation. A
        # plan confirmed that showed something (a token; a plan of nothing has none) is
        # out of date, and refused before the record moves.
        if plan and not dry_run:
            check_plan(plan, token, kind=kind)
        rewound = spec.since is not None and _rewound_since(store, spec.since)
        reason = (
            spec.nothing_why(rewound)
            if spec.nothing_why
            else "its paths already are as it leaves them"
        )
        if spec.on_nothing is not None and not dry_run:
            with store.meta.tx():
                spec.on_nothing(store.meta)
        return TurnOpResult(
            kind, turns, None, nothing=True, session=session, dry_run=dry_run, reason=reason
        )
    pre = None
    if not dry_run:
        with store.lock(exclusive=False):
            pre = record(
                rec,
                scanned,
                kind=f"pre-{kind}",
                session=session,
                message=f"before {kind} of turn(s) {', '.join(map(str, turns))}",
                save=save,
            )
    if plan is not None and not dry_run:
        check_plan(plan, token, kind=kind)
    merged: MergePlan | None = None
    why: dict[str, str] = {}
    if merge and checked.conflicts:
        merged = merge_moves(
            moves,
            checked.conflicts,
            lambda e: store.objects.get(e.oid),
            labels=("now", *labels),
            markers=merge == "markers",
            resumed=_before_run(store, previous) if resumed else None,
        )
        refused = list(refusal_lines(merged, describe, markers=merge == "markers"))
        if refused and not dry_run:
            raise ConflictError(
                "\n".join(line for _p, line in refused)
                + "\nnothing was written"
                + (" (merge with markers writes them into the files)" if merged.regions else ""),
                conflicts=sorted(set(merged.unmerged) | set(merged.regions)),
                regions={
                    p: [dataclasses.replace(r, markers=None).to_json() for r in rs]
                    for p, rs in merged.regions.items()
                },
            )
        for p, line in refused:
            why[p] = f"{why[p]}; {line}" if p in why else line
        moves = merged.moves
        checked = engine.check(store, moves, target_scope=scope)
    describe = _unconfirmed_first(checked, unconfirmed, describe, force=force)
    why = {p: why.get(p) or describe(p) for p in checked.conflicts}
    if checked.conflicts and not force and not dry_run:
        engine.refuse_conflicts(
            checked, describe, hint="merge keeps both sides' edits, force overwrites"
        )
    marked = {p: list(rs) for p, rs in merged.regions.items()} if merged else {}
    merged_paths = sorted(merged.data) if merged else []
    if pre is None:
        result = _planned(store, kind, turns, session, checked, merged, marked, why)
        result.token = token
        return result
    if merged is not None:
        for data_ in merged.data.values():
            store.objects.put("blob", data_)
        store.objects.flush()
    done = engine.apply(
        store,
        checked,
        # A merge is named, so that the command that finishes an interrupted one merges too.
        journal={**journal, "data": {**data, "merge": merge} if merge else data},
        pre=pre.id,
        folder_modes=target_tree,
        prune_to=target_tree if prune else None,
        claim=rec.claim,
    )
    # What it wrote is recorded, so that ``status`` after it is clean. The writes are
    # done: a store that fails now (a lost connection, a full disk) is exit 1 with the
    # way back, never "refused before writing anything".
    try:
        record_after(
            rec,
            pre,
            [m.path for m in checked.todo],
            kind=f"after-{kind}",
            session=session,
            message=f"after {kind} of turn(s) {', '.join(map(str, turns))}",
        )
    except StoreError as e:
        raise engine.not_recorded(kind, e, done, pre.id) from e
    paths = [p.rstrip("/") for p in done.restored]
    first_pre = pre.id
    if resumed:
        assert previous is not None
        # The first run was killed after writing some paths; they are this op's too.
        planned = {p for p in previous.get("planned") or () if isinstance(p, str)}
        paths += [p for p in done.already if p in planned]
        if isinstance(previous.get("pre"), str):
            first_pre = previous["pre"]
    writes = {m.path: m.write for m in moves}
    wrote = {p: encode_state(writes[p]) for p in paths if p in writes}
    kept: dict[str, Any] = {**data, "paths": sorted(set(paths)), "wrote": wrote}
    merged_all = set(merged_paths) | {p for p in data.get("merged") or () if isinstance(p, str)}
    if merged_all:
        # What it wrote there is a merge, not the record's state: the way back (redo,
        # unrevert) expects the merge and gives back the file as it was before. (An op
        # may say so of paths it wrote without a conflict: hunks taken back.)
        kept["merged"] = sorted(p for p in merged_all if p in wrote)
    try:
        with store.meta.tx():
            op_id = store.meta.add_op(
                session,
                spec.record_as or kind,
                turns,
                first_pre,
                kept,
                time.time(),
            )
            if spec.record_state != "active":
                store.meta.set_op_state(op_id, spec.record_state)
            if not done.failed:
                spec.on_done(store.meta)
    except StoreError as e:
        raise engine.not_recorded(kind, e, done, pre.id) from e
    engine.raise_if_failed(done, kind, pre.id)
    actions: dict[str, PlanAction] = {
        m.path: "A" if m.write is None else "D" if m.now is None else "M"
        for m in checked.todo
        if m.path in wrote
    }
    return TurnOpResult(
        kind,
        turns,
        pre.id,
        done.restored,
        done.not_restored,
        done.conflicts if force else [],
        left=done.left,
        actions=actions,
        session=session,
        why=why if force else {},
        merged=[p for p in merged_paths if p in wrote],
        markers={p: rs for p, rs in marked.items() if p in wrote},
        token=token,
    )


def _rewound_since(store: Store, seq: int) -> bool:
    """Whether a rewind was taken after the store-wide sequence number ``seq``."""
    numbers = store.meta.seqs().snapshots
    return any(
        s.kind == "pre-rewind" and numbers.get(s.id, 0) > seq for s in store.meta.snapshots()
    )


def _unconfirmed_first(
    checked: engine.Checked,
    unconfirmed: Collection[str],
    describe: Callable[[str], str],
    *,
    force: bool,
) -> Callable[[str], str]:
    """Make the paths the record cannot vouch for conflicts; return how each is named.

    A step whose end was never seen (a denied or failed command, finished later) took in
    whatever changed while it was open: the record says the turn left those states, but
    a person may have. Each is a conflict, named as such, written only with ``force``.
    """
    flagged = {m.path for m in checked.todo if m.path in unconfirmed}
    if flagged:
        checked.conflicts = sorted(set(checked.conflicts) | flagged)
        if not force:
            checked.todo = [m for m in checked.todo if m.path not in flagged]

    def named(p: str) -> str:
        if p in flagged:
            return f"{p} changed in a step whose end was never seen (unconfirmed)"
        return describe(p)

    return named


def _before_run(store: Store, previous: dict[str, Any] | None) -> Callable[[str], Entry | None]:
    """Each planned path's state before the interrupted run that ``previous`` journals.

    Its merges were made from those states; a path it did not plan answers None.
    """
    planned = {p for p in (previous or {}).get("planned") or () if isinstance(p, str)}
    pre = (previous or {}).get("pre")
    tree = _tree_of(store, pre) if isinstance(pre, str) else None
    get_tree = store.objects.get_tree

    def state(path: str) -> Entry | None:
        return lookup(get_tree, tree, path) if tree and path in planned else None

    return state


def _planned(
    store: Store,
    kind: str,
    turns: list[int],
    session: str,
    checked: engine.Checked,
    merged: MergePlan | None,
    marked: dict[str, list[Region]],
    why: dict[str, str],
) -> TurnOpResult:
    """The result of a dry run: the plan, its conflicts, and the diff each merge would write."""
    actions: dict[str, PlanAction] = {}
    restored = []
    for m in checked.todo:
        # Named as the operation names it: a folder where one is made (or removed).
        made = m.write if m.write is not None else m.now
        folder = made is not None and made.kind == DIR
        restored.append(m.path + "/" if folder else m.path)
        actions[m.path] = "A" if m.write is None else "D" if m.now is None else "M"
    preview: list[bytes] = []
    names: list[str] = []
    if merged is not None:
        data = {hashlib.sha256(d).hexdigest(): d for d in merged.data.values()}

        def read(e: Entry) -> bytes:
            return data[e.oid] if e.oid in data else store.objects.get(e.oid)

        for m in checked.todo:
            if m.path in merged.data:
                names.append(m.path)
                preview.append(file_patch(m.path, m.now, m.write, read))
    return TurnOpResult(
        kind,
        turns,
        None,
        sorted(restored),
        list(checked.not_restored),
        list(checked.conflicts),
        left=dict(checked.left),
        actions=actions,
        session=session,
        dry_run=True,
        why=why,
        merged=names,
        markers={p: rs for p, rs in marked.items() if p in actions},
        preview=b"".join(preview),
        regions={
            p: [dataclasses.replace(r, markers=None) for r in rs]
            for p, rs in marked.items()
            if p not in actions
        },
    )
