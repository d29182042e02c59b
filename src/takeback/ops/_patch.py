"""Ops layer: unified diffs that ``git apply`` accepts, and line counts of a change."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zlib
from collections.abc import Callable, Iterator

from ..model import DIR, LARGE, LINK, UNREADABLE, Entry

_BINARY_PROBE = 8000
_NULL_ID = b"0" * 40
_SHORT_ID = 7
_BASE85_LINE = 52  # bytes of deflated data per line of a binary hunk, as git writes them

# git's core.quotePath=true: a name holding a control byte, a double quote, a backslash
# or any byte from 0x7f up is written in double quotes with C escapes, so that every
# name fits on one line of ASCII and a patch names exactly the bytes of the file.
_NEEDS_QUOTE = re.compile(rb'[\x00-\x1f"\\\x7f-\xff]')
_C_ESCAPES = {
    0x07: b"\\a",
    0x08: b"\\b",
    0x09: b"\\t",
    0x0A: b"\\n",
    0x0B: b"\\v",
    0x0C: b"\\f",
    0x0D: b"\\r",
    0x22: b'\\"',
    0x5C: b"\\\\",
}
_QUOTED_BYTE = [
    _C_ESCAPES.get(c, b"\\%03o" % c if c < 0x20 or c >= 0x7F else bytes([c])) for c in range(256)
]


def is_binary(data: bytes) -> bool:
    """Git's rule: a NUL byte in the first 8000 bytes makes a file binary."""
    return b"\0" in data[:_BINARY_PROBE]


def _quote(name: bytes) -> bytes:
    if _NEEDS_QUOTE.search(name) is None:
        return name
    return b'"' + b"".join(_QUOTED_BYTE[c] for c in name) + b'"'


def quote_path(path: str) -> str:
    r"""Return a path as git writes it with core.quotePath=true.

    A path of printable ASCII is returned as it is; any other is put in double quotes with
    C escapes (``\t``, ``\n``, ``\"``, ``\\``, and three octal digits for other
    control bytes and for every byte from 0x7f up, UTF-8 or not). The result is always
    printable ASCII, one line.

    Args:
        path: a path as takeback holds it (undecodable bytes as surrogate escapes).

    Returns:
        The path as ``git diff --name-status`` would print it.
    """
    return _quote(os.fsencode(path)).decode("ascii")


def _git_mode(e: Entry) -> str:
    if e.kind == LINK:
        return "120000"
    return "100755" if e.mode & 0o111 else "100644"


def _lines(data: bytes) -> list[bytes]:
    # Only LF ends a line, as in git: ``bytes.splitlines`` also splits on a bare CR, and a
    # patch cut there does not apply (nor do its line counts match git's).
    lines = data.split(b"\n")
    last = lines.pop()
    out = [line + b"\n" for line in lines]
    if last:
        out.append(last)
    return out


def line_counts(old: bytes | None, new: bytes | None) -> tuple[int, int]:
    """Return (lines added, lines removed) from ``old`` to ``new``; binary counts 0.

    The counts are those of the patch :func:`file_patch` writes: lines end at LF only.
    """
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
    a_name, b_name = _quote(b"a/" + bpath), _quote(b"b/" + bpath)
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
    out.extend(_hunks(_lines(a), _lines(b)))
    return b"".join(out)
