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
from ._results import RewindResult
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
    "Change",
    "ChangeKind",
    "ChangeStatus",
    "Entry",
    "Plan",
    "PlanAction",
    "PlanEffect",
    "PlanItem",
    "RewindResult",
    "SessionInfo",
    "SnapshotInfo",
    "StepInfo",
    "Tree",
    "TurnInfo",
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
