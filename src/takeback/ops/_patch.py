"""Ops layer: unified diffs that ``git apply`` accepts, and line counts of a change."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..model import DIR, LARGE, LINK, UNREADABLE, Entry

_BINARY_PROBE = 8000


def is_binary(data: bytes) -> bool:
    """Git's rule: a NUL byte in the first 8000 bytes makes a file binary."""
    return b"\0" in data[:_BINARY_PROBE]


def _git_mode(e: Entry) -> str:
    if e.kind == LINK:
        return "120000"
    return "100755" if e.mode & 0o111 else "100644"


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def line_counts(old: bytes | None, new: bytes | None) -> tuple[int, int]:
    """Return (lines added, lines removed) from ``old`` to ``new``; binary counts 0."""
    a, b = old or b"", new or b""
    if is_binary(a) or is_binary(b):
        return 0, 0
    import difflib

    la, lb = _lines(a), _lines(b)
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, la, lb, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def _hunks(a: list[bytes], b: list[bytes]) -> Iterator[bytes]:
    import difflib

    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(3):
        i1, i2 = group[0][1], group[-1][2]
        j1, j2 = group[0][3], group[-1][4]
        yield b"@@ -%s +%s @@\n" % (_range(i1, i2), _range(j1, j2))
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                for line in a[a1:a2]:
                    yield from _line(b" ", line)
                continue
            for line in a[a1:a2]:
                yield from _line(b"-", line)
            for line in b[b1:b2]:
                yield from _line(b"+", line)


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


def file_patch(path: str, old: Entry | None, new: Entry | None,
               read: Callable[[Entry], bytes]) -> bytes:
    """Return the ``diff --git`` section for one path (files and links; folders have none).

    A change of kind (file to link) is written as a deletion and a creation, as git does.
    """
    if (old is not None and old.kind == DIR) or (new is not None and new.kind == DIR):
        return b""
    if old is not None and new is not None and (old.kind == LINK) != (new.kind == LINK):
        return file_patch(path, old, None, read) + file_patch(path, None, new, read)
    bpath = path.encode("utf-8", "surrogateescape")
    out = [b"diff --git a/%s b/%s\n" % (bpath, bpath)]
    if old is None and new is not None:
        out.append(b"new file mode %s\n" % _git_mode(new).encode())
    elif new is None and old is not None:
        out.append(b"deleted file mode %s\n" % _git_mode(old).encode())
    elif old is not None and new is not None and _git_mode(old) != _git_mode(new):
        modes = (_git_mode(old).encode(), _git_mode(new).encode())
        out.append(b"old mode %s\nnew mode %s\n" % modes)
    if (old is not None and old.kind == LARGE) or (new is not None and new.kind == LARGE):
        out.append(b"Binary files a/%s and b/%s differ (over the size limit)\n" % (bpath, bpath))
        return b"".join(out)
    if (old is not None and old.kind == UNREADABLE) or (
            new is not None and new.kind == UNREADABLE):
        out.append(b"Binary files a/%s and b/%s differ (unreadable)\n" % (bpath, bpath))
        return b"".join(out)
    a = read(old) if old is not None else b""
    b = read(new) if new is not None else b""
    if a == b:
        return b"".join(out) if len(out) > 1 else b""
    if is_binary(a) or is_binary(b):
        src = b"/dev/null" if old is None else b"a/" + bpath
        dst = b"/dev/null" if new is None else b"b/" + bpath
        out.append(b"Binary files %s and %s differ\n" % (src, dst))
        return b"".join(out)
    out.append(b"--- %s\n" % (b"/dev/null" if old is None else b"a/" + bpath))
    out.append(b"+++ %s\n" % (b"/dev/null" if new is None else b"b/" + bpath))
    out.extend(_hunks(_lines(a), _lines(b)))
    return b"".join(out)
