"""Ops layer: turning a ref (id prefix, ``start``, step ``N``, ``turn:N``) into a snapshot."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._types import MIN_PREFIX, short
from ..errors import RefError
from ..model import SnapshotInfo
from ..store import Store

_HEX = re.compile(r"^[0-9a-f]+$")


@dataclass(frozen=True, slots=True)
class Resolved:
    """A ref's snapshot, and a note when the ref was read as something near it."""

    snapshot: SnapshotInfo
    note: str = ""


def resolve(store: Store, ref: str, session: str) -> Resolved:
    """Return the snapshot a ref names.

    An all-digit ref is a step number of the session when that step exists, and an id
    prefix otherwise.

    Raises:
        RefError: unknown, ambiguous or too short.
    """
    meta = store.meta
    ref = ref.strip()
    if ref == "start":
        s = meta.session(session)
        if s is None:
            raise RefError(f"no session {session!r}: 'start' names its baseline", ref=ref)
        return Resolved(_must(store, s.baseline, ref))
    if ref.startswith("turn:"):
        num = ref[5:]
        if not num.isdigit():
            raise RefError(f"bad turn ref {ref!r}: expected turn:N", ref=ref)
        row = meta.turn_row(session, int(num))
        if row is None or row.before is None:
            raise RefError(f"no turn {num} in session {session!r}", ref=ref)
        return Resolved(_must(store, row.before, ref))
    if ref.isdigit():
        n = int(ref)
        st = meta.step(session, n)
        if st is not None:
            return _step_ref(store, session, n, ref)
        if len(ref) < MIN_PREFIX:
            raise RefError(f"no step {n} in session {session!r}", ref=ref)
    low = ref.lower()
    if not _HEX.match(low):
        raise RefError(f"not a ref: {ref!r} (use an id, start, a step number or turn:N)", ref=ref)
    if len(low) < MIN_PREFIX:
        raise RefError(f"ref {ref!r} is too short: give at least {MIN_PREFIX} hex digits", ref=ref)
    ids = meta.snapshot_ids_with_prefix(low)
    if not ids:
        raise RefError(f"no snapshot matches {ref!r}", ref=ref)
    if len(ids) > 1:
        raise RefError(f"ref {ref!r} is ambiguous: " + ", ".join(short(i) for i in ids), ref=ref)
    return Resolved(_must(store, ids[0], ref))


def _step_ref(store: Store, session: str, n: int, ref: str) -> Resolved:
    meta = store.meta
    st = meta.step(session, n)
    assert st is not None
    if st.before is not None:
        return Resolved(_must(store, st.before, ref))
    # Step N took no snapshot (it failed): the latest state recorded before it.
    for k in range(n - 1, 0, -1):
        prev = meta.step(session, k)
        if prev is None:
            continue
        sid = prev.after or prev.before
        if sid is not None:
            snap = _must(store, sid, ref)
            return Resolved(snap, f"step {n} took no snapshot; using {short(sid)} from step {k}")
    s = meta.session(session)
    if s is None:
        raise RefError(f"no snapshot before step {n}", ref=ref)
    return Resolved(
        _must(store, s.baseline, ref), f"step {n} took no snapshot; using the session's start"
    )


def _must(store: Store, sid: str, ref: str) -> SnapshotInfo:
    snap = store.meta.snapshot(sid)
    if snap is None:
        raise RefError(f"ref {ref!r} names a snapshot that is not in the store", ref=ref)
    return snap
