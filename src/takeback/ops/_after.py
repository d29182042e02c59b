"""Ops layer: the snapshot of what a take-back wrote, taken after it wrote.

Every take-back takes a snapshot before it writes (its way back); without one after,
the newest snapshot is the state before, and ``status`` lists every file the take-back
just wrote as changed. The snapshot after is the one before with the paths the engine
planned (and the folders above them) read again from the disk: the rest of the
workspace is not walked again, so a take-back costs what it wrote, not what exists.

It is exact for what the operation could change. The walk's rules decide which of those
paths are in scope (:func:`~takeback.scan._scope.in_scope`, for a path the snapshot before
did not hold); where an ignore file is among them, or a path cannot be read, the answer
could differ from a walk's, so a full scan is taken instead.
"""

from __future__ import annotations

import hashlib
import stat
import time
from collections.abc import Iterable

from .._fs import SafeRoot
from ..errors import PathError
from ..model import DIR, FILE, LARGE, LINK, Entry, SnapshotInfo, Tree, encode_tree
from ..scan import ScanResult
from ..scan._scope import in_scope
from ._snapshot import Recording, record, take

#: A path named so changes what the walk leaves out: the snapshot after is a full scan.
_RULE_FILES = (".gitignore", ".takebackignore")


class _Doubt(Exception):
    """A path the walk might see otherwise: take a full scan instead."""


def record_after(
    rec: Recording,
    pre: SnapshotInfo,
    paths: Iterable[str],
    *,
    kind: str,
    session: str | None,
    message: str = "",
) -> SnapshotInfo:
    """Record the workspace after a take-back wrote ``paths`` (from the snapshot ``pre``).

    Args:
        rec: the store (its exclusive lock held by the caller), options and event sink.
        pre: the snapshot taken before the operation wrote anything.
        paths: every path the operation planned to write or remove.
        kind: the snapshot's kind (``after-undo``, ``after-rewind``, ...).
        session: the session it is recorded in.
        message: its message.

    Returns:
        The snapshot recorded.
    """
    started = time.monotonic()
    wanted: set[str] = set()
    for p in paths:
        p = p.rstrip("/")
        parts = p.split("/")
        if parts[-1] in _RULE_FILES:
            return take(rec, kind=kind, session=session, message=message)
        for i in range(1, len(parts) + 1):
            wanted.add("/".join(parts[:i]))
    try:
        tree, delta = _Overlay(rec, wanted).tree(pre.tree)
    except _Doubt:
        return take(rec, kind=kind, session=session, message=message)
    rec.store.objects.flush()
    result = ScanResult(
        tree=tree,
        files=max(0, pre.files + delta),
        skipped=list(pre.skipped),
        skipped_count=pre.skipped_count,
        duration_ms=int((time.monotonic() - started) * 1000),
        unreadable=list(pre.unreadable),
        unreadable_count=pre.unreadable_count,
        mode="after",
        reason=f"{len(wanted)} path(s) read again after writing",
    )
    return record(rec, result, kind=kind, session=session, message=message)


class _Overlay:
    """The tree before, with each wanted path as the disk holds it now."""

    def __init__(self, rec: Recording, wanted: set[str]) -> None:
        store = rec.store
        self._store = store
        self._opts = rec.options
        self._root = SafeRoot(store.root)
        self._wanted = wanted
        self._below: dict[str, set[str]] = {}
        for p in wanted:
            parent, _, name = p.rpartition("/")
            self._below.setdefault(parent, set()).add(name)
        #: files (not folders) the new tree has minus those the old one had
        self.delta = 0

    def tree(self, old: str) -> tuple[str, int]:
        """The new root tree's id, and how many files it has more than the old one."""
        return self._folder("", old), self.delta

    def _folder(self, folder: str, old: str | None) -> str:
        if old and not self._below.get(folder):
            return old
        tree: Tree = dict(self._store.objects.get_tree(old)) if old else {}
        for name in sorted(self._below.get(folder, ())):
            path = f"{folder}/{name}" if folder else name
            was = tree.get(name)
            now = self._read(path, was)
            if was is not None and was.kind != DIR:
                self.delta -= 1
            if now is None:
                tree.pop(name, None)
                continue
            if now.kind == DIR:
                sub = was.oid if was is not None and was.kind == DIR else None
                now = now._replace(oid=self._folder(path, sub))
            else:
                self.delta += 1
            tree[name] = now
        return self._store.objects.put("tree", encode_tree(tree))

    def _read(self, path: str, was: Entry | None) -> Entry | None:
        """The path's entry as a walk would record it (None: absent or out of scope)."""
        try:
            st = self._root.lstat(path)
        except PathError as e:
            raise _Doubt(path) from e
        if st is None:
            return None
        is_dir = stat.S_ISDIR(st.st_mode)
        if was is None and not in_scope(
            self._store.root,
            path,
            exclude_env=self._opts.exclude_env,
            is_dir=is_dir,
            exclude=(self._store.path,),
        ):
            return None
        mode = stat.S_IMODE(st.st_mode)
        if is_dir:
            return Entry(DIR, mode, "", 0)
        try:
            if stat.S_ISLNK(st.st_mode):
                body = self._root.read(path)
                return Entry(LINK, 0o777, self._store.objects.put("blob", body), len(body))
            if not stat.S_ISREG(st.st_mode):
                raise _Doubt(path)  # a socket or a fifo: the walk decides
            if st.st_size > self._opts.max_file_bytes:
                return Entry(LARGE, mode, "", st.st_size)
            with open(self._root.open_file(path), "rb") as f:
                body = f.read()
        except (OSError, PathError) as e:
            raise _Doubt(path) from e
        if len(body) != st.st_size:
            raise _Doubt(path)  # written while read
        oid = hashlib.sha256(body).hexdigest()
        return Entry(FILE, mode, self._store.objects.put("blob", body, oid), len(body))
