"""Store layer: what copying a workspace's history between stores moves, table by table.

Both stores have these tables with these columns (the PostgreSQL store adds the
workspace's id, and surrogate keys that a copy gives anew). In this order, a row only
names rows copied before it. The scan's cache is not copied: it is per machine, and the
first snapshot after a copy reads every file once.
"""

from __future__ import annotations

#: table -> its columns, in the order a copy writes them
COPY_TABLES: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "snapshots": (
        "id",
        "tree",
        "created_at",
        "kind",
        "session",
        "turn",
        "step",
        "message",
        "files",
        "skipped",
        "skipped_count",
        "duration_ms",
        "unreadable",
        "unreadable_count",
        "seq",
    ),
    "sessions": ("name", "baseline", "created_at"),
    "steps": ("session", "n", "turn", "before", "after", "label", "exit_code", "command"),
    "turns": (
        "session",
        "n",
        "label",
        "before",
        "after",
        "state",
        "begun_at",
        "ended_at",
        "begun_seq",
        "ended_seq",
    ),
    "touches": ("session", "turn", "path", "state", "tool_call_id", "at", "unconfirmed"),
    "changes": (
        "session",
        "turn",
        "path",
        "status",
        "added",
        "removed",
        "before",
        "after",
        "sha256",
        "undoable",
        "approximate",
        "unconfirmed",
    ),
    "ops": ("session", "kind", "turns", "pre", "data", "state", "created_at", "seq"),
}

#: table -> the columns that hold numbers of the store-wide sequence: a copy gives them
#: the target's own numbers, in the same order
SEQ_COLUMNS: dict[str, tuple[str, ...]] = {
    "snapshots": ("seq",),
    "turns": ("begun_seq", "ended_seq"),
    "ops": ("seq",),
}

#: settings that belong to one store, not to the history it holds
LOCAL_SETTINGS = frozenset({"schema_version", "store.id"})
