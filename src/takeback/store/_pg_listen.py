"""Store layer: hearing that a PostgreSQL workspace's history changed (LISTEN/NOTIFY).

Every event a PostgreSQL store logs is announced on ``takeback_events`` with the
workspace's key (``PgStore.log_event``). A listener holds a connection of its own that
listens on that channel and tells its caller when a notification names its workspace:
the page's live updates, which on a folder store watch the store's files instead.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ._pg import connect_db
from ._pg_address import StoreAddress
from ._pg_limits import reworded
from ._pg_schema import EVENTS_CHANNEL


class PgListener:
    """A connection that listens for one workspace's events.

    Args:
        address: the database.
        key: the workspace's key in it.

    Raises:
        StoreError: the database cannot be reached.
    """

    def __init__(self, address: StoreAddress, key: str) -> None:
        self._address = address
        self._key = key
        self._conn: Any = connect_db(address)
        self._run(f"LISTEN {EVENTS_CHANNEL}")

    def _run(self, sql: str) -> None:
        import psycopg

        try:
            self._conn.execute(sql.encode())
        except psycopg.Error as e:
            raise reworded(e, self._address.shown) from None

    def wait(self, timeout: float) -> bool:
        """Return whether the workspace's history changed within ``timeout`` seconds.

        Raises:
            StoreError: the connection was lost.
        """
        import psycopg

        deadline = time.monotonic() + timeout
        heard = False
        try:
            while not heard and (left := deadline - time.monotonic()) > 0:
                for note in self._conn.notifies(timeout=left, stop_after=1):
                    heard = heard or self._names_mine(note.payload)
        except psycopg.Error as e:
            raise reworded(e, self._address.shown) from None
        return heard

    def _names_mine(self, payload: str) -> bool:
        try:
            doc = json.loads(payload)
        except ValueError:
            return False
        return isinstance(doc, dict) and doc.get("key") == self._key

    def close(self) -> None:
        """Close the connection (never raises)."""
        try:
            self._conn.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
