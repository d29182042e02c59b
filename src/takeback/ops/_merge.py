"""Ops layer: three-way merge, one more way to build a take-back's moves for the engine.

Without it, a file changed since the record (a person's edit, a later turn) is a conflict
and the take-back refuses. With it, each such file is merged: *base* is the state the
record expects (for an undo, what the turn left), *ours* the file as it is now, *theirs*
the state the operation would write (for an undo, the file before the turn). Where only
one side changed a region, the merge takes that side: the turn's hunks are taken back,
everyone else's edits kept. The merged bytes become the move's ``write``, and its
``expect`` becomes the state now, so the engine's check by hash just before the write
still guards it: an edit that lands after the merge is kept, never overwritten.

The merge is merge3's (Breezy's three-way merge, published on its own), aligned by the
one line diff of :mod:`._patch`, so a take-back and a ``diff`` see the same lines. Lines
end at LF only and keep their ends: CRLF, mixed endings, a missing final newline and a
byte-order mark come back byte for byte. A region both sides changed (differently) is a
conflict, named by its lines; only the whole file's merge is written, never part of it.
What cannot be merged as text stays a conflict, as without a merge: a binary file, one
over the size limit, a link, and a file deleted or created on one side.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

import merge3

from ..model import FILE, LARGE, Entry, Lines, Region
from ._engine import Move
from ._patch import is_binary, matching_runs, split_lines


#: What a region's line numbers name: (first line, last line), 1-based; an empty range
#: (nothing there on that side) is (n + 1, n): the lines around it are n and n + 1.
@dataclass(frozen=True, slots=True)
class TextMerge:
    """A file's three-way merge.

    Attributes:
        data: the merged bytes; with conflicts, with conflict markers around them.
        regions: the conflicting regions (empty: a clean merge).
    """

    data: bytes
    regions: tuple[Region, ...]


class _Matcher:
    """The one line diff, in the shape merge3 asks of a sequence matcher."""

    def __init__(self, _isjunk: object, a: Sequence[bytes], b: Sequence[bytes]) -> None:
        self.a, self.b = list(a), list(b)

    def get_matching_blocks(self) -> list[tuple[int, int, int]]:
        return matching_runs(self.a, self.b)


def _eol(lines: Sequence[bytes]) -> bytes:
    return b"\r\n" if lines and lines[0].endswith(b"\r\n") else b"\n"


def merge_text(
    base: bytes, ours: bytes, theirs: bytes, *, labels: tuple[str, str, str]
) -> TextMerge | None:
    """Merge three states of a text file.

    Args:
        base: the common ancestor (the state the record expects).
        ours: the file as it is now.
        theirs: the state the operation would write.
        labels: the names on the conflict markers of ours, base and theirs.

    Returns:
        The merge, or None when one of the three is binary (git's rule: a NUL byte in
        the first 8000 bytes).
    """
    if is_binary(base) or is_binary(ours) or is_binary(theirs):
        return None
    lb, lo, lt = split_lines(base), split_lines(ours), split_lines(theirs)
    m = merge3.Merge3(lb, lo, lt, sequence_matcher=_Matcher)
    eol = _eol(lo) if lo else _eol(lb)
    out: list[bytes] = []
    regions: list[Region] = []

    def emit(lines: Sequence[bytes]) -> None:
        out.extend(lines)

    def close() -> None:
        # A marker starts a line of its own, even after a last line without its end.
        if out and not out[-1].endswith(b"\n"):
            out[-1] += eol

    for region in m.merge_regions():
        what = region[0]
        if what == "unchanged":
            emit(lb[region[1] : region[2]])
        elif what in ("a", "same"):
            emit(lo[region[1] : region[2]])
        elif what == "b":
            emit(lt[region[1] : region[2]])
        else:
            _c, z1, z2, a1, a2, b1, b2 = cast("tuple[str, int, int, int, int, int, int]", region)
            first = len(out) + 1
            close()
            out.append(b"<<<<<<< " + labels[0].encode() + eol)
            emit(lo[a1:a2])
            close()
            out.append(b"||||||| " + labels[1].encode() + eol)
            emit(lb[z1:z2])
            close()
            out.append(b"=======" + eol)
            emit(lt[b1:b2])
            close()
            out.append(b">>>>>>> " + labels[2].encode() + eol)
            regions.append(
                Region((a1 + 1, a2), (z1 + 1, z2), (b1 + 1, b2), markers=(first, len(out)))
            )
    return TextMerge(b"".join(out), tuple(regions))


@dataclass
class MergePlan:
    """The operation's moves with each mergeable conflict replaced by its merge.

    Attributes:
        moves: every move; a merged path's move writes the merge, expecting the state now.
        data: the merged bytes of each path merged (to be stored before the engine
            writes them).
        regions: the conflicting regions of each path whose merge is not clean.
        unmerged: paths that cannot be merged as text, and why (they stay conflicts).
    """

    moves: list[Move]
    data: dict[str, bytes] = field(default_factory=dict)
    regions: dict[str, tuple[Region, ...]] = field(default_factory=dict)
    unmerged: dict[str, str] = field(default_factory=dict)


def _why_not(m: Move) -> str | None:
    """Why a conflicting move cannot be merged as text (None: it can)."""
    states = (m.now, m.expect, m.write)
    if any(e is None for e in states):
        return "deleted or created on one side"
    if any(e is not None and e.kind != FILE for e in states):
        kinds = {e.kind for e in states if e is not None}
        return "over the size limit" if LARGE in kinds else "not a regular file"
    return None


def merge_moves(
    moves: Sequence[Move],
    conflicts: Sequence[str],
    read: Callable[[Entry], bytes],
    *,
    labels: tuple[str, str, str],
    markers: bool,
    resumed: Callable[[str], Entry | None] | None = None,
) -> MergePlan:
    """Merge each conflicting path's three states; return the moves that write the merges.

    Args:
        moves: the operation's moves.
        conflicts: the paths the engine's check found in conflict.
        read: the bytes a stored entry holds.
        labels: the conflict markers' names of the file now, the record and the target.
        markers: a merge with conflicts is written too, with conflict markers (else only
            clean merges get a move; the caller refuses the rest).
        resumed: when this finishes an interrupted run of the same operation, the state
            each path had before that run began. A path that holds what that run's merge
            wrote there is done: merging it again would merge the merge (and nest its
            conflict markers), so it keeps it.

    Returns:
        The moves, the merged bytes, the conflicting regions and what cannot be merged.
    """
    by_path = {m.path: m for m in moves}
    plan = MergePlan(list(moves))
    replaced: dict[str, Move] = {}
    for p in conflicts:
        m = by_path[p]
        why = _why_not(m)
        if why is not None:
            plan.unmerged[p] = why
            continue
        now, expect, write = m.now, m.expect, m.write
        assert now is not None and expect is not None and write is not None
        done = _done_before(m, resumed(p) if resumed else None, read, labels)
        if done is not None and (markers or not done.regions):
            if done.regions:
                plan.regions[p] = done.regions
            plan.data[p] = done.data
            replaced[p] = Move(p, now, now, now)  # already as the operation leaves it
            continue
        merged = merge_text(read(expect), read(now), read(write), labels=labels)
        if merged is None:
            plan.unmerged[p] = "binary"
            continue
        if merged.regions:
            plan.regions[p] = merged.regions
            if not markers:
                continue
        # Modes merge as the text does: a side that kept the record's mode gives way.
        mode = write.mode if now.mode == expect.mode else now.mode
        data = merged.data
        plan.data[p] = data
        entry = Entry(FILE, mode, hashlib.sha256(data).hexdigest(), len(data))
        replaced[p] = Move(p, now, now, entry)
    plan.moves = [replaced.get(m.path, m) for m in moves]
    return plan


def _done_before(
    m: Move, first: Entry | None, read: Callable[[Entry], bytes], labels: tuple[str, str, str]
) -> TextMerge | None:
    """The merge an interrupted run wrote at ``m.path``, when the path holds it (else None).

    ``first`` is the path's state before that run; its merge with the record's state and
    the state to write is what that run wrote, byte for byte (the merge is deterministic).
    """
    now, expect, write = m.now, m.expect, m.write
    if first is None or first.kind != FILE or now is None or expect is None or write is None:
        return None
    if first.oid == now.oid:
        return None  # that run never got here
    merged = merge_text(read(expect), read(first), read(write), labels=labels)
    if merged is None or hashlib.sha256(merged.data).hexdigest() != now.oid:
        return None
    return merged


def refusal_lines(
    plan: MergePlan, describe: Callable[[str], str], *, markers: bool
) -> Iterator[tuple[str, str]]:
    """(path, line) for each path a merge could not resolve, and each of its regions."""
    for p in sorted(set(plan.unmerged) | set(plan.regions)):
        if p in plan.unmerged:
            yield p, f"{describe(p)} ({plan.unmerged[p]}: cannot be merged)"
        elif not markers:
            for r in plan.regions[p]:
                yield p, f"{describe(p)}: both changed {_region_words(r)}"


def _region_words(r: Region) -> str:
    """A region for people: ``lines 12-14 (in the record: line 12; to write: none, ...)``."""
    return f"{_now_words(r.now)} (in the record: {_span(r.record)}; to write: {_span(r.target)})"


def _span(r: Lines) -> str:
    first, last = r
    if last < first:
        return f"none, after line {last}" if last else "none, at the top"
    return f"line {first}" if first == last else f"lines {first}-{last}"


def _now_words(r: Lines) -> str:
    first, last = r
    if last < first:
        return f"nothing now, after line {last}" if last else "nothing now, at the top"
    return f"line {first}" if first == last else f"lines {first}-{last}"
