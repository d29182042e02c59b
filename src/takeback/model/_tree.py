r"""Model layer: the entries of one folder and their canonical encoding.

A tree is one folder's listing, stored as its own object (like git's), so two snapshots
that differ in one file share every folder but the ones above it. The encoding is a line
per entry, sorted by the name's bytes::

    <kind> <mode octal> <oid> <size>\\t<name>\\0

kind is ``f`` (a kept file; oid names its blob), ``l`` (a symlink; oid names a blob holding
the target), ``d`` (a folder; oid names its tree) or ``x`` (a file over the size limit,
counted but not kept; oid is empty).
"""

from __future__ import annotations

import os
from typing import NamedTuple

FILE = "f"
LINK = "l"
DIR = "d"
LARGE = "x"


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
    parts = []
    for bname, name in sorted((os.fsencode(n), n) for n in tree):
        e = tree[name]
        parts.append(
            b"%s %o %s %d\t%s\0" % (e.kind.encode(), e.mode, e.oid.encode(), e.size, bname)
        )
    return b"".join(parts)


def decode_tree(data: bytes) -> Tree:
    """Parse a tree's canonical bytes.

    Raises:
        ValueError: the bytes are not a tree.
    """
    tree: Tree = {}
    if not data:
        return tree
    if not data.endswith(b"\0"):
        raise ValueError("tree does not end with NUL")
    for record in data[:-1].split(b"\0"):
        head, _, bname = record.partition(b"\t")
        kind, mode, oid, size = head.split(b" ")
        tree[os.fsdecode(bname)] = Entry(kind.decode(), int(mode, 8), oid.decode(), int(size))
    return tree


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
