"""Model layer: pure data, no I/O. Entries and trees, snapshot records, plans and changes.

Trees and records are loaded with the package; plans and take-backs' results on first use
(``model.Plan``): a snapshot in a process of its own makes neither, and their dataclasses
are a few milliseconds of its start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import loader
from ._records import (
    Change,
    ChangeKind,
    ChangeStatus,
    SessionInfo,
    SnapshotInfo,
    StepInfo,
    TurnInfo,
    TurnState,
    change_kind,
    unreadable_json,
)
from ._tree import (
    DIR,
    FILE,
    LARGE,
    LINK,
    UNREADABLE,
    Entry,
    Tree,
    changed_entries,
    decode_state,
    decode_tree,
    encode_state,
    encode_tree,
    entry_state,
    replace_ids,
    tree_links,
)

if TYPE_CHECKING:
    from ._plan import EFFECTS, Plan, PlanAction, PlanEffect, PlanItem
    from ._results import Lines, Region, RewindResult, TurnOpResult

#: name loaded on first use -> the submodule that holds it
_LATER = {
    **dict.fromkeys(("EFFECTS", "Plan", "PlanAction", "PlanEffect", "PlanItem"), "_plan"),
    **dict.fromkeys(("Lines", "Region", "RewindResult", "TurnOpResult"), "_results"),
}

__all__ = [
    "DIR",
    "EFFECTS",
    "FILE",
    "LARGE",
    "LINK",
    "Lines",
    "Change",
    "ChangeKind",
    "ChangeStatus",
    "Entry",
    "Plan",
    "PlanAction",
    "PlanEffect",
    "PlanItem",
    "Region",
    "RewindResult",
    "SessionInfo",
    "SnapshotInfo",
    "StepInfo",
    "Tree",
    "TurnInfo",
    "TurnOpResult",
    "TurnState",
    "UNREADABLE",
    "change_kind",
    "decode_state",
    "changed_entries",
    "decode_tree",
    "encode_state",
    "encode_tree",
    "entry_state",
    "replace_ids",
    "tree_links",
    "unreadable_json",
]


if not TYPE_CHECKING:  # hidden from mypy, which then checks every ``model.name`` strictly
    __getattr__ = loader(__name__, _LATER)
