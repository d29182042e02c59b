"""Ops layer: taking turns back: undo, one-file undo, redo, revert and unrevert.

Each builds its moves from the turns' change lists and hands them to the one restore
engine (:mod:`._engine`), which checks, journals and writes. Every one of them decides and
writes under the store's exclusive lock (two of them at once cannot both take back the
same turn), writes nothing on a conflict, takes a snapshot before writing, and is recorded
in the ``ops`` table, in the same transaction as the turn states it changes, with the
state it wrote to each path (so a later one-file undo knows what the record says a file
holds now).

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .._fs import check_relpath
from ..errors import ConflictError, StoreError, UsageError
from ..model import DIR, EFFECTS, Entry, PlanAction, PlanEffect, decode_state, encode_state
from ..store import OpRow, Store
from . import _engine as engine
from ._after import record_after
from ._merge import MergePlan, Region, merge_moves, refusal_lines
from ._patch import file_patch
from ._plan import check_plan, plan_token
from ._records import first_change, last_recorded, recorded_state
from ._rewind import target_scope
from ._snapshot import Recording, _scan, record, scan
from ._treediff import lookup

if TYPE_CHECKING:
    from ..store import Meta


@dataclass
class TurnOpResult:
    """What an undo, redo, revert or unrevert did.

    Attributes:
        kind: ``undo``, ``redo``, ``revert``, ``unrevert`` or ``undo-file``.
        turns: the turns it took back or brought back.
        pre: the snapshot taken before it wrote anything (``rewind --to`` it to go back).
        restored: the paths it wrote or removed (folders end in ``/``).
        not_restored: paths whose state to write was never kept (over the size limit).
        conflicts: paths changed since the record that ``force`` overwrote.
        left: paths left as they are, and why: something out of scope (an ignored file)
            or never kept (over the size limit) is in the way, or the path was out of
            scope at the target; ``force`` does not write over these, since no snapshot
            could bring them back.
        nothing: true when there was nothing to do (nothing was written, no snapshot, no
            operation recorded): no turn to take back, or every path already as the
            operation would leave it (``reason`` says which, and why).
        reason: when ``nothing`` because every path already was as the operation would
            leave it, why, in words (``turn 4's changes are not in the workspace (a
            rewind took them back)``); None otherwise.
        actions: for each path written, what was done as a rewind plan says it: ``M``
            restored in place, ``A`` removed, ``D`` made again.
        ref: for a one-file undo, the ref of the state it went back to (``turn:N``, or
            the id of the snapshot before a command step).
        session: the session whose turns it acted on.
        dry_run: it only planned: nothing was written and no snapshot taken;
            ``restored`` and ``actions`` are what it would write, ``conflicts`` the paths
            changed since the record (refused unless ``force``, which would overwrite
            them; with ``merge``, those whose merge fails).
        why: for each conflict, the line that names it (``a.txt changed after turn 3``,
            and for a merge that fails, each region).
        merged: the paths whose state written (or, in a dry run, to write) is a
            three-way merge of the file now, the record and the state taken back to.
        markers: the paths written with conflict markers, and their regions.
        regions: in a dry run with ``merge`` (not markers), the paths whose merge would
            refuse the operation, and their regions (as a refusal's
            ``ConflictError.regions`` names them).
        preview: in a dry run, the unified diff from each merged file now to its merge.
        token: the plan's token (:mod:`._plan`): given back as ``plan``, the operation
            does exactly this plan or refuses (``StalePlanError``); None when there was
            nothing to do.
    """

    kind: str
    turns: list[int]
    pre: str | None
    restored: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    nothing: bool = False
    left: dict[str, str] = field(default_factory=dict)
    actions: dict[str, PlanAction] = field(default_factory=dict)
    ref: str | None = None
    session: str | None = None
    dry_run: bool = False
    why: dict[str, str] = field(default_factory=dict)
    merged: list[str] = field(default_factory=list)
    markers: dict[str, list[Region]] = field(default_factory=dict)
    preview: bytes = b""
    regions: dict[str, list[Region]] = field(default_factory=dict)
    token: str | None = None
    reason: str | None = None

    def summary(self) -> str:
        """One line for people, naming the session and turns it acted on.

        ``Undid turn 3 of session 'agent'. Files restored: 3.``, or ``Nothing to undo.``
        (with its reason, when there is one: ``Nothing to undo: turn 4's changes …``).
        """
        if self.nothing:
            why = f": {self.reason}" if self.reason else ""
            return f"Nothing to {self.kind}{why}."
        count = f"Files restored: {len(self.restored)}."
        if self.dry_run:
            count = f"Files it would restore: {len(self.restored)}."
            if self.conflicts:
                count += f" Conflicts: {len(self.conflicts)}."
        if self.merged:
            count += f" Merged: {len(self.merged)}."
        if self.markers:
            count += f" With conflict markers: {len(self.markers)}."
        named = self.session is not None
        of = f" of session {self.session!r}" if named else ""
        in_ = f" in session {self.session!r}" if named else ""
        if self.kind == "undo-file":
            would = "Would put" if self.dry_run else "Put"
            return f"{would} back as before {self.ref}{in_}. {count}"
        done = _DONE.get(self.kind, self.kind.capitalize())
        if self.dry_run:
            done = "Would take back hunks of" if self.kind == "undo-hunks" else f"Would {self.kind}"
        if not self.turns:
            return f"{done}{in_}. {count}"
        word = "turn" if len(self.turns) == 1 else "turns"
        return f"{done} {word} {', '.join(map(str, self.turns))}{of}. {count}"

    @property
    def effects(self) -> dict[str, PlanEffect]:
        """What is (or would be) done to each path of ``actions``: restore, remove, recreate."""
        return {p: EFFECTS[a] for p, a in self.actions.items()}

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``--json``, and the MCP tools that take back)."""
        return {
            "op": self.kind,
            "nothing": self.nothing,
            "turns": self.turns,
            "pre": self.pre,
            "restored": self.restored,
            "not_restored": self.not_restored,
            "conflicts": self.conflicts,
            "left": self.left,
            "actions": self.actions,
            "effects": self.effects,
            "ref": self.ref,
            "session": self.session,
            "dry_run": self.dry_run,
            "why": self.why,
            "merged": self.merged,
            "markers": {p: [r.to_json() for r in rs] for p, rs in self.markers.items()},
            "regions": {p: [r.to_json() for r in rs] for p, rs in self.regions.items()},
            "preview": self.preview.decode("utf-8", "replace"),
            "token": self.token,
            "reason": self.reason,
        }


_DONE = {
    "undo": "Undid",
    "undo-hunks": "Took back hunks of",
    "redo": "Redid",
    "revert": "Reverted",
    "unrevert": "Unreverted",
}

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


def _run(
    rec: Recording,
    session: str,
    kind: str,
    turns: list[int],
    pairs: list[_Pair] | Callable[[str], list[_Pair]],
    *,
    force: bool,
    describe: Callable[[str], str],
    target_tree: str | None,
    prune: bool,
    data: dict[str, Any],
    on_done: Callable[[Meta], None],
    record_as: str | None = None,
    record_state: str = "active",
    created: Callable[[str], bool] | None = None,
    merge: MergeOption = False,
    labels: tuple[str, str] = ("record", "target"),
    dry_run: bool = False,
    plan: str | None = None,
    unconfirmed: Collection[str] = (),
    nothing_why: Callable[[bool], str] | None = None,
    since: int | None = None,
    on_nothing: Callable[[Meta], None] | None = None,
) -> TurnOpResult:
    """Snapshot, check, write through the engine, and record one operation (under the lock).

    Args:
        rec: the store (the caller holds its exclusive lock), options and event sink.
        session: the session's name.
        kind: what it is called in the journal and the result.
        turns: the turns it concerns, for the record.
        pairs: (path, state expected now, state to write) for each path, or what makes
            them from the pre-operation snapshot's tree.
        force: write over paths that are not in the state expected.
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
        merge: a file not as the record says is merged (:mod:`._merge`): the record's
            state is the base, the file now one side, the state to write the other;
            ``"markers"`` writes a merge with conflicts too, with conflict markers.
        labels: the conflict markers' names of the record's state and the state to write.
        dry_run: plan only: no snapshot is taken and nothing is written or recorded.
        plan: the token of the plan the caller confirmed: the operation writes only if
            its plan now is that one.
        unconfirmed: paths a step whose end was never seen changed: conflicts (what
            they hold may be a person's edit), written over only with ``force``.
        nothing_why: when every path already is as the operation would leave it, the
            words that say why, given whether a rewind was taken after ``since``.
        since: the sequence number of what the operation takes back (a turn's end, an
            op); None: no rewind is looked for.
        on_nothing: when there is nothing to write, what the record notes instead of an
            operation (so that the stack walks on: an undo's turn is taken back).

    Returns:
        What it wrote; or, with every path already as it would leave it, a result with
        ``nothing`` and ``reason``: no snapshot taken, no operation recorded.

    Raises:
        StalePlanError: ``plan`` is not the plan now; nothing was written.
        ConflictError: a path is not as the record says, and ``force`` is false (with
            ``merge``: a path cannot be merged, or, without markers, its merge has
            conflicting regions, which the error names).
        StoreCorruptError: the store cannot give back what would be overwritten.
        RestoreError: some writes failed; the op is recorded with what was written.
    """
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
        rewound = since is not None and _rewound_since(store, since)
        reason = nothing_why(rewound) if nothing_why else "its paths already are as it leaves them"
        if on_nothing is not None and not dry_run:
            with store.meta.tx():
                on_nothing(store.meta)
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
                record_as or kind,
                turns,
                first_pre,
                kept,
                time.time(),
            )
            if record_state != "active":
                store.meta.set_op_state(op_id, record_state)
            if not done.failed:
                on_done(store.meta)
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
        merge: merge files changed since the turn (see :func:`_run`).
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

        return _run(
            rec,
            session,
            "undo",
            [n],
            [(p, after, before) for p, before, after in changes],
            force=force,
            describe=lambda p: f"{p} changed after turn {n}",
            target_tree=_tree_of(store, t.before),
            prune=True,
            data={"file": file},
            on_done=on_done,
            created=lambda _p: True,  # nothing there before: the turn's own
            merge=merge,
            labels=(f"turn {n}", f"before turn {n}"),
            dry_run=dry_run,
            plan=plan,
            unconfirmed=doubted,
            nothing_why=_gone([n], file),
            since=store.meta.turn_end_seqs(session).get(n),
            # Taken back already: the next undo goes on to the turn before.
            on_nothing=on_done,
        )


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
            return _redo_file(
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
        return _run(
            rec,
            session,
            "redo",
            [n],
            [
                (p, merged[p], lookup(get_tree, pre_tree, p))
                if p in merged and pre_tree
                else (p, before, after)
                for p, before, after in changes
            ],
            force=force,
            describe=lambda p: f"{p} changed after the undo of turn {n}",
            target_tree=_tree_of(store, pre),
            prune=False,
            data={"undo_op": op_id, "file": file},
            on_done=on_done,
            merge=merge,
            labels=(f"undo of turn {n}", f"turn {n}"),
            dry_run=dry_run,
            plan=plan,
            nothing_why=_back([n]),
            since=store.meta.op_seqs(session).get(op_id),
            on_nothing=on_done,  # brought back already: the next redo goes on
        )


def _redo_file(
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
    return _run(
        rec,
        session,
        "redo",
        [],
        pairs,
        force=force,
        describe=lambda p: f"{p} changed after its undo",
        target_tree=pre_tree,
        prune=False,
        data={"undo_op": op_id, "file": data.get("file")},
        on_done=lambda meta: meta.set_op_state(op_id, "redone"),
        merge=merge,
        labels=("its undo", "before its undo"),
        dry_run=dry_run,
        plan=plan,
        nothing_why=lambda rewound: (
            f"{data.get('file')} already holds what it held before "
            + ("its undo (a rewind brought it back)" if rewound else "its undo")
        ),
        since=store.meta.op_seqs(session).get(op_id),
        on_nothing=lambda meta: meta.set_op_state(op_id, "redone"),  # the next redo goes on
    )


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

        return _run(
            rec,
            session,
            "revert",
            nums,
            [(p, last_after[p], first[p]) for p in sorted(first)],
            force=force,
            describe=lambda p: f"{p} changed after turn {who[p]}",
            target_tree=_tree_of(store, turns[0].before),
            prune=True,
            data={"to_turn": to_turn},
            on_done=on_done,
            unconfirmed=_unconfirmed(store, session, nums),
            created=lambda _p: True,  # nothing there before: the turn's own
            merge=merge,
            labels=(
                f"turn {nums[-1]}" if len(nums) == 1 else f"turns {nums[0]}-{nums[-1]}",
                f"turn {to_turn}" if to_turn else "before turn 1",
            ),
            dry_run=dry_run,
            plan=plan,
            # No state moves: with no revert recorded, nothing could unrevert the turns.
            nothing_why=_gone(nums),
            since=max(store.meta.turn_end_seqs(session).get(n, 0) for n in nums),
        )


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
    return _run(
        rec,
        session,
        "revert",
        moved,
        pairs,
        force=force,
        describe=lambda p: f"{p} changed after the revert to turn {old_to}",
        target_tree=_tree_of(store, first_later.before) if first_later else None,
        prune=first_later is not None and to_turn < old_to,
        data={"to_turn": to_turn, "moved": op_id},
        on_done=on_done,
        record_as="revert-move",
        record_state="final",
        merge=merge,
        labels=(f"revert to turn {old_to}", f"turn {to_turn}" if to_turn else "before turn 1"),
        dry_run=dry_run,
        plan=plan,
        nothing_why=lambda _r: (
            "the workspace already holds "
            + (f"the state turn {to_turn} left" if to_turn else "the state before turn 1")
        ),
        on_nothing=on_done,  # the standing revert stands at to_turn now
    )


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

        return _run(
            rec,
            session,
            "unrevert",
            turns,
            [(p, first[p], lookup(get_tree, pre_tree, p)) for p in sorted(first)],
            force=force,
            describe=lambda p: f"{p} changed after the revert",
            target_tree=pre_tree,
            prune=False,
            data={"revert_op": op_id},
            on_done=on_done,
            merge=merge,
            labels=("the revert", "before the revert"),
            dry_run=dry_run,
            plan=plan,
            nothing_why=_back(turns),
            since=store.meta.op_seqs(session).get(op_id),
            on_nothing=on_done,
        )


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
        result = _run(
            rec,
            session,
            "undo-file",
            [],
            pairs,
            force=force,
            describe=lambda p: f"{p} changed after {source}",
            target_tree=_tree_of(store, snap),
            prune=True,
            data={"file": path},
            on_done=lambda meta: None,
            created=lambda _p: True,
            merge=merge,
            labels=(source or "the record", f"before {ref}"),
            dry_run=dry_run,
            plan=plan,
            nothing_why=lambda _r: f"{path} is already as before {ref}",
        )
        result.ref = ref
        return result
