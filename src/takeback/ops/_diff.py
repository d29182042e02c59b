"""Ops layer: what differs between two states (snapshots, or a snapshot and the files now)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import DIR, Entry, decode_state
from ..store import Store
from ._patch import file_patch, text_diff
from ._treediff import diff_trees, under


@dataclass(frozen=True, slots=True)
class FileDiff:
    """One path that differs: status ``A``/``M``/``D``, line counts, the two entries.

    ``approximate`` is true when the line counts are an upper bound rather than git's (the
    shortest edit was too costly to find; see :func:`~._patch.line_stat`).
    """

    path: str
    status: str
    added: int
    removed: int
    old: Entry | None
    new: Entry | None
    approximate: bool = False

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form.

        Keys: ``path``, ``status``, ``added``, ``removed``, ``approximate``.
        """
        return {
            "path": self.path,
            "status": self.status,
            "added": self.added,
            "removed": self.removed,
            "approximate": self.approximate,
        }


@dataclass(frozen=True, slots=True)
class DiffResult:
    """The files that differ between two trees, and the unified patch."""

    from_tree: str
    to_tree: str
    files: tuple[FileDiff, ...]
    patch: bytes
    #: each file's part of the patch, in the order of ``files`` (empty without a patch)
    parts: tuple[bytes, ...] = ()

    def to_json(self, *, max_patch_chars: int | None = None) -> dict[str, Any]:
        """Return the stable machine form.

        Args:
            max_patch_chars: cut the patch (decoded as UTF-8, undecodable bytes replaced)
                at this many characters; ``truncated`` says whether it was.
        """
        patch = self.patch.decode("utf-8", "replace")
        cut = max_patch_chars is not None and len(patch) > max_patch_chars
        return {
            "files": [f.to_json() for f in self.files],
            "patch": patch[:max_patch_chars] if cut else patch,
            "truncated": cut,
        }


def read_entry(store: Store, e: Entry) -> bytes:
    """Return the bytes an entry holds (a file's content, a link's target)."""
    if not e.oid:
        return b""
    return store.objects.get(e.oid)


def diff(
    store: Store,
    old_tree: str,
    new_tree: str,
    *,
    paths: Sequence[str] | None = None,
    patch: bool = True,
    binary: bool = False,
) -> DiffResult:
    """Compare two trees file by file; folders are left out (git shows none).

    Args:
        store: the store holding both trees.
        old_tree: the tree id of FROM.
        new_tree: the tree id of TO.
        paths: only these paths and what is under them (None: all).
        patch: also write the unified patch (else ``patch`` is empty).
        binary: write binary files' changes as git binary patches that ``git apply``
            can apply, instead of ``Binary files … differ``.

    Returns:
        The differing files, in tree order, and the patch.
    """
    filters = list(paths) if paths is not None else None
    triples = (
        (p, old, new)
        for p, old, new in diff_trees(store.objects.tree_changes, old_tree, new_tree)
        if under(p, filters)
    )
    files, chunks = _diff_states(store, triples, patch=patch, binary=binary)
    return DiffResult(old_tree, new_tree, tuple(files), b"".join(chunks), tuple(chunks))


def turn_diff(
    store: Store, session: str, turn: int, *, paths: Sequence[str] | None = None
) -> DiffResult:
    """Compare the states a turn's change list holds: before the turn, and what it left.

    Exactly the files the turn changed, whatever happened before or since (``from_tree``
    and ``to_tree`` are empty: the two states are not whole snapshots).
    """
    filters = list(paths) if paths is not None else None
    triples = (
        (r.path, decode_state(r.before), decode_state(r.after))
        for r in store.meta.change_rows(session, turn)
        if under(r.path, filters)
    )
    files, chunks = _diff_states(store, triples, patch=True, binary=False)
    return DiffResult("", "", tuple(files), b"".join(chunks), tuple(chunks))


def _diff_states(
    store: Store,
    triples: Iterable[tuple[str, Entry | None, Entry | None]],
    *,
    patch: bool,
    binary: bool,
) -> tuple[list[FileDiff], list[bytes]]:
    """The file diffs and patch chunks of (path, old, new) states; folders are left out."""
    files: list[FileDiff] = []
    chunks: list[bytes] = []

    def read(e: Entry) -> bytes:
        return read_entry(store, e)

    for path, old, new in triples:
        if (old is None or old.kind == DIR) and (new is None or new.kind == DIR):
            continue
        o = None if old is None or old.kind == DIR else old
        n = None if new is None or new.kind == DIR else new
        status = "A" if o is None else "D" if n is None else "M"
        a = read(o) if o is not None else None
        b = read(n) if n is not None else None
        # One line diff for both the counts and the patch: on a big file it is the cost.
        text = text_diff(a, b)
        counts = text.stat
        files.append(FileDiff(path, status, counts.added, counts.removed, o, n, counts.approximate))
        if patch:
            chunks.append(file_patch(path, o, n, read, binary=binary, text=text))
    return files, chunks
