"""Store layer: the folder store's objects, rows of ``objects.db`` (SQLite, WAL).

What every store's objects share (zstd, deltas, batches, the hash check) is
:class:`~._objects.PackedObjects`; here are SQLite's rows for them, its schema, and gc's
deletions, a batch per transaction and, on a full disk, a few rows per checkpoint.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..errors import StoreError
from ._objects import PackedObjects
from ._rows import ObjectRow
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


def read_ids(conn: sqlite3.Connection, after: str, count: int) -> tuple[str | None, int]:
    """Read up to ``count`` ids of the objects' id index after ``after``, in order.

    Only the index is read (its pages, which the system then keeps in memory). Returns
    the last id read and how many were read (None, 0: none comes after ``after``).
    """
    last, n = conn.execute(
        "SELECT max(oid), count(*) FROM"
        " (SELECT oid FROM objects WHERE oid > ? ORDER BY oid LIMIT ?)",
        (after, count),
    ).fetchone()
    return (None if last is None else str(last)), int(n)


class ObjectStore(PackedObjects):
    """The folder store's objects: rows of ``objects.db`` (SQLite, WAL)."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        super().__init__(path)
        self.conn = conn

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

    def _row_exists(self, oid: str) -> bool:
        return self.conn.execute("SELECT 1 FROM objects WHERE oid=?", (oid,)).fetchone() is not None

    def _row_depth(self, oid: str) -> int | None:
        row = self.conn.execute("SELECT depth FROM objects WHERE oid=?", (oid,)).fetchone()
        return None if row is None else int(row[0])

    def _row(self, oid: str) -> tuple[bytes, str | None] | None:
        row = self.conn.execute("SELECT data, base FROM objects WHERE oid=?", (oid,)).fetchone()
        return None if row is None else (row[0], row[1])

    def _row_full(self, oid: str) -> tuple[bytes, str | None, int] | None:
        row = self.conn.execute(
            "SELECT data, base, depth FROM objects WHERE oid=?", (oid,)
        ).fetchone()
        return None if row is None else (row[0], row[1], int(row[2]))

    def _insert_rows(self, rows: list[tuple[str, str, int, bytes, str | None, int]]) -> None:
        with Tx(self.conn) as c:
            c.executemany(
                "INSERT OR IGNORE INTO objects(oid, kind, size, data, base, depth) "
                "VALUES (?,?,?,?,?,?)",
                rows,
            )

    def _replace_row(self, oid: str, kind: str, size: int, packed: bytes) -> bool:
        try:
            with Tx(self.conn) as c:
                c.execute(
                    "INSERT OR REPLACE INTO objects(oid, kind, size, data, base, depth) "
                    "VALUES (?,?,?,?,NULL,0)",
                    (oid, kind, size, packed),
                )
        except sqlite3.Error:
            return False
        return True

    def entries(self) -> list[tuple[str, str, str | None]]:
        """Return every committed object: (id, kind, base), each base before its deltas."""
        rows = self.conn.execute("SELECT oid, kind, base FROM objects ORDER BY depth, oid")
        return [(r[0], r[1], r[2]) for r in rows]

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

    def stored_mark(self) -> int:
        """Return the number of the newest row (0: none).

        A row stored later gets a greater one: SQLite numbers a new row one past the
        greatest. Only gc deletes rows, one gc at a time, and it reads this again after
        its own deletions, which may have taken the greatest.
        """
        self.flush()
        (mark,) = self.conn.execute("SELECT coalesce(max(rowid), 0) FROM objects").fetchone()
        return int(mark)

    def stored_after(self, mark: int) -> list[tuple[str, str | None]]:
        """Return each row stored after ``mark`` (:meth:`stored_mark`): (id, delta base)."""
        self.flush()
        rows = self.conn.execute("SELECT oid, base FROM objects WHERE rowid > ?", (mark,))
        return [(r[0], r[1]) for r in rows]

    def _rewrite_rows(self, batch: list[tuple[bytes, str]]) -> None:
        with Tx(self.conn) as c:
            c.executemany("UPDATE objects SET data=?, base=NULL, depth=0 WHERE oid=?", batch)

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
            self._drop_raw(o)
            self._trees.pop(o, None)
