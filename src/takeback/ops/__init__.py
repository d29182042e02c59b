"""Ops layer: the use cases (snapshot, refs, diff, plan and apply a restore); no printing."""

from __future__ import annotations

from ._diff import DiffResult, FileDiff, diff, read_entry
from ._patch import is_binary, line_counts, quote_path
from ._refs import Resolved, resolve
from ._restore import RestoreResult, apply_plan, make_plan
from ._snapshot import DEFAULT_MAX_FILE_BYTES, Options, record, scan, take
from ._treediff import diff_trees, lookup, under
from ._turns import (
    TurnOpResult,
    begin_turn,
    end_turn,
    finish_open_steps,
    join_command,
    open_turn,
    read_state,
    redo,
    revert,
    touch,
    undo,
    unrevert,
)

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DiffResult",
    "FileDiff",
    "Options",
    "Resolved",
    "RestoreResult",
    "TurnOpResult",
    "apply_plan",
    "begin_turn",
    "diff",
    "diff_trees",
    "end_turn",
    "finish_open_steps",
    "is_binary",
    "join_command",
    "line_counts",
    "lookup",
    "make_plan",
    "open_turn",
    "quote_path",
    "read_entry",
    "read_state",
    "record",
    "redo",
    "resolve",
    "revert",
    "scan",
    "take",
    "touch",
    "under",
    "undo",
    "unrevert",
]
