"""Ops layer: copying a workspace's whole history from one store to another.

The source is read at one moment: its rows in one transaction (its writers wait for it),
then the list of its objects (every object a row names was committed before the row, and
gc, which alone removes objects, is held off by the source's shared lock), and the
journal of an interrupted restore, which comes along (no restore runs meanwhile: it would
hold the exclusive lock). Objects go first into the target (each read back from the source
through its hash check, each base before the deltas built on it, stored again by the
target's own rules), then the rows, table by table in one transaction of the target's,
then the journal; what the target then holds is verified through a fresh opening (no cache
between): every listed object by its hash (:func:`verify_objects`), and every row's
objects by the store's structure check (fsck).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..store import COPY_TABLES, LOCAL_SETTINGS, SEQ_COLUMNS, Store


@dataclass
class CopyResult:
    """What a copy moved.

    Attributes:
        source: where the history was read (a folder, or a database's address).
        target: where it was written.
        objects: how many objects (blobs and trees) were copied.
        bytes: their size, uncompressed.
        verified: how many the target gave back whole (by hash) once the copy was done.
        rows: how many rows of each table were copied.
        interrupted: the operation of an interrupted restore whose journal came along
            (the target's ``status`` says how to finish it or take it back), else None.
    """

    source: str
    target: str
    objects: int = 0
    bytes: int = 0
    verified: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    interrupted: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``store copy --json``)."""
        return {
            "source": self.source,
            "target": self.target,
            "objects": self.objects,
            "bytes": self.bytes,
            "verified": self.verified,
            "rows": dict(self.rows),
            "interrupted": self.interrupted,
        }


def copy_history(
    src: Store, dst: Store, *, on_progress: Callable[[int, int], None] | None = None
) -> tuple[CopyResult, list[str]]:
    """Copy everything ``src`` holds for its workspace into ``dst``, which must be empty.

    Returns:
        What was copied, and the ids of the objects (for :func:`verify_objects`).

    Raises:
        UsageError: ``dst`` already holds a history.
        StoreCorruptError: an object of ``src`` fails its hash check (nothing of the
            rows is written then).
    """
    if dst.meta.latest_snapshot() is not None:
        raise UsageError(
            f"{dst.url} already holds a history for this workspace: copy into an empty store"
        )
    result = CopyResult(src.url, dst.url)
    with src.lock(exclusive=False), dst.lock(exclusive=True):
        # One read of every row (the source's writers wait for it), then the objects:
        # everything a row read names was committed before it.
        with contextlib.nullcontext() if src.readonly else src.meta.tx():
            tables = {t: src.meta.copy_rows(t) for t in COPY_TABLES}
        tables["meta"] = [r for r in tables["meta"] if r[0] not in LOCAL_SETTINGS]
        journal = src.read_journal()
        entries = src.objects.entries()
        for i, (oid, kind, base) in enumerate(entries, 1):
            data = src.objects.get(oid)
            dst.objects.put(kind, data, oid=oid, base=base)
            result.objects += 1
            result.bytes += len(data)
            if on_progress is not None:
                on_progress(i, len(entries))
        dst.objects.flush()
        with dst.meta.tx():
            _renumber(dst, tables)
            for table, rows in tables.items():
                dst.meta.add_copied_rows(table, rows)
                result.rows[table] = len(rows)
        if journal is not None:
            # An interrupted restore: the copy holds what finishes it or takes it back.
            result.interrupted = str(journal.get("op") or "restore")
            if not journal.get("broken"):
                dst.write_journal(journal)
    return result, [oid for oid, _kind, _base in entries]


def _renumber(dst: Store, tables: dict[str, list[tuple[Any, ...]]]) -> None:
    """Give the rows' sequence numbers the target's own, keeping their order.

    The target hands out its numbers (a database's sequence is shared by every
    workspace in it); the source's order of snapshots, turns and ops stays.
    """
    where = {t: [COPY_TABLES[t].index(c) for c in cols] for t, cols in SEQ_COLUMNS.items()}
    seen = sorted(
        {r[i] for t, idx in where.items() for r in tables[t] for i in idx if r[i] is not None}
    )
    new = {old: dst.meta.next_seq() for old in seen}
    for t, idx in where.items():
        rows = []
        for r in tables[t]:
            row = list(r)
            for i in idx:
                if row[i] is not None:
                    row[i] = new[row[i]]
            rows.append(tuple(row))
        tables[t] = rows


def verify_objects(store: Store, oids: list[str]) -> int:
    """Read every object back (hash-checked); return how many.

    Raises:
        StoreCorruptError: one is missing or fails its check.
    """
    for oid in oids:
        store.objects.get(oid)
    return len(oids)
