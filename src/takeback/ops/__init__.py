"""Ops layer: the use cases (snapshot, refs, diff, turns, and every take-back); no printing.

Every operation that writes the workspace builds moves for the one restore engine
(``_engine``): rewind (``_rewind``), and undo, redo, revert and unrevert (``_undo``) and
one-file undo (``_undo_file``), each a take-back spec run by ``_takeback``, which with
``merge`` replaces a conflict's move by a three-way merge
(``_merge``). Turns and their change lists are ``_turns``. The retention policy is
``_policy``; what the store keeps, ``_keep`` and ``_mark``; gc and purge, ``_gc`` (its
slices, ``_sweep``); checking and measuring the store, ``_fsck``; copying a history
between stores, ``_copy``.

Each use case is loaded on first use (``ops.take`` loads ``_snapshot`` alone): a hook call
or a snapshot does not pay for merges, patches, rewinds and copies it never runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import loader

if TYPE_CHECKING:
    from ..model import TurnOpResult
    from ._audit import AuditResult, audit
    from ._bisect import BisectPoint, BisectResult, BisectRun, bisect, materialize
    from ._copy import CopyResult, copy_history, verify_objects
    from ._diff import DiffResult, FileDiff, diff, read_entry, turn_diff
    from ._fsck import DuResult, FsckResult, SessionUsage, du, fsck
    from ._gc import GcResult, gc
    from ._hunks import Hunk, turn_hunks, undo_hunks
    from ._patch import LineStat, TextDiff, is_binary, line_counts, line_stat, text_diff
    from ._policy import (
        LAST_GC,
        Policy,
        check_policy,
        claim_auto_gc,
        last_gc,
        read_policy,
        write_policy,
    )
    from ._quote import quote_path
    from ._records import recorded_state
    from ._refs import Resolved, resolve
    from ._rewind import RewindOutcome, rewind
    from ._snapshot import DEFAULT_MAX_FILE_BYTES, Options, Recording, record, scan, take
    from ._takeback import MergeOption
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
    from ._undo import redo, revert, undo, unrevert
    from ._undo_file import undo_file

#: public name -> the submodule that holds it
_WHERE = {
    "AuditResult": "_audit",
    "audit": "_audit",
    "Hunk": "_hunks",
    "turn_hunks": "_hunks",
    "undo_hunks": "_hunks",
    "BisectPoint": "_bisect",
    "BisectResult": "_bisect",
    "BisectRun": "_bisect",
    "bisect": "_bisect",
    "materialize": "_bisect",
    "DuResult": "_fsck",
    "FsckResult": "_fsck",
    "SessionUsage": "_fsck",
    "du": "_fsck",
    "fsck": "_fsck",
    "LAST_GC": "_policy",
    "GcResult": "_gc",
    "Policy": "_policy",
    "check_policy": "_policy",
    "claim_auto_gc": "_policy",
    "gc": "_gc",
    "last_gc": "_policy",
    "read_policy": "_policy",
    "write_policy": "_policy",
    "shared_lock": "_turns",
    "CopyResult": "_copy",
    "DEFAULT_MAX_FILE_BYTES": "_snapshot",
    "DiffResult": "_diff",
    "FileDiff": "_diff",
    "LineStat": "_patch",
    "MergeOption": "_takeback",
    "Options": "_snapshot",
    "Recording": "_snapshot",
    "Resolved": "_refs",
    "RewindOutcome": "_rewind",
    "TextDiff": "_patch",
    "TurnOpResult": "_takeback",
    "begin_turn": "_turns",
    "copy_history": "_copy",
    "diff": "_diff",
    "diff_trees": "_treediff",
    "end_turn": "_turns",
    "finish_open_steps": "_turns",
    "is_binary": "_patch",
    "join_command": "_turns",
    "line_counts": "_patch",
    "line_stat": "_patch",
    "lookup": "_treediff",
    "measure_turn": "_turns",
    "open_turn": "_turns",
    "quote_path": "_quote",
    "read_entry": "_diff",
    "read_state": "_turns",
    "record": "_snapshot",
    "recorded_state": "_records",
    "redo": "_undo",
    "resolve": "_refs",
    "revert": "_undo",
    "rewind": "_rewind",
    "scan": "_snapshot",
    "take": "_snapshot",
    "text_diff": "_patch",
    "touch": "_turns",
    "turn_diff": "_diff",
    "under": "_treediff",
    "undo": "_undo",
    "undo_file": "_undo_file",
    "unrevert": "_undo",
    "verify_objects": "_copy",
}

__all__ = [
    "DuResult",
    "FsckResult",
    "SessionUsage",
    "du",
    "fsck",
    "LAST_GC",
    "GcResult",
    "Policy",
    "check_policy",
    "claim_auto_gc",
    "gc",
    "last_gc",
    "read_policy",
    "write_policy",
    "shared_lock",
    "CopyResult",
    "copy_history",
    "verify_objects",
    "AuditResult",
    "audit",
    "Hunk",
    "turn_hunks",
    "undo_hunks",
    "BisectPoint",
    "BisectResult",
    "BisectRun",
    "bisect",
    "materialize",
    "DEFAULT_MAX_FILE_BYTES",
    "DiffResult",
    "FileDiff",
    "LineStat",
    "MergeOption",
    "Options",
    "Recording",
    "Resolved",
    "TextDiff",
    "RewindOutcome",
    "TurnOpResult",
    "begin_turn",
    "diff",
    "diff_trees",
    "end_turn",
    "finish_open_steps",
    "is_binary",
    "join_command",
    "line_counts",
    "line_stat",
    "measure_turn",
    "lookup",
    "open_turn",
    "quote_path",
    "read_entry",
    "read_state",
    "record",
    "recorded_state",
    "redo",
    "resolve",
    "revert",
    "rewind",
    "scan",
    "take",
    "text_diff",
    "touch",
    "turn_diff",
    "under",
    "undo",
    "undo_file",
    "unrevert",
]


if not TYPE_CHECKING:  # hidden from mypy, which then checks every ``ops.name`` strictly
    __getattr__ = loader(__name__, _WHERE)


def __dir__() -> list[str]:
    return sorted(__all__)
