"""Model layer: pure data, no I/O. Entries and trees, snapshot records, plans and changes."""

from __future__ import annotations

from ._plan import EFFECTS, Plan, PlanAction, PlanEffect, PlanItem
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
from ._results import Lines, Region, RewindResult, TurnOpResult
from ._tree import (
    DIR,
    FILE,
    LARGE,
    LINK,
    UNREADABLE,
    Entry,
    Tree,
    decode_state,
    decode_tree,
    encode_state,
    encode_tree,
    entry_state,
    tree_links,
)

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
    "decode_tree",
    "encode_state",
    "encode_tree",
    "entry_state",
    "tree_links",
    "unreadable_json",
]
