"""Ops layer: taking a snapshot (scan, then one row that points at the scan's tree)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import DIR, Entry, SnapshotInfo, encode_state
from ..scan import CACHE_KEY, Scanner, ScanResult
from ..store import Store

DEFAULT_MAX_FILE_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class Options:
    """What a workspace is configured with."""

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    exclude_env: bool = True


@dataclass(frozen=True)
class Recording:
    """What every use case works with: the open store, the options, where events go.

    Attributes:
        store: the open store (its root is the workspace).
        options: the workspace's options.
        emit: takes each event (``snapshot.taken``, ...): logs it in the store and tells
            the listeners (``Workspace.emit``; ``store.log_event`` only logs).
        join: (session, turn): the open turn that a take-back's writes join (the agent's
            own take-back, asked over MCP inside its reply); None: they join none.
    """

    store: Store
    options: Options
    emit: Callable[[dict[str, Any]], None]
    join: tuple[str, int] | None = None

    def claim(self, states: Sequence[tuple[str, Entry | None]]) -> None:
        """Touch paths about to be written in the ``join`` turn, with their states now.

        Called by the restore engine before its first write, so that what a take-back
        writes inside a reply is that reply's change (undo of the reply takes it back).
        A path the turn already kept keeps its earlier state.
        """
        if self.join is None or not states:
            return
        session, turn = self.join
        meta = self.store.meta
        row = meta.turn_row(session, turn)
        if row is None or row.state != "open":
            return
        with meta.tx():
            for path, now in states:
                # A folder is kept as one (its mode); its files are changes of their own.
                e = Entry(DIR, now.mode, "", 0) if now is not None and now.kind == DIR else now
                meta.add_touch(session, turn, path, encode_state(e), None)


def scan(
    store: Store,
    opts: Options,
    *,
    on_progress: Callable[[int], None] | None = None,
    hint: Iterable[str] | None = None,
) -> ScanResult:
    """Scan the workspace into the store's objects (no snapshot row is written).

    ``hint``: the paths known to have changed (a watcher's); only their folders are
    listed again (None: everything is walked).
    """
    meta = store.meta
    scanner = Scanner(
        store.root,
        put=store.objects.put,
        cache_get=meta.get_kv,
        dircache_get=meta.get_dircache,
        max_file_bytes=opts.max_file_bytes,
        on_progress=on_progress,
        exclude_env=opts.exclude_env,
        exclude=[store.path],
    )
    result = scanner.scan(hint=hint)
    # Objects first, then the cache rows that name them: a crash in between leaves
    # unreferenced objects, never a cache entry pointing at nothing.
    store.objects.flush()
    if result.cache is not None:
        with meta.tx():
            meta.set_kv(CACHE_KEY, result.cache)
            meta.put_dircache(result.cache_rows)
            # A cache of an older format is never read again: drop it with its rows.
            if meta.drop_kv_except(CACHE_KEY, prefix="dirs-"):
                meta.put_dircache(
                    {d: None for d in meta.dircache_dirs() if d not in result.cache_rows}
                )
    return result


def record(
    rec: Recording,
    result: ScanResult,
    *,
    kind: str,
    session: str | None = None,
    turn: int | None = None,
    step: int | None = None,
    message: str = "",
) -> SnapshotInfo:
    """Write the snapshot row for a scan whose objects are committed; say so to the sink."""
    store = rec.store
    created = time.time()
    body = json.dumps(
        [result.tree, created, kind, session, turn, step, message], separators=(",", ":")
    ).encode()
    info = SnapshotInfo(
        id=hashlib.sha256(body).hexdigest(),
        tree=result.tree,
        created_at=created,
        kind=kind,
        session=session,
        turn=turn,
        step=step,
        message=message,
        files=result.files,
        skipped=tuple(result.skipped),
        skipped_count=result.skipped_count,
        duration_ms=result.duration_ms,
        unreadable=tuple(result.unreadable),
        unreadable_count=result.unreadable_count,
    )
    with store.meta.tx():
        store.meta.add_snapshot(info)
    rec.emit(
        {
            "event": "snapshot.taken",
            "id": info.id,
            "files": info.files,
            "duration_ms": info.duration_ms,
            "at": created,
        }
    )
    return info


def take(
    rec: Recording,
    *,
    kind: str,
    session: str | None = None,
    turn: int | None = None,
    step: int | None = None,
    message: str = "",
    on_progress: Callable[[int], None] | None = None,
) -> SnapshotInfo:
    """Scan and record a snapshot; the order is objects, trees, then the row."""
    store, opts = rec.store, rec.options
    with store.lock(exclusive=False):
        result = scan(store, opts, on_progress=on_progress)
        return record(
            rec, result, kind=kind, session=session, turn=turn, step=step, message=message
        )
