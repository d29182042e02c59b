"""Ops layer: planning and applying a restore of the workspace to a tree.

A restore is planned against the pre-restore snapshot (so the plan and the state that
undoes it come from one scan), written down in the store's journal, applied through the
one safe writer, and the journal is closed. A restore killed half way leaves the journal:
the next command reports it, and re-running the rewind (to either end) finishes it.

Order of writes: entries that must go (files and links, then folders deepest first, only
when empty), then folders that must exist (parents first, private until filled), then files
and links, then the final permission bits of folders (deepest first, so a read-only folder
is closed after its contents are in).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._fs import SafeRoot
from ..errors import PathError, RestoreError
from ..model import DIR, LARGE, LINK, UNREADABLE, Entry, Plan, PlanItem, Tree
from ..scan import TreeScope
from ..store import Store
from ._treediff import diff_trees, under

_HOLD_BYTES = 256 << 20


@dataclass
class RestoreResult:
    """What a restore did."""

    plan: Plan
    pre: str | None
    restored: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    kept_dirs: list[str] = field(default_factory=list)
    #: paths left as they are, and why (out of scope and in the way, never kept, ...)
    left: dict[str, str] = field(default_factory=dict)


def make_plan(get_tree: Callable[[str], Tree], current: str, target: str, target_id: str,
              paths: Sequence[str] | None = None, *,
              target_scope: TreeScope | None = None) -> Plan:
    """Return the plan that turns tree ``current`` into tree ``target``.

    Args:
        get_tree: reads a tree object.
        current: the tree of the workspace now (the pre-restore snapshot's).
        target: the tree to restore.
        target_id: the snapshot id, for the record.
        paths: restrict the plan to these paths and what lies below them.
        target_scope: the target's own ignore rules; a path they leave out is not removed.
    """
    filters = list(paths) if paths is not None else None
    items: list[PlanItem] = []
    not_restorable: list[str] = []
    kept: list[str] = []
    deltas = [d for d in diff_trees(get_tree, current, target) if under(d[0], filters)]
    # A path either side could not read is left as it is, with everything below it: its
    # contents are unknown, so neither removing nor writing anything there is safe. One
    # unreadable now is in the way of the target; one unreadable then was never kept.
    unreadable_now = [p for p, old, _new in deltas if old is not None and old.kind == UNREADABLE]
    unreadable_then = [p for p, old, new in deltas if new is not None
                       and new.kind == UNREADABLE and p not in unreadable_now]
    closed = unreadable_now + unreadable_then
    not_restorable.extend(unreadable_then)
    for path, old, new in deltas:
        if closed and under(path, closed):
            continue
        if old is not None and new is not None:
            action = "M"
        elif old is not None:
            action = "A"
        else:
            action = "D"
        if new is not None and new.kind == LARGE:
            not_restorable.append(path)
            continue
        if new is None and target_scope is not None and target_scope.ignored(
                path, is_dir=old is not None and old.kind == DIR):
            # Absent from the target because its rules left it out, not because it did
            # not exist: it was never part of that state, so it is not removed.
            continue
        if old is not None and old.kind == LARGE:
            # A file over the size limit was never kept: replacing or removing it would
            # lose it for good, and no snapshot could bring it back. It stays as it is.
            kept.append(path)
            continue
        items.append(PlanItem(action, path, old, new))
    return Plan(target=target_id, items=tuple(items), not_restorable=tuple(not_restorable),
                kept=tuple(kept), unreadable=tuple(unreadable_now))


def apply_plan(store: Store, plan: Plan, *, pre: str | None,
               on_progress: Callable[[int, int], None] | None = None) -> RestoreResult:
    """Write a plan into the workspace (the caller holds the exclusive lock).

    Raises:
        RestoreError: some writes failed; what was and was not restored is attached.
    """
    root = SafeRoot(store.root)
    result = RestoreResult(plan=plan, pre=pre, not_restored=list(plan.not_restorable),
                           left={p: "over the size limit, never kept" for p in plan.kept})
    result.left.update((p, "unreadable, never read") for p in plan.unreadable)
    # Every object the restore needs is read and checked before the first write, so a
    # damaged store refuses the restore instead of leaving it half done.
    blobs: dict[str, bytes] = {}
    held = 0
    for item in plan.items:
        t = item.target
        if t is not None and t.kind != DIR and t.oid not in blobs:
            data = store.objects.get(t.oid)
            if held + len(data) <= _HOLD_BYTES:
                blobs[t.oid] = data
                held += len(data)
    store.write_journal({
        "op": "rewind", "target": plan.target, "pre": pre, "started_at": time.time(),
        "paths": [i.path for i in plan.items],
    })
    failed: list[str] = []
    total = len(plan.items)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if on_progress is not None:
            on_progress(done, total)

    def attempt(path: str, fn: Callable[..., object], *args: object) -> bool:
        try:
            fn(*args)
            return True
        except (OSError, PathError):
            failed.append(path)
            return False

    def unchanged(path: str, expected: Entry | None) -> bool:
        """Whether the disk still holds what the plan was made from; if not, leave it.

        Something where the plan saw nothing is out of scope (an ignored file, which no
        snapshot keeps); something else where the plan saw a file changed after the
        pre-rewind snapshot. Either would be lost if written over.
        """
        try:
            ok = disk_matches(store, root, path, expected)
        except (OSError, PathError):
            ok = False
        if not ok:
            if expected is None:
                result.left[path] = "out of scope (ignored) and in the way"
            else:
                result.left[path] = "changed during the rewind"
                failed.append(path)
        return ok

    removals = [i for i in plan.items if i.current is not None and
                (i.target is None or _kind(i.current) != _kind(i.target))]
    for item in removals:
        if item.current is not None and item.current.kind != DIR:
            if unchanged(item.path, item.current) and attempt(item.path, root.remove, item.path) \
                    and item.target is None:
                result.restored.append(item.path)
            tick()
    for item in sorted((i for i in removals if i.current is not None and i.current.kind == DIR),
                       key=lambda i: i.path.count("/"), reverse=True):
        gone = False
        try:
            gone = root.remove_dir(item.path)
        except (OSError, PathError):
            failed.append(item.path)
        if not gone:
            # Something out of scope (an ignored file) still lives there: keep the folder.
            result.kept_dirs.append(item.path)
        elif item.target is None:
            result.restored.append(item.path + "/")
        tick()

    dirs = [i for i in plan.items if i.target is not None and i.target.kind == DIR]
    for item in sorted(dirs, key=lambda i: i.path.count("/")):
        if item.current is None or item.current.kind != DIR:
            st = lstat_or_none(root, item.path)
            if st is not None and stat.S_ISDIR(st.st_mode):
                continue  # already there (made for a file below it)
            if unchanged(item.path, None):
                attempt(item.path, root.make_dir, item.path, 0o700)
        elif item.current.mode != item.target.mode:  # type: ignore[union-attr]
            # Open it to us while its contents are written (the final mode comes last).
            attempt(item.path, root.chmod_dir, item.path, item.current.mode | 0o700)
    for item in plan.items:
        target = item.target
        if target is None or target.kind == DIR or item.path in result.left:
            continue
        same_kind = item.current is not None and _kind(item.current) == _kind(target)
        if not unchanged(item.path, item.current if same_kind else None):
            tick()
            continue
        if attempt(item.path, _write, store, root, item.path, target, blobs):
            result.restored.append(item.path)
        tick()
    for item in sorted(dirs, key=lambda i: i.path.count("/"), reverse=True):
        assert item.target is not None
        if attempt(item.path, root.chmod_dir, item.path, item.target.mode):
            result.restored.append(item.path + "/")
        tick()

    store.clear_journal()
    if failed:
        raise RestoreError(
            f"restore failed part way: {len(failed)} path(s) not written",
            restored=result.restored, failed=failed, undo_id=pre or "",
        )
    return result


def lstat_or_none(root: SafeRoot, path: str) -> os.stat_result | None:
    """Return the entry's own stat, or None when it is absent or unreachable safely."""
    try:
        return root.lstat(path)
    except PathError:
        return None


def disk_matches(store: Store, root: SafeRoot, path: str, expected: Entry | None) -> bool:
    """Return whether the workspace holds ``expected`` at ``path`` (None: nothing there).

    Files and links are compared by content hash, not by stat, so a write that landed
    after the snapshot the caller planned from is always seen.
    """
    st = root.lstat(path)
    if expected is None:
        return st is None
    if st is None:
        return False
    if expected.kind == DIR:
        return stat.S_ISDIR(st.st_mode)
    if expected.kind == LINK:
        return stat.S_ISLNK(st.st_mode) and (
            hashlib.sha256(root.read(path)).hexdigest() == expected.oid)
    if not stat.S_ISREG(st.st_mode) or st.st_size != expected.size:
        return False
    if expected.kind == LARGE:
        return True
    return hashlib.sha256(root.read(path)).hexdigest() == expected.oid


def _kind(e: Entry) -> str:
    return "d" if e.kind == DIR else "l" if e.kind == LINK else "f"


def _write(store: Store, root: SafeRoot, path: str, target: Entry,
           blobs: dict[str, bytes]) -> None:
    data = blobs.get(target.oid)
    if data is None:
        data = store.objects.get(target.oid)
    if target.kind == LINK:
        root.write_symlink(path, data)
    else:
        root.write_file(path, data, target.mode)
