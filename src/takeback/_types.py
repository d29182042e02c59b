"""Base layer: typed ids, so a blob id is never passed where a snapshot id belongs."""

from __future__ import annotations

from typing import NewType

#: SHA-256 (hex) of a file's bytes or a symlink's target: the name of a blob object.
BlobId = NewType("BlobId", str)
#: SHA-256 (hex) of a tree's canonical encoding: the name of a tree object.
TreeId = NewType("TreeId", str)
#: SHA-256 (hex) of a snapshot's record: what `takeback log` shows, shortened.
SnapshotId = NewType("SnapshotId", str)

#: Length of an id as shown to people (like git's abbreviated hashes).
SHORT_ID = 10
#: The shortest prefix a ref may use.
MIN_PREFIX = 4


def short(oid: str) -> str:
    """Return the abbreviated form of an id, as printed to people."""
    return oid[:SHORT_ID]
