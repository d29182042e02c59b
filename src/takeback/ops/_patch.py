"""Ops layer: unified diffs that ``git apply`` accepts, and line counts of a change."""

from __future__ import annotations

import base64
import hashlib
import os
import zlib
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ..model import DIR, LARGE, LINK, UNREADABLE, Entry
from ._quote import quote_name

_BINARY_PROBE = 8000
_NULL_ID = b"0" * 40
_SHORT_ID = 7
_BASE85_LINE = 52  # bytes of deflated data per line of a binary hunk, as git writes them


def is_binary(data: bytes) -> bool:
    """Git's rule: a NUL byte in the first 8000 bytes makes a file binary."""
    return b"\0" in data[:_BINARY_PROBE]


def _git_mode(e: Entry) -> str:
    if e.kind == LINK:
        return "120000"
    return "100755" if e.mode & 0o111 else "100644"


def split_lines(data: bytes) -> list[bytes]:
    """Return a text's lines, each with its LF (the last may have none); they join back whole.

    Only LF ends a line, as in git: ``bytes.splitlines`` also splits on a bare CR, and a
    patch cut there does not apply (nor do its line counts match git's). A CR before the
    LF and a byte-order mark stay part of their line, so joining gives the bytes back.
    """
    lines = data.split(b"\n")
    last = lines.pop()
    out = [line + b"\n" for line in lines]
    if last:
        out.append(last)
    return out


#: Work the exact diff may do per file (greedy Myers: diagonals visited); about 600
#: differing lines. Past it the diff anchors on unique lines and is marked approximate.
EXACT_WORK = 200_000
_CONTEXT = 3

#: A run of equal lines: (start in old, start in new, length).
_Run = tuple[int, int, int]


class LineStat(NamedTuple):
    """Lines added and removed from one file's state to another.

    Attributes:
        added: lines added.
        removed: lines removed.
        approximate: the counts are an upper bound, not the shortest edit (git's counts):
            the exact diff would have cost more than :data:`EXACT_WORK`.
    """

    added: int
    removed: int
    approximate: bool = False


class TextDiff(NamedTuple):
    """The line diff of two states of a file: what its counts and its patch are made of.

    Attributes:
        old: the old lines (each with its LF, the last perhaps without).
        new: the new lines.
        blocks: the differing blocks in order: old lines [i1, i2) became new [j1, j2).
        approximate: the blocks are not a shortest edit (see :func:`line_stat`).
    """

    old: list[bytes]
    new: list[bytes]
    blocks: list[tuple[int, int, int, int]]
    approximate: bool

    @property
    def stat(self) -> LineStat:
        """The lines added and removed, and whether that is an upper bound."""
        removed = sum(i2 - i1 for i1, i2, _j1, _j2 in self.blocks)
        added = sum(j2 - j1 for _i1, _i2, j1, j2 in self.blocks)
        return LineStat(added, removed, self.approximate)


def text_diff(old: bytes | None, new: bytes | None) -> TextDiff:
    """Return the line diff of two states; a binary one (or no change) has no blocks.

    Computed once, it gives both the counts and the patch (:func:`file_patch`'s ``text``).
    """
    a, b = old or b"", new or b""
    if a == b or is_binary(a) or is_binary(b):
        return TextDiff([], [], [], False)
    la, lb = split_lines(a), split_lines(b)
    blocks, approximate = _line_diff(la, lb)
    return TextDiff(la, lb, blocks, approximate)


def line_stat(old: bytes | None, new: bytes | None) -> LineStat:
    """Return the lines added and removed from ``old`` to ``new``; binary counts 0.

    The counts are those of the patch :func:`file_patch` writes (lines end at LF only),
    and on ordinary edits git's ``--numstat``: the shortest edit. The work is bounded:
    about linear in the size, plus at most :data:`EXACT_WORK` steps; when the shortest
    edit costs more, the counts are an upper bound, marked approximate.
    """
    return text_diff(old, new).stat


def line_counts(old: bytes | None, new: bytes | None) -> tuple[int, int]:
    """Return (lines added, lines removed) from ``old`` to ``new``, as :func:`line_stat`."""
    stat = line_stat(old, new)
    return stat.added, stat.removed


def _line_diff(la: list[bytes], lb: list[bytes]) -> tuple[list[tuple[int, int, int, int]], bool]:
    """Compare two lists of lines: the one diff behind counts and patches.

    Lines become small integers first (one dictionary pass), so that comparing runs of
    lines is a comparison of list slices, done in C. The common head and tail go first;
    the middle is searched for the shortest edit (greedy Myers) within the work bound.
    Past it, lines unique to both sides anchor the two files to each other (the longest
    increasing run of them, as patience diff does), each stretch between anchors gets what
    is left of the bound, and a stretch still too costly is replaced whole: a longer edit
    than the shortest, which is why the result is then marked approximate.
    """
    ids: dict[bytes, int] = {}
    a = [ids.setdefault(line, len(ids)) for line in la]
    b = [ids.setdefault(line, len(ids)) for line in lb]
    runs: list[_Run] = []
    budget = [EXACT_WORK]
    exact = _diff_range(a, 0, len(a), b, 0, len(b), budget, runs)
    approximate = False
    if not exact:
        approximate = True
        runs = []
        budget = [EXACT_WORK]
        _anchored(a, b, budget, runs)
    return _blocks(runs, len(a), len(b)), approximate


def matching_runs(old: list[bytes], new: list[bytes]) -> list[tuple[int, int, int]]:
    """Return the equal runs of the one line diff as ``difflib`` gives matching blocks.

    (i, j, n): ``old[i:i+n] == new[j:j+n]``, in order, ending with ``(len(old), len(new),
    0)``; what a three-way merge aligns its sides with.
    """
    blocks, _approximate = _line_diff(old, new)
    out: list[tuple[int, int, int]] = []
    x = y = 0
    for i1, i2, _j1, j2 in blocks:
        if i1 > x:
            out.append((x, y, i1 - x))
        x, y = i2, j2
    if len(old) > x:
        out.append((x, y, len(old) - x))
    out.append((len(old), len(new), 0))
    return out


def _match(a: list[int], x: int, b: list[int], y: int, n: int) -> int:
    """Return how many lines from a[x] and b[y] on are equal (at most n)."""
    if n <= 0 or a[x] != b[y]:
        return 0
    lo, hi = 1, 2  # a[x:x+lo] equals b[y:y+lo]; galloping, then halving
    while lo < n:
        hi = min(n, 2 * lo)
        if a[x + lo : x + hi] != b[y + lo : y + hi]:
            break
        lo = hi
    else:
        return n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[x + lo : x + mid] == b[y + lo : y + mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _match_back(a: list[int], x: int, b: list[int], y: int, n: int) -> int:
    """Return how many lines before a[x] and b[y] are equal (at most n)."""
    if n <= 0 or a[x - 1] != b[y - 1]:
        return 0
    lo, hi = 1, 2
    while lo < n:
        hi = min(n, 2 * lo)
        if a[x - hi : x - lo] != b[y - hi : y - lo]:
            break
        lo = hi
    else:
        return n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[x - mid : x - lo] == b[y - mid : y - lo]:
            lo = mid
        else:
            hi = mid
    return lo


def _diff_range(
    a: list[int],
    x0: int,
    x1: int,
    b: list[int],
    y0: int,
    y1: int,
    budget: list[int],
    runs: list[_Run],
) -> bool:
    """Append the equal runs of the shortest edit of a[x0:x1] to b[y0:y1] to ``runs``.

    Returns:
        False (and ``runs`` untouched) when it would cost more than ``budget[0]`` steps;
        the steps spent are taken from it either way.
    """
    head = _match(a, x0, b, y0, min(x1 - x0, y1 - y0))
    tail = _match_back(a, x1, b, y1, min(x1 - x0, y1 - y0) - head)
    found = _myers(a, x0 + head, x1 - tail, b, y0 + head, y1 - tail, budget)
    if found is None:
        return False
    if head:
        runs.append((x0, y0, head))
    runs.extend(found)
    if tail:
        runs.append((x1 - tail, y1 - tail, tail))
    return True


_NONE = -1  # no path reaches a diagonal (yet): every valid x is 0 or more


def _myers(
    a: list[int], x0: int, x1: int, b: list[int], y0: int, y1: int, budget: list[int]
) -> list[_Run] | None:
    """Return the equal runs of a shortest edit (Myers' greedy search), or None past budget."""
    n, m = x1 - x0, y1 - y0
    if n == 0 or m == 0:
        return []
    off = n + m + 1
    v = [_NONE] * (2 * off + 1)
    trace: list[list[int]] = []
    for d in range(n + m + 1):
        budget[0] -= d + 1
        if budget[0] < 0:
            return None
        for k in range(-d, d + 1, 2):
            x, _down = _step(v, off, k, d, n, m)
            if x == _NONE:
                v[off + k] = _NONE
                continue
            y = x - k
            if x < n and y < m:
                x += _match(a, x0 + x, b, y0 + y, min(n - x, m - y))
            v[off + k] = x
            if x == n and x - k == m:
                trace.append(v[off - d : off + d + 1])
                return _backtrack(trace, n, m, x0, y0)
        trace.append(v[off - d : off + d + 1])
    raise AssertionError("unreachable: an edit of n + m steps always exists")


def _step(v: list[int], off: int, k: int, d: int, n: int, m: int) -> tuple[int, bool]:
    """Return where a d-step path enters diagonal k, and whether by a step down (an insert).

    ``v[off + k]`` holds the furthest x reached on diagonal k in d - 1 steps; of the two
    moves onto k (right from k - 1, a deletion; down from k + 1, an insertion) the one
    reaching further wins, and a move off the grid is no move at all.
    """
    if d == 0:
        return 0, True
    right = down = _NONE
    if k > -d and (px := v[off + k - 1]) != _NONE and px < n:
        right = px + 1
    if k < d and (px := v[off + k + 1]) != _NONE and px - k - 1 < m:
        down = px
    return (down, True) if down > right else (right, False)


def _backtrack(trace: list[list[int]], n: int, m: int, x0: int, y0: int) -> list[_Run]:
    """Walk a finished Myers search back from the end, collecting its equal runs."""
    runs: list[_Run] = []
    x, y = n, m
    for d in range(len(trace) - 1, 0, -1):
        # trace[d - 1][k + d - 1] is the furthest x on diagonal k after d - 1 steps
        k = x - y
        sx, down = _step(trace[d - 1], d - 1, k, d, n, m)
        sy = sx - k
        if x > sx:
            runs.append((x0 + sx, y0 + sy, x - sx))
        x, y = (sx, sy - 1) if down else (sx - 1, sy)
    if x > 0:
        runs.append((x0, y0, x))
    runs.reverse()
    return runs


def _anchored(a: list[int], b: list[int], budget: list[int], runs: list[_Run]) -> None:
    """Append equal runs anchored on lines unique to both sides; see :func:`_line_diff`."""
    head = _match(a, 0, b, 0, min(len(a), len(b)))
    tail = _match_back(a, len(a), b, len(b), min(len(a), len(b)) - head)
    x1, y1 = len(a) - tail, len(b) - tail
    count_a: dict[int, int] = {}
    for line in a[head:x1]:
        count_a[line] = count_a.get(line, 0) + 1
    count_b: dict[int, int] = {}
    at_b: dict[int, int] = {}
    for j in range(head, y1):
        line = b[j]
        count_b[line] = count_b.get(line, 0) + 1
        at_b[line] = j
    pairs = [
        (i, at_b[line])
        for i in range(head, x1)
        if count_a[(line := a[i])] == 1 and count_b.get(line) == 1
    ]
    if head:
        runs.append((0, 0, head))
    x, y = head, head
    for i, j in _increasing(pairs):
        _fill(a, x, i, b, y, j, budget, runs)
        runs.append((i, j, 1))
        x, y = i + 1, j + 1
    _fill(a, x, x1, b, y, y1, budget, runs)
    if tail:
        runs.append((x1, y1, tail))


def _fill(
    a: list[int],
    x0: int,
    x1: int,
    b: list[int],
    y0: int,
    y1: int,
    budget: list[int],
    runs: list[_Run],
) -> None:
    # A stretch between two anchors: exact if the bound still allows, else replaced whole
    # (its common head and tail are kept all the same: they cost nothing to find).
    if x0 == x1 or y0 == y1 or _diff_range(a, x0, x1, b, y0, y1, budget, runs):
        return
    budget[0] = 0
    head = _match(a, x0, b, y0, min(x1 - x0, y1 - y0))
    tail = _match_back(a, x1, b, y1, min(x1 - x0, y1 - y0) - head)
    if head:
        runs.append((x0, y0, head))
    if tail:
        runs.append((x1 - tail, y1 - tail, tail))


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Return the longest run of pairs increasing in their second item (patience sort)."""
    import bisect

    tops: list[int] = []  # tops[h]: the smallest j ending an increasing run of h + 1
    top_at: list[int] = []  # the index in pairs of that j
    back: list[int] = []
    for n, (_i, j) in enumerate(pairs):
        h = bisect.bisect_left(tops, j)
        if h == len(tops):
            tops.append(j)
            top_at.append(n)
        else:
            tops[h] = j
            top_at[h] = n
        back.append(top_at[h - 1] if h else -1)
    out = []
    n = top_at[-1] if top_at else -1
    while n >= 0:
        out.append(pairs[n])
        n = back[n]
    out.reverse()
    return out


def _blocks(runs: list[_Run], n: int, m: int) -> list[tuple[int, int, int, int]]:
    """Return the differing blocks between equal runs (in order) of n and m lines."""
    blocks = []
    x = y = 0
    for i, j, length in [*runs, (n, m, 0)]:
        if i > x or j > y:
            blocks.append((x, i, y, j))
        x, y = i + length, j + length
    return blocks


class HunkSpan(NamedTuple):
    """One hunk of a patch: its lines with context (old [i1, i2), new [j1, j2)), its blocks."""

    i1: int
    i2: int
    j1: int
    j2: int
    blocks: list[tuple[int, int, int, int]]


def hunk_spans(text: TextDiff) -> list[HunkSpan]:
    """The hunks of a line diff, as the patch shows them.

    Changes less than two contexts apart share a hunk, as in git; each hunk has up to
    three lines of context on each side.
    """
    a, blocks = text.old, text.blocks
    out: list[HunkSpan] = []
    start = 0
    while start < len(blocks):
        end = start + 1
        while end < len(blocks) and blocks[end][0] - blocks[end - 1][1] <= 2 * _CONTEXT:
            end += 1
        group = blocks[start:end]
        first, last = group[0], group[-1]
        i1 = max(0, first[0] - _CONTEXT)
        j1 = first[2] - (first[0] - i1)
        i2 = min(len(a), last[1] + _CONTEXT)
        j2 = last[3] + (i2 - last[1])
        out.append(HunkSpan(i1, i2, j1, j2, group))
        start = end
    return out


def hunk_header(span: HunkSpan) -> bytes:
    """The ``@@ -a,b +c,d @@`` line of a hunk."""
    return b"@@ -%s +%s @@\n" % (_range(span.i1, span.i2), _range(span.j1, span.j2))


def hunk_lines(text: TextDiff, span: HunkSpan) -> Iterator[bytes]:
    """A hunk's lines of patch, its header first."""
    a, b = text.old, text.new
    yield hunk_header(span)
    at = span.i1
    for b_i1, b_i2, b_j1, b_j2 in span.blocks:
        for line in a[at:b_i1]:
            yield from _line(b" ", line)
        for line in a[b_i1:b_i2]:
            yield from _line(b"-", line)
        for line in b[b_j1:b_j2]:
            yield from _line(b"+", line)
        at = b_i2
    for line in a[at : span.i2]:
        yield from _line(b" ", line)


def _hunks(text: TextDiff) -> Iterator[bytes]:
    for span in hunk_spans(text):
        yield from hunk_lines(text, span)


def _range(start: int, end: int) -> bytes:
    length = end - start
    if length == 0:
        return b"%d,0" % start
    if length == 1:
        return b"%d" % (start + 1)
    return b"%d,%d" % (start + 1, length)


def _line(sign: bytes, line: bytes) -> Iterator[bytes]:
    if line.endswith(b"\n"):
        yield sign + line
    else:
        yield sign + line + b"\n\\ No newline at end of file\n"


def _blob_id(data: bytes) -> bytes:
    # git's object id of a blob (SHA-1 of a "blob <size>" header and the bytes): git apply
    # checks a binary patch's preimage against it before it writes anything.
    h = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    h.update(data)
    return h.hexdigest().encode()


def _literal(data: bytes) -> Iterator[bytes]:
    """Yield one ``literal`` hunk of a git binary patch: the bytes deflated, in base85."""
    packed = zlib.compress(data)
    yield b"literal %d\n" % len(data)
    for start in range(0, len(packed), _BASE85_LINE):
        chunk = packed[start : start + _BASE85_LINE]
        n = len(chunk)
        # The first character is the chunk's length: A-Z for 1-26 bytes, a-z for 27-52.
        yield bytes([0x40 + n if n <= 26 else 0x60 + n - 26])
        yield base64.b85encode(chunk, pad=True) + b"\n"
    yield b"\n"


def file_patch(
    path: str,
    old: Entry | None,
    new: Entry | None,
    read: Callable[[Entry], bytes],
    *,
    binary: bool = False,
    text: TextDiff | None = None,
) -> bytes:
    """Return the ``diff --git`` section for one path (files and links; folders have none).

    A change of kind (file to link) is written as a deletion and a creation, as git does.

    Args:
        path: the path, '/'-separated, relative to the root.
        old: the entry before (None: the path did not exist).
        new: the entry after (None: the path is gone).
        read: returns the bytes an entry holds.
        binary: write a binary file's change as a ``GIT binary patch`` (both ways, with
            full object ids, as ``git diff --binary``) that ``git apply`` can apply,
            instead of the line ``Binary files … differ``, which it cannot.
        text: the line diff of the two entries' bytes, when the caller has it already
            (:func:`text_diff`; it is computed here otherwise).

    Returns:
        The section's bytes; empty when nothing differs.
    """
    if (old is not None and old.kind == DIR) or (new is not None and new.kind == DIR):
        return b""
    if old is not None and new is not None and (old.kind == LINK) != (new.kind == LINK):
        return file_patch(path, old, None, read, binary=binary) + file_patch(
            path, None, new, read, binary=binary
        )
    bpath = os.fsencode(path)
    a_name, b_name = quote_name(b"a/" + bpath), quote_name(b"b/" + bpath)
    out = [b"diff --git %s %s\n" % (a_name, b_name)]
    same_mode = False
    if old is None and new is not None:
        out.append(b"new file mode %s\n" % _git_mode(new).encode())
    elif new is None and old is not None:
        out.append(b"deleted file mode %s\n" % _git_mode(old).encode())
    elif old is not None and new is not None and _git_mode(old) != _git_mode(new):
        modes = (_git_mode(old).encode(), _git_mode(new).encode())
        out.append(b"old mode %s\nnew mode %s\n" % modes)
    else:
        same_mode = True
    if (old is not None and old.kind == LARGE) or (new is not None and new.kind == LARGE):
        # Never kept, so there are no bytes to put in a patch, nor an id to check them by.
        out.append(b"Binary files %s and %s differ (over the size limit)\n" % (a_name, b_name))
        return b"".join(out)
    if (old is not None and old.kind == UNREADABLE) or (new is not None and new.kind == UNREADABLE):
        out.append(b"Binary files a/%s and b/%s differ (unreadable)\n" % (bpath, bpath))
        return b"".join(out)
    a = read(old) if old is not None else b""
    b = read(new) if new is not None else b""
    if a == b and old is not None and new is not None:
        return b"".join(out) if len(out) > 1 else b""
    # Abbreviated ids as git's default; a binary patch needs full ones (git apply checks
    # the preimage against them), as with git diff --binary.
    id_len = len(_NULL_ID) if binary else _SHORT_ID
    old_id = (_NULL_ID if old is None else _blob_id(a))[:id_len]
    new_id = (_NULL_ID if new is None else _blob_id(b))[:id_len]
    mode = b" " + _git_mode(new).encode() if same_mode and new is not None else b""
    out.append(b"index %s..%s%s\n" % (old_id, new_id, mode))
    if a == b:
        return b"".join(out)  # an empty file created or deleted: the header says it all
    src = b"/dev/null" if old is None else a_name
    dst = b"/dev/null" if new is None else b_name
    if is_binary(a) or is_binary(b):
        if not binary:
            out.append(b"Binary files %s and %s differ\n" % (src, dst))
            return b"".join(out)
        out.append(b"GIT binary patch\n")
        out.extend(_literal(b))
        out.extend(_literal(a))  # the reverse hunk, for git apply -R
        return b"".join(out)
    # git ends a name that holds a space with a TAB on these two lines, so that a reader
    # of the traditional format knows where it stops (anything after a TAB is a date).
    tab = b"\t" if b" " in bpath else b""
    out.append(b"--- %s%s\n" % (src, tab if old is not None else b""))
    out.append(b"+++ %s%s\n" % (dst, tab if new is not None else b""))
    if text is None:
        text = text_diff(a, b)
    out.extend(_hunks(text))
    return b"".join(out)
