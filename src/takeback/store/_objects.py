"""Store layer: content-addressed objects (blobs and trees), packed as rows of one SQLite file.

An object is named by the SHA-256 of its content, written once, compressed with zstd, and
checked against its name on every read. Packing small objects into one database avoids the
cost of one file per object (slow to write, and very slow to delete, on big trees).

Deltas, as git's packs have them: a new version of a file or a folder's tree may be
compressed with the previous version (its *base*) as a zstd dictionary, when that comes
out smaller. A tree that changed in one entry then costs tens of bytes instead of a
kilobyte of hashes that do not compress. Reading such an object reads its base first;
chains are at most ``MAX_DEPTH`` long, and the hash check is on the full content, so a
damaged base is caught like any damaged object. Only ``gc`` deletes objects, through
:meth:`ObjectStore.delete`; it first rewrites whole (:meth:`ObjectStore.rewrite_whole`)
every kept object whose base it removes, or keeps that base.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ..errors import StoreCorruptError, StoreError
from ..model import Tree, decode_tree
from ._sqlite import Tx, checkpoint, columns, damaged

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects(
    oid TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    base TEXT,
    depth INTEGER NOT NULL DEFAULT 0
);
"""

_BATCH_BYTES = 32 << 20
_TREE_CACHE = 4096
_RAW_CACHE = 64
#: The longest chain of deltas a read may have to follow.
MAX_DEPTH = 16
#: Below this size a delta saves too little to be worth a base read.
_MIN_DELTA = 256
#: Above this size a base is not read back to compress against (memory and time).
_MAX_DELTA = 4 << 20


class _Pending(NamedTuple):
    """An object put but not yet committed, as its row will hold it."""

    kind: str
    size: int
    data: bytes
    base: str | None
    depth: int


class ObjectRow(NamedTuple):
    """What gc and fsck need of one stored object, without its data.

    Attributes:
        kind: ``blob`` or ``tree``.
        base: the object it is a delta of (None: stored whole).
        depth: how many deltas deep it is (a delta is always deeper than its base).
        stored: its size in the database (compressed), in bytes.
    """

    kind: str
    base: str | None
    depth: int
    stored: int


class ObjectStore:
    """Blobs and trees by id. Writes are batched; ``flush()`` commits what is pending."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        # zstandard loads on first use: an unchanged snapshot neither writes nor reads an
        # object, and start-up time is paid on every hook call.
        self._zstd: Any = None
        self._cctx: Any = None
        self._dctx: Any = None
        self._pending: dict[str, _Pending] = {}
        self._pending_bytes = 0
        self._trees: OrderedDict[str, Tree] = OrderedDict()
        self._raw: OrderedDict[str, bytes] = OrderedDict()
        #: how many objects' bytes are kept once read (gc, which reads every kept tree
        #: and so walks each delta chain many times, raises it)
        self.raw_cache = _RAW_CACHE

    def init_schema(self) -> None:
        """Create the table of a new store (idempotent: a creation cut short is finished)."""
        self.conn.executescript(_SCHEMA)
        if self._lacks_deltas():
            self._add_delta_columns()

    def check_schema(self) -> None:
        """Check an existing store's table in one query; nothing is created or changed.

        Its columns are the metadata's schema version's business (see :meth:`upgrade`).

        Raises:
            StoreCorruptError: the objects table is missing (the file is damaged).
        """
        (present,) = self.conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='objects'"
        ).fetchone()
        if not present:
            raise damaged(self.path, "has lost its table: objects")

    def upgrade(self) -> None:
        """Add the columns a store made before deltas lacks (in one transaction).

        Raises:
            StoreError: a column is missing and the store cannot be written.
        """
        if self._lacks_deltas():
            with Tx(self.conn):
                self._add_delta_columns()

    def _lacks_deltas(self) -> bool:
        """Whether the table is from a store made before deltas."""
        return "base" not in columns(self.conn, "objects")

    def _add_delta_columns(self) -> None:
        self.conn.execute("ALTER TABLE objects ADD COLUMN base TEXT")
        self.conn.execute("ALTER TABLE objects ADD COLUMN depth INTEGER NOT NULL DEFAULT 0")

    def _z(self) -> Any:
        if self._zstd is None:
            import zstandard

            self._zstd = zstandard
            self._cctx = zstandard.ZstdCompressor(level=3)
            self._dctx = zstandard.ZstdDecompressor()
        return self._zstd

    # -- writing ---------------------------------------------------------------------

    def has(self, oid: str) -> bool:
        """Return whether the object exists (committed or pending)."""
        if oid in self._pending:
            return True
        row = self.conn.execute("SELECT 1 FROM objects WHERE oid=?", (oid,)).fetchone()
        return row is not None

    def put(self, kind: str, data: bytes, oid: str | None = None, base: str | None = None) -> str:
        """Add an object (if new) and return its id.

        Args:
            kind: ``blob`` or ``tree``.
            data: the content.
            oid: its SHA-256, when the caller has it already.
            base: the id of an earlier version, to store this one as a delta against.
        """
        if oid is None:
            oid = hashlib.sha256(data).hexdigest()
        if self.has(oid):
            return oid
        z = self._z()
        packed = self._cctx.compress(data)
        used: str | None = None
        depth = 0
        if base is not None and base != oid and _MIN_DELTA <= len(data) <= _MAX_DELTA:
            base_depth = self._depth(base)
            if base_depth is not None and base_depth < MAX_DEPTH:
                try:
                    base_data = self.get(base)
                except StoreCorruptError:
                    base_data = b""
                if base_data and len(base_data) <= _MAX_DELTA:
                    d = z.ZstdCompressionDict(base_data, dict_type=z.DICT_TYPE_RAWCONTENT)
                    delta = z.ZstdCompressor(level=3, dict_data=d).compress(data)
                    if len(delta) < len(packed):
                        packed, used, depth = delta, base, base_depth + 1
        self._pending[oid] = _Pending(kind, len(data), packed, used, depth)
        self._pending_bytes += len(packed)
        if self._pending_bytes >= _BATCH_BYTES:
            self.flush()
        return oid

    def _depth(self, oid: str) -> int | None:
        pending = self._pending.get(oid)
        if pending is not None:
            return pending.depth
        row = self.conn.execute("SELECT depth FROM objects WHERE oid=?", (oid,)).fetchone()
        return None if row is None else int(row[0])

    def flush(self) -> None:
        """Commit pending objects in one transaction (in put order: a base comes first)."""
        if not self._pending:
            return
        rows = [(oid, *p) for oid, p in self._pending.items()]
        try:
            with Tx(self.conn) as c:
                c.executemany(
                    "INSERT OR IGNORE INTO objects(oid, kind, size, data, base, depth) "
                    "VALUES (?,?,?,?,?,?)",
                    rows,
                )
        finally:
            # Written or not, these are dropped: a failed batch fails its snapshot, and
            # nothing may refer to objects that were never committed.
            self._pending.clear()
            self._pending_bytes = 0

    def repair(self, kind: str, data: bytes) -> bool:
        """Store ``data`` again, whole, over a damaged copy of the same object.

        Deltas built on the object stay valid: they need its bytes, which are the same.

        Returns:
            Whether it was written.
        """
        oid = hashlib.sha256(data).hexdigest()
        self.flush()
        self._raw.pop(oid, None)
        self._trees.pop(oid, None)
        self._z()
        packed = self._cctx.compress(data)
        try:
            with Tx(self.conn) as c:
                c.execute(
                    "INSERT OR REPLACE INTO objects(oid, kind, size, data, base, depth) "
                    "VALUES (?,?,?,?,NULL,0)",
                    (oid, kind, len(data), packed),
                )
        except sqlite3.Error:
            return False
        return True

    # -- reading ---------------------------------------------------------------------

    def get(self, oid: str, *, _depth: int = 0) -> bytes:
        """Return an object's bytes, checked against its id.

        Raises:
            StoreCorruptError: missing, undecodable, or its hash differs from its id.
        """
        cached = self._raw.get(oid)
        if cached is not None:
            self._raw.move_to_end(oid)
            return cached
        pending = self._pending.get(oid)
        if pending is not None:
            packed, base = pending.data, pending.base
        else:
            row = self.conn.execute("SELECT data, base FROM objects WHERE oid=?", (oid,)).fetchone()
            if row is None:
                raise StoreCorruptError(
                    f"store object {oid[:12]} is missing", path=self.path, expected=oid
                )
            packed, base = row
        z = self._z()
        try:
            if base is None:
                data: bytes = self._dctx.decompress(packed)
            else:
                if _depth > MAX_DEPTH:
                    raise StoreCorruptError(
                        f"store object {oid[:12]} has a delta loop", path=self.path, expected=oid
                    )
                d = z.ZstdCompressionDict(
                    self.get(base, _depth=_depth + 1), dict_type=z.DICT_TYPE_RAWCONTENT
                )
                data = z.ZstdDecompressor(dict_data=d).decompress(packed)
        except z.ZstdError as e:
            raise StoreCorruptError(
                f"store object {oid[:12]} is damaged: {e}", path=self.path, expected=oid
            ) from e
        actual = hashlib.sha256(data).hexdigest()
        if actual != oid:
            raise StoreCorruptError(
                f"store object {oid[:12]} fails its hash check (got {actual[:12]})",
                path=self.path,
                expected=oid,
                actual=actual,
            )
        if base is not None or len(data) <= _MIN_DELTA * 64:
            # Bases of deltas are read again and again along a chain: keep a few.
            self._raw[oid] = data
            if len(self._raw) > self.raw_cache:
                self._raw.popitem(last=False)
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

    # -- gc and fsck -----------------------------------------------------------------

    def index(self) -> dict[str, ObjectRow]:
        """Return every stored object's id with its kind, base, depth and stored size.

        The data itself is not read (SQLite's ``length()`` of a blob reads its header).
        """
        self.flush()
        rows = self.conn.execute(
            "SELECT oid, kind, base, depth, length(data) FROM objects"
        ).fetchall()
        return {r[0]: ObjectRow(r[1], r[2], r[3], r[4]) for r in rows}

    def rewrite_whole(self, oids: Iterable[str]) -> list[str]:
        """Store objects again whole (not as deltas), so that their bases may go.

        Each batch is its own transaction: an object is either its old delta or whole,
        and both give the same bytes, so a crash in between loses nothing.

        Returns:
            The ids that could not be rewritten (a full disk, a damaged chain); the
            caller keeps their bases instead.
        """
        self.flush()
        self._z()
        failed: list[str] = []
        batch: list[tuple[bytes, str]] = []
        size = 0

        def commit() -> None:
            nonlocal size
            try:
                with Tx(self.conn) as c:
                    c.executemany(
                        "UPDATE objects SET data=?, base=NULL, depth=0 WHERE oid=?", batch
                    )
            except StoreError:
                failed.extend(oid for _d, oid in batch)
            batch.clear()
            size = 0

        for oid in oids:
            try:
                data = self.get(oid)
            except StoreCorruptError:
                failed.append(oid)
                continue
            packed = self._cctx.compress(data)
            batch.append((packed, oid))
            size += len(packed)
            if size >= _BATCH_BYTES:
                commit()
        if batch:
            commit()
        return failed

    def delete(self, oids: Sequence[str], *, batch: int = 4096) -> None:
        """Delete objects, in the order given, a batch per transaction.

        The caller orders them deepest first, so that after every batch each object left
        still has its base (a crash between two batches leaves a readable store).

        Raises:
            StoreError: a batch could not be written (it is rolled back).
        """
        self.flush()
        for i in range(0, len(oids), batch):
            part = oids[i : i + batch]
            try:
                self._delete(part)
            except StoreError:
                # A full disk: SQLite's log needs room for the pages a batch changes;
                # small batches, each checkpointed away, need little.
                checkpoint(self.conn)
                for j in range(0, len(part), 32):
                    self._delete(part[j : j + 32])
                    checkpoint(self.conn)
        checkpoint(self.conn)

    def _delete(self, oids: Sequence[str]) -> None:
        with Tx(self.conn) as c:
            c.executemany("DELETE FROM objects WHERE oid=?", [(o,) for o in oids])
        for o in oids:
            self._raw.pop(o, None)
            self._trees.pop(o, None)
