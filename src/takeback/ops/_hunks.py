"""Ops layer: a turn's changes hunk by hunk, and taking back some hunks of it.

A hunk is what the turn's patch shows between two ``@@`` lines (changes less than two
contexts apart share one, as in git). Its id is ``PATH#K``: K counts from 1 in file
order, and is stable for a given turn, since the turn's before and after states never
change. Binary files have no hunks.

Taking back hunks is a three-way merge per file, through the one restore engine as a
take-back with merge: the base is the file as the turn left it, one side the file now,
the other the file as the turn left it with the chosen hunks reverted. Every other line
stays as it is now; a chosen hunk whose lines changed since is a conflict (exit 3, or
conflict markers with ``merge="markers"``). The op is recorded as an undo whose every
path was merged, so ``redo`` puts back exactly what the file held before it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..model import FILE, Entry
from ..store import Meta, Store
from ._patch import TextDiff, hunk_lines, hunk_spans, is_binary, text_diff
from ._snapshot import Recording


@dataclass(frozen=True)
class Hunk:
    """One hunk of a turn's change to a file.

    Attributes:
        id: ``PATH#K``.
        path: the file.
        k: its place in the file's hunks, from 1.
        old_start, old_lines: the lines it covers before the turn (1-based, with context).
        new_start, new_lines: the lines it covers after the turn.
        added, removed: its ``+`` and ``-`` lines.
        patch: its lines of patch, ``@@`` header first.
    """

    id: str
    path: str
    k: int
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    added: int
    removed: int
    patch: bytes

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``changes --hunks --json``)."""
        return {
            "id": self.id,
            "path": self.path,
            "k": self.k,
            "old_start": self.old_start,
            "old_lines": self.old_lines,
            "new_start": self.new_start,
            "new_lines": self.new_lines,
            "added": self.added,
            "removed": self.removed,
            "patch": self.patch.decode("utf-8", "replace"),
        }


def _text(store: Store, e: Entry | None) -> bytes | None:
    """A file state's bytes (b"" for none); None when it is not a text file kept whole."""
    if e is None:
        return b""
    if e.kind != FILE:
        return None
    data = store.objects.get(e.oid)
    return None if is_binary(data) else data


def _file_diffs(
    store: Store, session: str, turn: int
) -> list[tuple[str, Entry | None, Entry | None, TextDiff]]:
    from ._takeback import _changes

    out = []
    for path, before, after in _changes(store, session, turn):
        old, new = _text(store, before), _text(store, after)
        if old is None or new is None or old == new:
            continue
        out.append((path, before, after, text_diff(old, new)))
    return out


def turn_hunks(store: Store, session: str, turn: int) -> list[Hunk]:
    """Every hunk of a turn's changes, file by file in path order, each file's in order."""
    out: list[Hunk] = []
    for path, _before, _after, text in _file_diffs(store, session, turn):
        for k, span in enumerate(hunk_spans(text), 1):
            added = sum(j2 - j1 for _i1, _i2, j1, j2 in span.blocks)
            removed = sum(i2 - i1 for i1, i2, _j1, _j2 in span.blocks)
            out.append(
                Hunk(
                    f"{path}#{k}",
                    path,
                    k,
                    span.i1 + 1 if span.i2 > span.i1 else span.i1,
                    span.i2 - span.i1,
                    span.j1 + 1 if span.j2 > span.j1 else span.j1,
                    span.j2 - span.j1,
                    added,
                    removed,
                    b"".join(hunk_lines(text, span)),
                )
            )
    return out


def _reverted(text: TextDiff, chosen: set[int]) -> bytes:
    """The turn's new text with the chosen hunks (numbered from 1) put back as they were."""
    out: list[bytes] = []
    at = 0
    for k, span in enumerate(hunk_spans(text), 1):
        if k not in chosen:
            continue
        for i1, i2, j1, j2 in span.blocks:
            out.extend(text.new[at:j1])
            out.extend(text.old[i1:i2])
            at = j2
    out.extend(text.new[at:])
    return b"".join(out)


def undo_hunks(
    rec: Recording,
    session: str,
    turn: int,
    ids: Sequence[str],
    *,
    merge: bool | str = True,
    dry_run: bool = False,
    plan: str | None = None,
) -> Any:
    """Take back some hunks of a turn, keeping every other line as it is now.

    Args:
        rec: the store, options and event sink.
        session: the session's name.
        turn: the turn whose hunks they are.
        ids: ``PATH#K`` ids (from :func:`turn_hunks`).
        merge: True, or ``"markers"`` to write a conflicting merge with markers.
        dry_run: plan only.
        plan: the token of a plan confirmed: done exactly, or refused when stale.

    Returns:
        A ``TurnOpResult`` (kind ``undo-hunks``).

    Raises:
        UsageError: no such turn, or an id that is not one of its hunks.
        ConflictError: a chosen hunk's lines changed since the turn.
    """
    from ._takeback import How, TakeBack, _tree_of, _turns

    store = rec.store
    with store.lock(exclusive=True):
        match = [t for t in _turns(store, session) if t.n == turn]
        if not match:
            raise UsageError(f"no turn {turn} in session {session!r}")
        t = match[0]
        if t.state != "done":
            raise UsageError(f"turn {turn} is {t.state}, not something undo can take back")
        diffs = {path: (b, a, text) for path, b, a, text in _file_diffs(store, session, turn)}
        chosen: dict[str, set[int]] = {}
        for hid in ids:
            path, _hash, k = hid.rpartition("#")
            text_of = diffs.get(path)
            if not path or not k.isdigit() or text_of is None:
                raise UsageError(f"turn {turn} has no hunk {hid} (see: takeback changes --hunks)")
            if not 1 <= int(k) <= len(hunk_spans(text_of[2])):
                raise UsageError(f"turn {turn} has no hunk {hid} (see: takeback changes --hunks)")
            chosen.setdefault(path, set()).add(int(k))
        pairs: list[tuple[str, Entry | None, Entry | None]] = []
        for path, ks in sorted(chosen.items()):
            before, after, text = diffs[path]
            data = _reverted(text, ks)
            if before is None and not data:
                write: Entry | None = None  # a file the turn made, all of it taken back
            else:
                mode = (after or before).mode  # type: ignore[union-attr]
                oid = hashlib.sha256(data).hexdigest()
                store.objects.put("blob", data, oid)
                write = Entry(FILE, mode, oid, len(data))
            pairs.append((path, after, write))
        store.objects.flush()
        names = sorted(chosen)

        def on_done(_meta: Meta) -> None:
            pass  # the turn stays done: only some of its lines were taken back

        return TakeBack(
            session=session,
            kind="undo-hunks",
            turns=[turn],
            pairs=pairs,
            describe=lambda p: f"{p} changed after turn {turn} where its hunks would go back",
            target_tree=_tree_of(store, t.before),
            prune=True,
            data={"file": None, "hunks": sorted(ids), "merged": names},
            on_done=on_done,
            record_as="undo",
            created=lambda p: diffs[p][0] is None,
            labels=(f"turn {turn}", f"hunks of turn {turn} taken back"),
        ).run(
            rec,
            How(
                force=False,
                merge="markers" if merge == "markers" else True,
                dry_run=dry_run,
                plan=plan,
            ),
        )
