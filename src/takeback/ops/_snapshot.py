"""Ops layer: taking a snapshot (scan, then one row that points at the scan's tree)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import DIR, Entry, SnapshotInfo, encode_state
from ..scan import (
    CACHE_KEY,
    LEGACY_KEY,
    OLDER_KEY,
    FolderCache,
    Scanner,
    ScanResult,
    known_cache,
    load_cache,
    load_legacy_cache,
)
from ..store import Meta, Store

DEFAULT_MAX_FILE_BYTES = 16 << 20


def _cores() -> int:
    """How many cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def read_workers() -> int:
    """How many threads read, hash and compress files: one per core this process may use.

    More would only queue: the work is CPU-bound once the files are in the page cache,
    and the walking thread needs a core of its own now and then.
    """
    return max(2, min(_cores(), 8))


def check_forks() -> int:
    """How many forked workers share a full scan's check pass: one per other core."""
    return max(1, min(_cores() - 1, 7))


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


#: A service-fed scan of at most this many folders reads and writes on the calling thread.
FEW_FOLDERS = 64

#: The kv key of the service mark the scan cache was taken at (b"": none).
MARK_KEY = "service-mark"


def _options_tag(opts: Options) -> bytes:
    # A cache taken under other options (another size limit) is not reused through a hint.
    return b"|%d|%d" % (opts.max_file_bytes, int(opts.exclude_env))


def stored_cache(meta: Meta) -> tuple[bytes | None, FolderCache | None]:
    """Return the store's folder cache, read in one statement, with its header's token.

    The cache is None when there is none or when it is damaged; one saved in the format
    before shards has an empty token (and the header's is None).
    """
    token, cache = load_cache(meta.get_kv_prefix(CACHE_KEY))
    if token is None and cache is None:
        _older, cache = load_cache(meta.get_kv_prefix(OLDER_KEY), OLDER_KEY)
        if cache is None:
            cache = load_legacy_cache(meta.get_kv(LEGACY_KEY))
    return token, cache


def scan(
    store: Store,
    opts: Options,
    *,
    on_progress: Callable[[int], None] | None = None,
    use_service: bool = True,
) -> ScanResult:
    """Scan the workspace into the store's objects (no snapshot row is written).

    With the workspace's watching service running and a cache taken at one of its marks,
    only the folders the service saw change are listed (``result.mode == "service"``);
    otherwise, or at any doubt, every folder is (``"full"``, ``result.reason`` says why).
    The new mark is asked for before anything is read, and kept with the new cache.
    """
    result, save = _scan(store, opts, on_progress=on_progress, use_service=use_service)
    if save is not None:
        with store.meta.tx():
            save()
    return result


def _scan(
    store: Store,
    opts: Options,
    *,
    on_progress: Callable[[int], None] | None = None,
    use_service: bool = True,
) -> tuple[ScanResult, Callable[[], None] | None]:
    """Scan (see :func:`scan`); return the result and what saves its cache.

    What saves the cache is called in a write transaction of the store's rows (None:
    nothing to save).
    """
    from .._service_client import Mark, changes_since

    meta = store.meta
    tag = _options_tag(opts)
    kept_raw = meta.get_kv(MARK_KEY)
    token = meta.get_kv(CACHE_KEY)
    # The cache this process last read or made, when the store still holds it; else the
    # header and every shard, read in one statement.
    cache = known_cache(token)
    if cache is None:
        token, cache = stored_cache(meta)
    kept: Mark | None = None
    why = ""
    if cache is None:
        why = "nothing was scanned here yet" if token is None else "the scan cache is damaged"
    elif not cache.token:
        why = "the scan cache is of an older format"
    elif meta.get_kv(MARK_KEY) != kept_raw:
        why = "another scan saved its cache meanwhile"
    elif kept_raw and kept_raw.endswith(tag):
        kept = Mark.decode(kept_raw[: -len(tag)])
    elif kept_raw:
        why = "the last scan was taken with other options"
    changes = changes_since(store.path, kept) if use_service else None
    hint: list[str] | None = None
    if changes is None:
        why = why or "the service was not asked"
    elif changes.dirs is None:
        why = why or changes.reason
    elif not why:
        hint = changes.dirs
        if changes.subtrees and cache is not None:
            # Folders the service could not watch (the watch limit): they and every
            # folder below them are listed, as a full scan of that part would.
            hint = hint + _below(cache.folders, changes.subtrees)

    def scanner_for(named: list[str] | None) -> Scanner:
        few = named is not None and len(named) <= FEW_FOLDERS
        return Scanner(
            store.root,
            put=store.objects.put,
            cache=cache,
            dircache_get=meta.get_dircache,
            max_file_bytes=opts.max_file_bytes,
            on_progress=on_progress,
            exclude_env=opts.exclude_env,
            exclude=[store.path],
            pack=store.objects.pack,
            put_packed=store.objects.put_packed,
            # A few folders the service named: reading their files here costs less than
            # handing them to threads and waiting for them.
            workers=0 if few else read_workers(),
            forks=check_forks(),
            get=store.objects.get_stored,
        )

    scanner = scanner_for(hint)
    # Full batches of objects are committed by a writer thread while the walk goes on
    # (a first snapshot writes hundreds of megabytes); a few folders' are committed here.
    behind = store.objects.write_behind() if hint is None or len(hint) > FEW_FOLDERS else None
    with behind or contextlib.nullcontext():
        result = scanner.scan(hint=hint, recheck_index=bool(changes and changes.index))
        if scanner.not_vouched:
            # A hard link was made or removed (the file's other names may lie in folders
            # the service saw no change in), say. Scan in full (what was stored stays,
            # unused).
            hint, why = None, scanner.not_vouched
            result = scanner_for(None).scan()
        # Objects first, then the cache rows that name them: a crash in between leaves
        # unreferenced objects, never a cache entry pointing at nothing. The cache and the
        # mark it was taken at are written together: the pair is always one scan's.
        store.objects.flush()
    if hint is not None:
        result.mode = "service"
        result.reason = f"{len(hint)} folder(s) changed"
    else:
        result.reason = why
    new_mark = changes.mark.encode() + tag if changes and changes.mark else None
    # The cache is saved only over the one it was made from (a header with the token this
    # scan read): shards of two scans are never mixed. If another scan saved meanwhile,
    # its cache and mark stay, a pair.
    read = cache.token if cache is not None and cache.token else token

    def save_cache() -> None:
        if meta.get_kv(CACHE_KEY) != read:
            return
        assert result.cache is not None
        meta.set_kvs(result.cache)
        if new_mark is not None or meta.get_kv(MARK_KEY) is not None:
            meta.set_kv(MARK_KEY, new_mark or b"")
        meta.put_dircache(result.cache_rows)
        if cache is not None and not cache.token:
            # The cache before shards, read by this scan: its detailed rows are of the
            # same format, and stay.
            meta.set_kvs({LEGACY_KEY: None})
        # A cache of an older format is never read again: drop it with its rows.
        if meta.drop_kv_except(CACHE_KEY, prefix="dirs-"):
            meta.put_dircache({d: None for d in meta.dircache_dirs() if d not in result.cache_rows})

    def vouch() -> None:
        # The cache is as it was, now vouched for up to the new mark, if the stored pair is
        # still the one this scan read.
        if meta.get_kv(MARK_KEY) == kept_raw and meta.get_kv(CACHE_KEY) == read:
            meta.set_kv(MARK_KEY, new_mark or b"")

    if result.cache is not None:
        return result, save_cache
    if new_mark is not None and cache is not None and cache.token:
        return result, vouch
    return result, None


def _below(folders: Iterable[str], tops: Sequence[str]) -> list[str]:
    """The folders of the cache at or below any of ``tops``."""
    wanted = set(tops)
    out = list(tops)
    for rel in folders:
        at = rel
        while at:
            at = at.rpartition("/")[0]
            if at in wanted or rel in wanted:
                out.append(rel)
                break
    return out


def record(
    rec: Recording,
    result: ScanResult,
    *,
    kind: str,
    session: str | None = None,
    turn: int | None = None,
    step: int | None = None,
    message: str = "",
    save: Callable[[], None] | None = None,
    also: Callable[[SnapshotInfo], None] | None = None,
) -> SnapshotInfo:
    """Write the snapshot row for a scan whose objects are committed; say so to the sink.

    ``save`` (what :func:`_scan` returned) saves the scan's cache in the same commit, and
    ``also`` writes the rows that name the snapshot (a step's start or end) in it too:
    one synced commit where there were several, and never a row naming a snapshot that
    a crash left unwritten.
    """
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
        scan_mode=result.mode,
        scan_reason=result.reason,
    )
    with store.meta.tx():
        if save is not None:
            save()
        store.meta.add_snapshot(info)
        if also is not None:
            also(info)
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
    also: Callable[[SnapshotInfo], None] | None = None,
) -> SnapshotInfo:
    """Scan and record a snapshot; the order is objects, trees, then the row.

    ``also``: rows written in the snapshot row's commit (see :func:`record`).
    """
    store, opts = rec.store, rec.options
    with store.lock(exclusive=False):
        result, save = _scan(store, opts, on_progress=on_progress)
        return record(
            rec,
            result,
            kind=kind,
            session=session,
            turn=turn,
            step=step,
            message=message,
            save=save,
            also=also,
        )
