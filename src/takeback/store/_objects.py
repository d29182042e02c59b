"""Store layer: content-addressed objects (blobs and trees), packed as rows of one SQLite file.

An object is named by the SHA-256 of its content, written once, compressed with zstd, and
checked against its name on every read. Packing small objects into one database avoids the
cost of one file per object (slow to write, and very slow to delete, on big trees).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import OrderedDict
from typing import Any

from ..errors import StoreCorruptError
from ..model import Tree, decode_tree
from ._sqlite import Tx

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects(
    oid TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);
"""

_BATCH_BYTES = 32 << 20
_TREE_CACHE = 4096


class ObjectStore:
    """Blobs and trees by id. Writes are batched; ``flush()`` commits what is pending."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        conn.executescript(_SCHEMA)
        # zstandard loads on first use: an unchanged snapshot neither writes nor reads an
        # object, and start-up time is paid on every hook call.
        self._cctx: Any = None
        self._dctx: Any = None
        self._pending: dict[str, tuple[str, int, bytes]] = {}
        self._pending_bytes = 0
        self._trees: OrderedDict[str, Tree] = OrderedDict()

    # -- writing ---------------------------------------------------------------------

    def has(self, oid: str) -> bool:
        """Return whether the object exists (committed or pending)."""
        if oid in self._pending:
            return True
        row = self.conn.execute("SELECT 1 FROM objects WHERE oid=?", (oid,)).fetchone()
        return row is not None

    def put(self, kind: str, data: bytes, oid: str | None = None) -> str:
        """Add an object (if new) and return its id; ``oid`` may pass a hash already known."""
        if oid is None:
            oid = hashlib.sha256(data).hexdigest()
        if self.has(oid):
            return oid
        if self._cctx is None:
            import zstandard

            self._cctx = zstandard.ZstdCompressor(level=3)
        packed = self._cctx.compress(data)
        self._pending[oid] = (kind, len(data), packed)
        self._pending_bytes += len(packed)
        if self._pending_bytes >= _BATCH_BYTES:
            self.flush()
        return oid

    def flush(self) -> None:
        """Commit pending objects in one transaction (blobs before trees, in put order)."""
        if not self._pending:
            return
        rows = [(oid, kind, size, data) for oid, (kind, size, data) in self._pending.items()]
        try:
            with Tx(self.conn) as c:
                c.executemany(
                    "INSERT OR IGNORE INTO objects(oid, kind, size, data) VALUES (?,?,?,?)", rows
                )
        finally:
            # Written or not, these are dropped: a failed batch fails its snapshot, and
            # nothing may refer to objects that were never committed.
            self._pending.clear()
            self._pending_bytes = 0

    # -- reading ---------------------------------------------------------------------

    def get(self, oid: str) -> bytes:
        """Return an object's bytes, checked against its id.

        Raises:
            StoreCorruptError: missing, undecodable, or its hash differs from its id.
        """
        pending = self._pending.get(oid)
        if pending is not None:
            packed = pending[2]
        else:
            row = self.conn.execute("SELECT data FROM objects WHERE oid=?", (oid,)).fetchone()
            if row is None:
                raise StoreCorruptError(f"store object {oid[:12]} is missing", path=self.path,
                                        expected=oid)
            packed = row[0]
        import zstandard

        if self._dctx is None:
            self._dctx = zstandard.ZstdDecompressor()
        try:
            data: bytes = self._dctx.decompress(packed)
        except zstandard.ZstdError as e:
            raise StoreCorruptError(
                f"store object {oid[:12]} is damaged: {e}", path=self.path, expected=oid
            ) from e
        actual = hashlib.sha256(data).hexdigest()
        if actual != oid:
            raise StoreCorruptError(
                f"store object {oid[:12]} fails its hash check (got {actual[:12]})",
                path=self.path, expected=oid, actual=actual,
            )
        return data

    def get_tree(self, oid: str) -> Tree:
        """Return a decoded tree (cached; trees are immutable)."""
        tree = self._trees.get(oid)
        if tree is not None:
            self._trees.move_to_end(oid)
            return tree
        try:
            tree = decode_tree(self.get(oid))
        except ValueError as e:
            raise StoreCorruptError(f"store tree {oid[:12]} is malformed", path=self.path) from e
        self._trees[oid] = tree
        if len(self._trees) > _TREE_CACHE:
            self._trees.popitem(last=False)
        return tree

    def all_ids(self) -> list[str]:
        """Return every object id (for fsck and gc)."""
        return [r[0] for r in self.conn.execute("SELECT oid FROM objects")]

    def delete(self, oids: list[str]) -> None:
        """Remove objects (only gc calls this, under the exclusive lock)."""
        with Tx(self.conn) as c:
            c.executemany("DELETE FROM objects WHERE oid=?", [(o,) for o in oids])
