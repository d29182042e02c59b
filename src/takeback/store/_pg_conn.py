"""Store layer: the PostgreSQL store's one connection, and its write transactions.

:class:`PgConn` sends every query and turns a driver's error into a :class:`StoreError`
(``_pg_limits`` words it); :class:`PgTx` is the write transaction that first takes the
workspace's write lock (waiting for it outside the statement timeout), and brings the
local cache's SQLite transaction along.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ._meta import MetaStore
from ._pg_limits import reworded, wait_for_lock
from ._pg_schema import LOCK_WRITE
from ._sqlite import Tx

if TYPE_CHECKING:
    import psycopg


class PgConn:
    """One connection, the workspace it works for, and the one way queries are sent.

    A database error becomes a :class:`StoreError` (one line, exit 2), as the folder
    store's do.
    """

    def __init__(
        self, conn: psycopg.Connection[Any], ws: int, where: str, slow: str | None = None
    ) -> None:
        self.conn, self.ws, self.where, self.slow = conn, ws, where, slow
        self.depth = 0  # open PgTx blocks

    def error(self, e: Exception) -> StoreError:
        """Return the error for a failed query (its first line, or ``slow`` for a timeout)."""
        return reworded(e, self.where, self.slow)

    def run(self, sql: str, args: Sequence[Any] | Mapping[str, Any] = ()) -> psycopg.Cursor[Any]:
        """Execute one statement (``%s`` placeholders, or ``%(name)s`` with a mapping)."""
        import psycopg

        try:
            return self.conn.execute(sql.encode(), args)
        except psycopg.Error as e:
            raise self.error(e) from e

    def one(self, sql: str, args: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        """Return the first row, or None."""
        return self.run(sql, args).fetchone()

    def many(self, sql: str, rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> None:
        """Execute a statement for each row (pipelined by the driver)."""
        import psycopg

        rows = list(rows)
        if not rows:
            return
        try:
            with self.conn.cursor() as cur:
                cur.executemany(sql.encode(), rows)
        except psycopg.Error as e:
            raise self.error(e) from e


class PgTx:
    """``with PgTx(...):`` runs the block in one transaction, with the local cache's.

    The outermost block takes the workspace's write lock first, and brings the local
    cache's SQLite transaction along, so the block's cache writes are one commit too.
    Re-entrant, as the folder store's :class:`~._sqlite.Tx`: a block inside another
    joins it as a savepoint (in the database and in the cache), commits nothing, and
    when it fails undoes its own writes only; the outermost block commits.
    """

    def __init__(self, pg: PgConn, cache: Callable[[], MetaStore | None]) -> None:
        self.pg = pg
        self.cache = cache
        self._tx: Any = None
        self._cache_tx: Tx | None = None

    def __enter__(self) -> PgTx:
        import psycopg

        try:
            self._tx = self.pg.conn.transaction()
            self._tx.__enter__()
        except psycopg.Error as e:
            raise self.pg.error(e) from e
        self.pg.depth += 1
        try:
            if self.pg.depth == 1:
                wait_for_lock(
                    self.pg.run, "pg_advisory_xact_lock", (LOCK_WRITE, self.pg.ws), local=True
                )
            cache = self.cache()
            if cache is not None:
                self._cache_tx = Tx(cache.conn)
                self._cache_tx.__enter__()
        except BaseException as e:
            self.pg.depth -= 1
            self._tx.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        import psycopg

        self.pg.depth -= 1
        try:
            self._tx.__exit__(exc_type, exc, tb)
        except psycopg.Error as e:
            # The rows were not committed: neither is the cache that describes them.
            if self._cache_tx is not None:
                self._cache_tx.__exit__(type(e), e, None)
            raise self.pg.error(e) from e
        if self._cache_tx is not None:
            self._cache_tx.__exit__(exc_type, exc, tb)
