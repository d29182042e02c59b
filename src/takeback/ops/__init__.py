"""Ops layer: the use cases (snapshot, refs, diff, turns, and every take-back); no printing.

Every operation that writes the workspace builds moves for the one restore engine
(``_engine``): rewind (``_rewind``), and undo, one-file undo, redo, revert and unrevert
(``_takeback``), which with ``merge`` replaces a conflict's move by a three-way merge
(``_merge``). Turns and their change lists are ``_turns``. What the store keeps, gc
and purge are ``_gc``; checking and measuring the store, ``_fsck``; copying a history
between stores, ``_copy``.
"""

from __future__ import annotations

from ._copy import CopyResult, copy_history, verify_objects
from ._diff import DiffResult, FileDiff, diff, read_entry, turn_diff
from ._fsck import DuResult, FsckResult, SessionUsage, du, fsck
from ._gc import (
    LAST_GC,
    GcResult,
    Policy,
    check_policy,
    claim_auto_gc,
    gc,
    last_gc,
    read_policy,
    write_policy,
)
from ._patch import LineStat, TextDiff, is_binary, line_counts, line_stat, quote_path, text_diff
from ._refs import Resolved, resolve
from ._rewind import RewindOutcome, rewind
from ._snapshot import DEFAULT_MAX_FILE_BYTES, Options, Recording, record, scan, take
from ._takeback import (
    MergeOption,
    TurnOpResult,
    recorded_state,
    redo,
    revert,
    undo,
    undo_file,
    unrevert,
)
from ._treediff import diff_trees, lookup, under
from ._turns import (
    begin_turn,
    end_turn,
    finish_open_steps,
    join_command,
    measure_turn,
    open_turn,
    read_state,
    shared_lock,
    touch,
)

__all__ = [
    "CopyResult",
    "copy_history",
    "verify_objects",
    "DEFAULT_MAX_FILE_BYTES",
    "DiffResult",
    "DuResult",
    "FileDiff",
    "FsckResult",
    "LAST_GC",
    "GcResult",
    "Policy",
    "SessionUsage",
    "LineStat",
    "MergeOption",
    "Options",
    "Recording",
    "Resolved",
    "TextDiff",
    "RewindOutcome",
    "TurnOpResult",
    "begin_turn",
    "check_policy",
    "claim_auto_gc",
    "diff",
    "du",
    "diff_trees",
    "end_turn",
    "finish_open_steps",
    "fsck",
    "gc",
    "is_binary",
    "join_command",
    "last_gc",
    "line_counts",
    "line_stat",
    "measure_turn",
    "lookup",
    "open_turn",
    "quote_path",
    "read_entry",
    "read_policy",
    "read_state",
    "record",
    "recorded_state",
    "redo",
    "resolve",
    "revert",
    "rewind",
    "scan",
    "shared_lock",
    "take",
    "text_diff",
    "touch",
    "turn_diff",
    "under",
    "undo",
    "undo_file",
    "unrevert",
    "write_policy",
]
