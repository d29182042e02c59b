"""Store layer: opening SQLite files the way the store needs them (WAL, private, patient)."""

from __future__ import annotations

import os
import sqlite3

from ..errors import StoreCorruptError, StoreError


def connect(path: str, *, create: bool) -> sqlite3.Connection:
    """Open (or make) a database file with mode 0600, WAL journaling and a busy timeout.

    Connections run in autocommit mode; writers open their own ``BEGIN IMMEDIATE``.

    Raises:
        StoreCorruptError: the file exists but is not a usable database.
    """
    if create and not os.path.exists(path):
        # SQLite gives its -wal and -shm files the mode of the main file, so making the
        # main file 0600 first keeps every file of the store private.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    try:
        conn = sqlite3.connect(path, timeout=60.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.DatabaseError as e:
        raise StoreCorruptError(f"store database is unreadable: {path}: {e}", path=path) from e
    return conn


def db_path(conn: sqlite3.Connection) -> str:
    """Return the file behind a connection (for error messages)."""
    for _seq, name, path in conn.execute("PRAGMA database_list"):
        if name == "main":
            return str(path)
    return "?"


class Tx:
    """``with Tx(conn):`` runs the block in one write transaction (BEGIN IMMEDIATE).

    A database error (a full disk, a damaged file) rolls the transaction back and is
    raised as a :class:`StoreError`, so callers see one kind of failure with one exit code.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise StoreError(f"cannot write to the store: {e}", path=db_path(self.conn)) from e
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
                return
            except sqlite3.Error as e:
                self._rollback()
                raise StoreError(f"cannot write to the store: {e}",
                                 path=db_path(self.conn)) from e
        self._rollback()
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot write to the store: {exc}",
                             path=db_path(self.conn)) from exc

    def _rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the transaction is already gone (SQLite rolls back on some errors)
