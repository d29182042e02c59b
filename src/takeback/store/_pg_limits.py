"""Store layer: the PostgreSQL store's bounds on waiting, and its errors in its own words.

Every statement runs under the server's ``statement_timeout`` (set when connecting, see
``_pg_address``), so a database that stops answering ends a command with one line instead
of a hang. A wait for one of the workspace's advisory locks is the one wait that may be
long on purpose (another server's restore holds the lock), so it is made without that
bound: first tried at once, and only when the lock is held, waited for with the timeout
lifted for that one statement.

A driver's error is reworded here: its first line, after the database's address without
its password; a timeout says which server did not answer, and after how long.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import StoreError


def did_not_answer(where: str, seconds: float) -> str:
    """Return the one line a command prints when the database is silent."""
    return f"the database at {where} did not answer in {seconds:g} s"


def is_timeout(e: BaseException) -> bool:
    """Whether a driver error is a connect timeout or a statement cancelled by its timeout."""
    text = str(e)
    return "timeout expired" in text or "statement timeout" in text


def reworded(e: BaseException, shown: str, slow: str | None = None) -> StoreError:
    """Return the store's error for a driver's (never quoting the address it was given).

    Args:
        e: the driver's error.
        shown: the database's address without its password.
        slow: the line for a timeout (None: the driver's own words).
    """
    if slow is not None and is_timeout(e):
        return StoreError(slow, path=shown)
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return StoreError(f"the store {shown} failed: {first}", path=shown)


def wait_for_lock(
    run: Callable[[str, Sequence[Any]], Any], fn: str, args: Sequence[Any], *, local: bool
) -> None:
    """Take an advisory lock, waiting as long as its holder keeps it.

    Args:
        run: sends one statement and returns its cursor.
        fn: the lock function (``pg_advisory_lock``, ``..._shared``, ``..._xact_lock``).
        args: its two keys.
        local: inside a transaction (the timeout is lifted with ``SET LOCAL``).
    """
    try_fn = fn.replace("pg_advisory_", "pg_try_advisory_", 1)
    got = run(f"SELECT {try_fn}(%s, %s)", args).fetchone()
    if got and got[0]:
        return
    scope = "LOCAL " if local else ""
    run(f"SET {scope}statement_timeout = 0", ())
    try:
        run(f"SELECT {fn}(%s, %s)", args)
    finally:
        run(f"SET {scope}statement_timeout TO DEFAULT", ())
