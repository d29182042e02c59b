"""Ops layer: how a path is written for people and in patches (git's quoting).

Apart from the patches (``_patch``) so that what prints a path, a snapshot's report
say, does not load the diff machinery.
"""

from __future__ import annotations

import os
import re

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


def quote_name(name: bytes) -> bytes:
    """Return a name's bytes as git writes them with core.quotePath=true."""
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
    return quote_name(os.fsencode(path)).decode("ascii")
