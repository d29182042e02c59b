"""Model layer: what take-backs and rewinds return.

One type each from the use case (``ops``) to the API and every face (``--json``, the MCP
tools, the page), each rendering from ``to_json``: ``RewindResult`` (a rewind's plan and,
unless it was a dry run, what it did), ``TurnOpResult`` (an undo, redo, revert or
unrevert), and ``Region`` (where a merge's sides changed the same lines). They are data:
what they say in sentences for people is the API's ``_sentences`` (a take-back's
summary) and the merge's (a region's lines, in a conflict's ``why``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._plan import EFFECTS, Plan, PlanAction, PlanEffect
from ._records import SnapshotInfo


@dataclass
class RewindResult:
    """What a rewind planned and, unless it was a dry run, did.

    ``ops.rewind`` makes it; ``Workspace.rewind`` adds the ref's ``note``.
    """

    plan: Plan
    target: SnapshotInfo
    #: what the ref named, when it is not exactly what was asked (``note:`` on the CLI)
    note: str = ""
    dry_run: bool = False
    pre: str | None = None
    restored: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    kept_dirs: list[str] = field(default_factory=list)
    #: paths left as they are, and why (out of scope and in the way, never kept, ...)
    left: dict[str, str] = field(default_factory=dict)
    #: the plan's token: ``rewind(..., plan=token)`` does exactly this plan or refuses
    token: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``rewind --json``, MCP ``rewind``).

        A dry run's ``not_restored`` and ``left`` are what the plan foresees.
        """
        plan = self.plan
        return {
            "target": self.target.id,
            "dry_run": self.dry_run,
            "note": self.note,
            "plan": [i.to_json() for i in plan.items],
            "counts": plan.counts(),
            "pre_rewind": self.pre,
            "restored": self.restored,
            "not_restored": list(plan.not_restorable) if self.dry_run else list(self.not_restored),
            "kept_dirs": self.kept_dirs,
            "left": plan.left if self.dry_run else self.left,
            "token": self.token,
        }


Lines = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Region:
    """One region both sides changed differently: where it is in each version.

    Attributes:
        now: its lines in the file as it is now.
        record: its lines in the state the record expects (what the turn left).
        target: its lines in the state the operation would write.
        markers: its lines (first marker to last) in the file written with conflict
            markers; None when none are written.
    """

    now: Lines
    record: Lines
    target: Lines
    markers: Lines | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the machine form: each version's ``[first, last]`` line (1-based)."""
        out: dict[str, Any] = {
            "now": list(self.now),
            "record": list(self.record),
            "target": list(self.target),
        }
        if self.markers is not None:
            out["markers"] = list(self.markers)
        return out


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
