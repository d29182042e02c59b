"""Ops layer: checking the store (fsck) and measuring it (du).

fsck reads the history rows and the objects' index (never their data, unless asked):

- a journal left behind by a restore that is not running;
- every row's snapshot is there (a session's baseline, a turn's, a step's, an op's);
- every object's delta base is there;
- every tree a snapshot or the scan cache reaches is there and readable, and so is every
  blob it names; every state a touch, a change list or an op keeps names a blob that is
  there;
- with ``read_data``: every object is read and checked against its hash, and the store
  checks what lies below its rows (``Store.check_files``: a folder store's SQLite checks
  both databases page by page; a database has nothing more to check).

Each problem is one line; none means the store is sound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import StoreCorruptError
from ..model import DIR, FILE, LINK
from ..scan import cached_ids
from ..store import Store
from ._keep import plan
from ._mark import op_states, reachable, state_oid
from ._policy import Policy
from ._snapshot import stored_cache
from ._turns import shared_lock


@dataclass
class FsckResult:
    """What fsck found: one line per problem, and how much it looked at."""

    problems: list[str] = field(default_factory=list)
    snapshots: int = 0
    objects: int = 0
    trees: int = 0
    read: int = 0

    @property
    def clean(self) -> bool:
        """Whether the store passed every check."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``fsck --json``)."""
        return {
            "clean": self.clean,
            "problems": self.problems,
            "checked": {
                "snapshots": self.snapshots,
                "objects": self.objects,
                "trees": self.trees,
                "read": self.read,
            },
        }


def fsck(
    store: Store,
    *,
    read_data: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> FsckResult:
    """Check the store's structure (and with ``read_data``, every object's hash).

    Args:
        store: the open store.
        read_data: read every object and check its hash; check the databases' pages.
        on_progress: called with (objects read, total) while reading data.
    """
    # Under the shared lock: a gc or a restore under way is waited for, not reported.
    with shared_lock(store):
        return _fsck(store, read_data=read_data, on_progress=on_progress)


def _fsck(
    store: Store, *, read_data: bool, on_progress: Callable[[int, int], None] | None
) -> FsckResult:
    out = FsckResult()
    problems = out.problems
    journal = store.read_journal()
    if journal is not None and not store.restore_running():
        op = journal.get("op", "restore") if not journal.get("broken") else "restore"
        problems.append(
            f"journal left behind: an interrupted {op} (finish it or take it back; "
            "`takeback status` says how)"
        )
    meta = store.meta
    snaps = meta.snapshot_rows()
    ids = {s[0] for s in snaps}
    out.snapshots = len(snaps)

    def need(sid: str | None, what: str) -> None:
        if sid and sid not in ids:
            problems.append(f"{what}: snapshot {sid[:12]} is missing")

    for s in meta.sessions():
        need(s.baseline, f"session {s.name!r}'s baseline")
    for session, n, before, after, _state, _at in meta.all_turns():
        need(before, f"turn {n} of session {session!r}")
        need(after, f"turn {n} of session {session!r}")
    for st in meta.all_steps():
        need(st.before, f"step {st.n} of session {st.session!r}")
        need(st.after, f"step {st.n} of session {st.session!r}")
    for op, session, _at in meta.all_ops():
        need(op.pre, f"{op.kind} #{op.id} of session {session!r}")

    index = store.objects.index()
    out.objects = len(index)
    for oid, row in index.items():
        if row.base is not None and row.base not in index:
            problems.append(f"object {oid[:12]}: its delta base {row.base[:12]} is missing")

    seen: set[str] = set()
    reported: set[str] = set()

    def walk(root: str, where: str) -> None:
        stack = [(root, "")]
        while stack:
            tid, path = stack.pop()
            if tid in seen:
                continue
            seen.add(tid)
            label = f"{where}, /{path}" if path else where
            if tid not in index:
                if tid not in reported:
                    reported.add(tid)
                    problems.append(f"{label}: tree {tid[:12]} is missing")
                continue
            try:
                tree = store.objects.get_tree(tid)
            except StoreCorruptError as err:
                problems.append(f"{label}: tree {tid[:12]} cannot be read ({err.message})")
                continue
            out.trees += 1
            for name, ent in tree.items():
                sub = f"{path}/{name}" if path else name
                if ent.kind == DIR and ent.oid:
                    stack.append((ent.oid, sub))
                elif ent.kind in (FILE, LINK) and ent.oid not in index and ent.oid not in reported:
                    reported.add(ent.oid)
                    problems.append(f"{where}: object {ent.oid[:12]} of /{sub} is missing")

    for sid, tree, _at, _kind, _session in snaps:
        walk(tree, f"snapshot {sid[:12]}")
    cache_trees, cache_blobs = cached_ids(stored_cache(meta)[1], meta.dircache_rows())
    for tid in sorted(cache_trees):
        walk(tid, "the scan cache")
    for oid in sorted(cache_blobs):
        if oid not in index and oid not in reported:
            reported.add(oid)
            problems.append(f"the scan cache: object {oid[:12]} is missing")
    for session, n, state in meta.recorded_states():
        found = state_oid(state)
        if found and found not in index and found not in reported:
            reported.add(found)
            problems.append(f"turn {n} of session {session!r}: object {found[:12]} is missing")
    for op, session, _at in meta.all_ops():
        for state in op_states(op.data):
            found = state_oid(state)
            if found and found not in index and found not in reported:
                reported.add(found)
                problems.append(
                    f"{op.kind} #{op.id} of session {session!r}: object {found[:12]} is missing"
                )

    if read_data:
        problems.extend(store.check_files())
        total = len(index)
        for i, oid in enumerate(sorted(index, key=lambda o: index[o].depth)):
            try:
                store.objects.get(oid)
            except StoreCorruptError as e:
                problems.append(f"object {oid[:12]}: {e.message}")
            out.read += 1
            if on_progress is not None and (i + 1) % 500 == 0:
                on_progress(i + 1, total)
    return out


@dataclass
class SessionUsage:
    """One session's share of the store."""

    name: str
    snapshots: int
    turns: int
    #: stored bytes of every object the session reaches
    reached: int
    #: stored bytes only this session reaches (what purging it would free)
    only: int

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form."""
        return {
            "session": self.name,
            "snapshots": self.snapshots,
            "turns": self.turns,
            "reached_bytes": self.reached,
            "only_bytes": self.only,
        }


@dataclass
class DuResult:
    """The store's size, per session, and what gc would free under the policy.

    ``path`` is where the history lives (``Store.url``: the folder, or the database's
    address and the workspace's key).
    """

    path: str
    disk: int
    files: dict[str, int]
    objects: int
    stored: int
    sessions: list[SessionUsage]
    gc_objects: int
    gc_freed: int
    gc_snapshots: int
    gc_turns: int
    policy: Policy

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``du --json``)."""
        return {
            "store": self.path,
            "disk_bytes": self.disk,
            "files": self.files,
            "objects": self.objects,
            "stored_bytes": self.stored,
            "sessions": [s.to_json() for s in self.sessions],
            "gc": {
                "objects": self.gc_objects,
                "freed_bytes": self.gc_freed,
                "snapshots": self.gc_snapshots,
                "turns": self.gc_turns,
                "policy": self.policy.to_json(),
            },
        }


def du(store: Store, policy: Policy) -> DuResult:
    """Measure the store: on disk, per session, and what gc would free under ``policy``.

    ``disk`` and ``files`` are the store's own measure (``Store.size_on_disk``): a folder
    store's blocks on the disk, a database's bytes of the workspace's rows.
    """
    meta = store.meta
    with shared_lock(store):
        index = store.objects.index()
        snaps = meta.snapshot_rows()
        turns = meta.all_turns()
        states = meta.recorded_states()
        ops = meta.all_ops()
        counts: dict[str, int] = {}
        usage: list[SessionUsage] = []
        reach_by: dict[str, set[str]] = {}
        for s in meta.sessions():
            trees = [t for _i, t, _a, _k, sess in snaps if sess == s.name]
            blobs = {o for sess, _n, st in states if sess == s.name and (o := state_oid(st))}
            for op, sess, _at in ops:
                if sess == s.name:
                    blobs.update(o for st in op_states(op.data) if (o := state_oid(st)))
            r = reachable(store, trees, blobs, index) & index.keys()
            reach_by[s.name] = r
            for o in r:
                counts[o] = counts.get(o, 0) + 1
        for s in meta.sessions():
            r = reach_by[s.name]
            usage.append(
                SessionUsage(
                    s.name,
                    sum(1 for x in snaps if x[4] == s.name),
                    sum(1 for t in turns if t[0] == s.name),
                    sum(index[o].stored for o in r),
                    sum(index[o].stored for o in r if counts[o] == 1),
                )
            )
        p = plan(store, policy)
    return DuResult(
        path=store.url,
        disk=store.size_on_disk(),
        files=store.size_by_part(),
        objects=len(index),
        stored=sum(r.stored for r in index.values()),
        sessions=usage,
        gc_objects=len(p.objects),
        gc_freed=p.freed,
        gc_snapshots=len(p.snapshots),
        gc_turns=len(p.turns),
        policy=policy,
    )
