"""Store layer: the PostgreSQL store's objects and rows (the two halves of the seam).

Every query names its workspace (``ws``): the history's queries are
:class:`~._sql_meta.SqlMeta`'s, in this store's dialect (:data:`._sql.POSTGRES`). Writes of rows
run in :class:`PgTx`, which also takes a transaction-level advisory lock on the
workspace: two servers' writers of one workspace follow each other, as SQLite's
``BEGIN IMMEDIATE`` makes them do in a folder store (numbering a new turn or step reads
then writes). The scan's stat cache (``kv``, ``dircache``) is per machine: it is a SQLite
file in the local folder, written in the same ``with tx():`` block as the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from typing import Any

from ..errors import StoreError
from ._copy import COPY_TABLES
from ._meta import MetaStore
from ._objects import PackedObjects
from ._pg_conn import PgConn, PgTx
from ._rows import ObjectRow
from ._sql import NEXT_SEQ, POSTGRES
from ._sql_meta import SqlMeta

#: the workspace's cache generation (a number gc raises before it deletes objects)
GENERATION = "gc.generation"
#: the keys of the scan's cache (``scan.CACHE_KEY`` and its older formats)
SCAN_CACHE_PREFIX = "dirs-"
#: the history and generation this machine's scan cache was made under (in ``cache.db``)
LOCAL_GENERATION = "cache.generation"
#: the workspace's history's id, random, made with it (never copied to another store)
STORE_ID = "store.id"


class PgObjects(PackedObjects):
    """A workspace's objects, as rows of ``takeback.objects``."""

    #: one connection, whose transaction a second thread's reads would join
    write_behind_ok = False

    def __init__(self, pg: PgConn) -> None:
        super().__init__(pg.where)
        self.pg = pg

    def _row_exists(self, oid: str) -> bool:
        sql = "SELECT 1 FROM takeback.objects WHERE ws=%s AND oid=%s"
        return self.pg.one(sql, (self.pg.ws, oid)) is not None

    def _row_depth(self, oid: str) -> int | None:
        sql = "SELECT depth FROM takeback.objects WHERE ws=%s AND oid=%s"
        row = self.pg.one(sql, (self.pg.ws, oid))
        return None if row is None else int(row[0])

    def _row(self, oid: str) -> tuple[bytes, str | None] | None:
        sql = "SELECT data, base FROM takeback.objects WHERE ws=%s AND oid=%s"
        row = self.pg.one(sql, (self.pg.ws, oid))
        return None if row is None else (bytes(row[0]), row[1])

    def _insert_rows(self, rows: list[tuple[str, str, int, bytes, str | None, int]]) -> None:
        # Written once by content hash: an insert that meets a row another server wrote
        # first (the same bytes, by their name) leaves it.
        import psycopg

        try:
            with self.pg.conn.transaction():
                self.pg.many(
                    "INSERT INTO takeback.objects(ws, oid, kind, size, data, base, depth) "
                    "VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (ws, oid) DO NOTHING",
                    [(self.pg.ws, *r) for r in rows],
                )
        except psycopg.Error as e:
            raise self.pg.error(e) from e

    def entries(self) -> list[tuple[str, str, str | None]]:
        """Return every committed object: (id, kind, base), each base before its deltas."""
        rows = self.pg.run(
            "SELECT oid, kind, base FROM takeback.objects WHERE ws=%s ORDER BY depth, oid",
            (self.pg.ws,),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def _replace_row(self, oid: str, kind: str, size: int, packed: bytes) -> bool:
        try:
            self.pg.run(
                "INSERT INTO takeback.objects(ws, oid, kind, size, data, base, depth) "
                "VALUES (%s,%s,%s,%s,%s,NULL,0) ON CONFLICT (ws, oid) DO UPDATE SET "
                "kind=excluded.kind, size=excluded.size, data=excluded.data, base=NULL, depth=0",
                (self.pg.ws, oid, kind, size, packed),
            )
        except StoreError:
            return False
        return True

    # -- gc and fsck -----------------------------------------------------------------

    def index(self) -> dict[str, ObjectRow]:
        """Return every object's id with its kind, base, depth and stored size.

        ``octet_length`` of a stored value reads its header only, not its data.
        """
        self.flush()
        rows = self.pg.run(
            "SELECT oid, kind, base, depth, octet_length(data) FROM takeback.objects WHERE ws=%s",
            (self.pg.ws,),
        )
        return {r[0]: ObjectRow(r[1], r[2], int(r[3]), int(r[4])) for r in rows}

    def stored_mark(self) -> int:
        """Return the workspace's newest object number (0: none; see the seam).

        Numbers come from a sequence, never given twice and never taken back: under
        the exclusive lock, no write that took one is still under way.
        """
        self.flush()
        row = self.pg.one(
            "SELECT coalesce(max(seq), 0) FROM takeback.objects WHERE ws=%s", (self.pg.ws,)
        )
        return int(row[0]) if row else 0

    def stored_after(self, mark: int) -> list[tuple[str, str | None]]:
        """Return each object stored after ``mark`` (:meth:`stored_mark`): (id, delta base)."""
        self.flush()
        rows = self.pg.run(
            "SELECT oid, base FROM takeback.objects WHERE ws=%s AND seq > %s", (self.pg.ws, mark)
        )
        return [(r[0], r[1]) for r in rows]

    def _rewrite_rows(self, batch: list[tuple[bytes, str]]) -> None:
        import psycopg

        try:
            with self.pg.conn.transaction():
                self.pg.many(
                    "UPDATE takeback.objects SET data=%s, base=NULL, depth=0 "
                    "WHERE ws=%s AND oid=%s",
                    [(packed, self.pg.ws, oid) for packed, oid in batch],
                )
        except psycopg.Error as e:
            raise self.pg.error(e) from e

    def delete(self, oids: Sequence[str], *, batch: int = 4096) -> None:
        """Delete objects, in the order given, a batch per transaction (deepest first).

        Raises:
            StoreError: a batch could not be deleted (it is rolled back).
        """
        self.flush()
        for i in range(0, len(oids), batch):
            part = list(oids[i : i + batch])
            self.pg.run(
                "DELETE FROM takeback.objects WHERE ws=%s AND oid = ANY(%s)", (self.pg.ws, part)
            )
            for o in part:
                self._drop_raw(o)
                self._trees.pop(o, None)


#: how a table's rows are read in the order they were written (else by their key)
_COPY_ORDER = {"meta": "key", "snapshots": "seq", "turns": "seq", "ops": "id"}


class PgMeta(SqlMeta):
    """A workspace's rows in the database; the scan's cache in a local SQLite file."""

    dialect = POSTGRES

    def __init__(self, pg: PgConn, cache: Callable[[], MetaStore]) -> None:
        self.pg = pg
        self._open_cache = cache
        self._cache: MetaStore | None = None
        #: the history's id (``STORE_ID``): a local cache made for another is dropped
        self.store_id = ""

    def _local(self) -> MetaStore:
        if self._cache is None:
            cache = self._open_cache()
            if cache.get_meta(LOCAL_GENERATION) is None:
                # A new cache is this history's, as it is now (see _fresh_cache).
                cache.set_meta(LOCAL_GENERATION, self._stamp())
            self._cache = cache
        return self._cache

    def _stamp(self) -> str:
        return f"{self.store_id}/{self.get_meta(GENERATION) or '0'}"

    def close(self) -> None:
        """Close the local cache."""
        if self._cache is not None:
            self._cache.conn.close()
            self._cache = None

    def tx(self) -> PgTx:
        """Return a write transaction context (re-entrant, see :class:`PgTx`)."""
        return PgTx(self.pg, self._local)

    def _one_write(self) -> nullcontext[None]:
        # One statement outside a transaction is one already: no write lock is needed.
        return nullcontext()

    def _run(self, sql: str, params: dict[str, Any]) -> Any:
        params["ws"] = self.pg.ws
        return self.pg.run(sql, params)

    def _many(self, sql: str, rows: list[dict[str, Any]]) -> None:
        ws = self.pg.ws
        self.pg.many(sql, [{**r, "ws": ws} for r in rows])

    def _copy_order(self, table: str) -> str:
        return _COPY_ORDER.get(table, ", ".join(COPY_TABLES[table][:3]))

    def set_meta(self, key: str, value: str) -> None:
        """Set a workspace-level setting."""
        self.pg.run(
            "INSERT INTO takeback.meta(ws, key, value) VALUES (%s,%s,%s) "
            "ON CONFLICT (ws, key) DO UPDATE SET value=excluded.value",
            (self.pg.ws, key, value),
        )

    def _fresh_cache(self) -> MetaStore:
        """Return this machine's cache, emptied first if gc ran since it was made.

        gc (on any server) raises the workspace's generation before it deletes objects;
        this machine's scan cache, made under an older one, may name objects that are
        gone, so it is dropped (the next scan reads every file, as a first one does). So is
        a cache made for another history (``store_id``: a database made again at the same
        address, a key that names another workspace). Asked each time a scan reads its
        cache, under the shared lock that keeps gc out until the snapshot's rows are written.
        """
        cache = self._local()
        now = self._stamp()
        if (cache.get_meta(LOCAL_GENERATION) or "0") == now:
            return cache
        with cache.tx():  # joins the block's transaction, when asked inside one
            cache.drop_scan_cache()
            cache.set_meta(LOCAL_GENERATION, now)
        return cache

    def get_kv(self, key: str) -> bytes | None:
        """Return a cached value (this machine's; the scan's, when still valid)."""
        if key.startswith(SCAN_CACHE_PREFIX):
            return self._fresh_cache().get_kv(key)
        return self._local().get_kv(key)

    def get_kv_prefix(self, prefix: str) -> list[tuple[str, bytes]]:
        """Return the cached values under ``prefix``, in one statement (this machine's)."""
        if prefix.startswith(SCAN_CACHE_PREFIX):
            return self._fresh_cache().get_kv_prefix(prefix)
        return self._local().get_kv_prefix(prefix)

    def set_kv(self, key: str, value: bytes) -> None:
        """Store a cached value (this machine's)."""
        self._local().set_kv(key, value)

    def set_kvs(self, rows: dict[str, bytes | None]) -> None:
        """Store (or, for None, delete) some cached values (this machine's)."""
        self._local().set_kvs(rows)

    def drop_kv_except(self, keep: str, *, prefix: str) -> bool:
        """Delete this machine's cached values under ``prefix``, but ``keep`` and those under it."""
        return self._local().drop_kv_except(keep, prefix=prefix)

    def dircache_rows(self) -> list[bytes]:
        """Return the scan cache's detailed rows (this machine's)."""
        return self._local().dircache_rows()

    def dircache_dirs(self) -> list[str]:
        """Return the folders that have a detailed stat cache row (this machine's)."""
        return self._local().dircache_dirs()

    def get_dircache(self, dirs: Iterable[str]) -> dict[str, bytes]:
        """Return the detailed stat cache rows of some folders (this machine's)."""
        return self._local().get_dircache(dirs)

    def put_dircache(self, rows: dict[str, bytes | None]) -> None:
        """Replace (or, for None, drop) detailed stat cache rows (this machine's)."""
        self._local().put_dircache(rows)

    def drop_scan_cache(self) -> None:
        """Forget this machine's scan cache (the caller's transaction)."""
        self._local().drop_scan_cache()

    # -- the queries only this store words its own way -------------------------------

    def snapshot_ids_with_prefix(self, prefix: str) -> list[str]:
        """Return the ids that start with ``prefix`` (lower-case hex)."""
        rows = self.pg.run(
            "SELECT id FROM takeback.snapshots WHERE ws=%s AND starts_with(id, %s) "
            "ORDER BY id LIMIT 10",
            (self.pg.ws, prefix),
        )
        return [r[0] for r in rows]

    def next_seq(self) -> int:
        """Hand out the next number of the store-wide sequence (snapshots, turns, ops)."""
        row = self.pg.one(f"SELECT {NEXT_SEQ}", ())
        return int(row[0])

    def history_seq(self) -> int:
        """The sequence number of the history's last change: a turn begun or ended, an op."""
        row = self.pg.one(
            "SELECT GREATEST("
            "(SELECT MAX(GREATEST(begun_seq, COALESCE(ended_seq, 0))) FROM takeback.turns "
            "WHERE ws=%s), (SELECT MAX(seq) FROM takeback.ops WHERE ws=%s), 0)",
            (self.pg.ws, self.pg.ws),
        )
        return int(row[0] or 0)

    def drop_history_tx(self, *, objects_go: bool = False, **rows: Any) -> None:
        """Delete history rows in one transaction (see :meth:`drop_history`).

        The database checks every foreign key (a kept row naming a deleted snapshot
        fails the whole transaction). With ``objects_go`` the workspace's cache
        generation is raised in the same transaction, before any object is deleted, and
        this machine's cache (whose ids gc kept) is marked as made under the new one.

        Raises:
            StoreError: the transaction could not be committed (it is rolled back).
        """
        with self.tx():
            self.drop_history(**rows)
            if objects_go:
                row = self.pg.one(
                    "INSERT INTO takeback.meta(ws, key, value) VALUES (%s,%s,'1') "
                    "ON CONFLICT (ws, key) DO UPDATE SET "
                    "value=(takeback.meta.value::bigint + 1)::text RETURNING value",
                    (self.pg.ws, GENERATION),
                )
                self._local().set_meta(LOCAL_GENERATION, f"{self.store_id}/{row[0]}")

    def _delete_snapshots(self, ids: list[str]) -> None:
        if ids:
            self.pg.run(
                "DELETE FROM takeback.snapshots WHERE ws=%s AND id = ANY(%s)", (self.pg.ws, ids)
            )
