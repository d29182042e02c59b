"""Model layer: the entries of one folder and their canonical encoding.

A tree is one folder's listing, stored as its own object (like git's), so two snapshots
that differ in one file share every folder but the ones above it. The encoding has one
record per entry, sorted by the name's bytes: ``<kind> <mode octal> <size> <name>``, a
NUL byte, then the 32 bytes of the object's SHA-256 (binary, as git stores its ids: half
the size of hex, which matters because every snapshot after a change stores the trees
above it again).

kind is ``f`` (a kept file; the id names its blob), ``l`` (a symlink; a blob holding the
target), ``d`` (a folder; its tree), ``x`` (a file over the size limit, counted but not
kept; the id is all zeros) or ``u`` (a file or folder the scan could not read: no
permission, or a path longer than the system allows; the id is all zeros, the mode its
permission bits where they could be seen, else 0). A ``u`` entry says something is there
and what it holds is unknown: a restore neither writes over it nor removes it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from operator import itemgetter
from typing import NamedTuple

FILE = "f"
LINK = "l"
DIR = "d"
LARGE = "x"
UNREADABLE = "u"
_NO_ID = bytes(32)
_NO_HEX = _NO_ID.hex()
_KINDS = {k: k.encode() for k in (FILE, LINK, DIR, LARGE, UNREADABLE)}
_FS_ENCODING = sys.getfilesystemencoding()
_FS_ERRORS = sys.getfilesystemencodeerrors()
_first = itemgetter(0)


class Entry(NamedTuple):
    """One entry of a folder: what it is, its permission bits, the object that holds it."""

    kind: str
    mode: int
    oid: str
    size: int


#: One folder's listing: name -> entry.
Tree = dict[str, Entry]


def encode_tree(tree: Tree) -> bytes:
    """Return the canonical bytes of a tree (the input of its hash)."""
    # Names encoded as os.fsencode does, without its call per name (a snapshot encodes
    # the tree of every folder it changed, and each one's last tree as a delta base).
    enc, errors = _FS_ENCODING, _FS_ERRORS
    parts = []
    for bname, e in sorted([(n.encode(enc, errors), e) for n, e in tree.items()], key=_first):
        parts.append(b"%s %o %d %s\0" % (_KINDS[e.kind], e.mode, e.size, bname))
        parts.append(bytes.fromhex(e.oid) if e.oid else _NO_ID)
    return b"".join(parts)


def decode_tree(data: bytes) -> Tree:
    """Parse a tree's canonical bytes.

    Raises:
        ValueError: the bytes are not a tree.
    """
    tree: Tree = {}
    pos, end = 0, len(data)
    while pos < end:
        nul = data.index(b"\0", pos)
        kind, mode, size, bname = data[pos:nul].split(b" ", 3)
        raw = data[nul + 1 : nul + 33]
        if len(raw) != 32:
            raise ValueError("tree record is cut short")
        oid = "" if raw == _NO_ID else raw.hex()
        tree[os.fsdecode(bname)] = Entry(kind.decode(), int(mode, 8), oid, int(size))
        pos = nul + 33
    return tree


def changed_entries(old: bytes, new: bytes) -> tuple[Tree, Tree]:
    """Return the entries of two trees' canonical bytes that are not byte for byte alike.

    What a comparison of two versions of a folder needs: an entry whose record is the
    same on both sides (kind, mode, size, name and id) is left out of both, and only the
    rest is decoded (a folder with one file changed decodes two records, not all).

    Raises:
        ValueError: either is not a tree.
    """
    a, b = _records(old), _records(new)
    if a and b:
        same = a.keys() & b.keys()
        for record in same:
            del a[record], b[record]
    return _decode_records(a), _decode_records(b)


def _spans(data: bytes) -> Iterator[tuple[int, int]]:
    """Yield where each record of a tree's canonical bytes starts and where its NUL is.

    Raises:
        ValueError: the bytes end inside a record.
    """
    pos, end = 0, len(data)
    find = data.find
    while pos < end:
        nul = find(b"\0", pos)
        if nul < 0 or nul + 33 > end:
            raise ValueError("tree record is cut short")
        yield pos, nul
        pos = nul + 33


def _records(data: bytes) -> dict[bytes, None]:
    """Split a tree's canonical bytes into its records (in order, each with its id)."""
    return {data[pos : nul + 33]: None for pos, nul in _spans(data)}


def _decode_records(records: dict[bytes, None]) -> Tree:
    return decode_tree(b"".join(records)) if records else {}


def replace_ids(data: bytes, ids: dict[str, tuple[str, str]]) -> bytes:
    """Return a tree's canonical bytes with some folders' ids replaced.

    ``ids`` maps a folder's name to its id in ``data`` and the id that replaces it; the
    names and their order are kept, so the result is the canonical bytes of the tree
    with those entries changed, as encoding it anew would give.

    Raises:
        ValueError: ``data`` is not a tree, or does not hold each named folder with the
            id given.
    """
    enc, errors = _FS_ENCODING, _FS_ERRORS
    want = {
        n.encode(enc, errors): (bytes.fromhex(a), bytes.fromhex(b)) for n, (a, b) in ids.items()
    }
    out: list[bytes] = []
    last = found = 0
    for pos, nul in _spans(data):
        if data[pos] == 0x64:  # d
            fields = data[pos:nul].split(b" ", 3)
            hit = want.get(fields[3]) if len(fields) == 4 else None
            if hit is not None:
                if data[nul + 1 : nul + 33] != hit[0]:
                    raise ValueError("a folder's id is not the one given")
                out.append(data[last : nul + 1])
                out.append(hit[1])
                last = nul + 33
                found += 1
    if found != len(want):
        raise ValueError("a folder named is not in the tree")
    out.append(data[last:])
    return b"".join(out)


def tree_links(data: bytes) -> tuple[list[str], list[str]]:
    """Return the ids a tree's canonical bytes name: (subtrees, blobs of files and links).

    What gc's walk needs, without decoding names, modes and sizes.

    Raises:
        ValueError: the bytes are not a tree.
    """
    trees: list[str] = []
    blobs: list[str] = []
    text = data.hex()  # once per tree: each id is then a slice of it
    for pos, nul in _spans(data):
        oid = text[2 * nul + 2 : 2 * nul + 66]
        if oid != _NO_HEX:
            kind = data[pos]
            if kind == 0x64:  # d
                trees.append(oid)
            elif kind in (0x66, 0x6C):  # f, l
                blobs.append(oid)
    return trees, blobs


def entry_state(entry: Entry | None) -> tuple[str, int, str] | None:
    """What a restore compares: kind, permission bits (not for links) and object, or None."""
    if entry is None:
        return None
    return (entry.kind, 0 if entry.kind == LINK else entry.mode, entry.oid)


def encode_state(entry: Entry | None) -> str | None:
    """Return an entry as one line of text for the database (None stays None: absent)."""
    if entry is None:
        return None
    return f"{entry.kind} {entry.mode:o} {entry.oid or '-'} {entry.size}"


def decode_state(text: str | None) -> Entry | None:
    """Parse what :func:`encode_state` wrote."""
    if text is None:
        return None
    kind, mode, oid, size = text.split(" ")
    return Entry(kind, int(mode, 8), "" if oid == "-" else oid, int(size))
