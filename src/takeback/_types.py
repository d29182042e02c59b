"""Base layer: how ids are shown and abbreviated.

Ids are SHA-256 digests in hex (of a blob's bytes, a tree's encoding, a snapshot's
record), passed as plain ``str``: the NewType ids once declared here were never used,
and a type that nothing checks says nothing.
"""

from __future__ import annotations

#: Length of an id as shown to people (like git's abbreviated hashes).
SHORT_ID = 10
#: The shortest prefix a ref may use.
MIN_PREFIX = 4


def short(oid: str) -> str:
    """Return the abbreviated form of an id, as printed to people."""
    return oid[:SHORT_ID]
