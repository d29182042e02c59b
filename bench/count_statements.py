"""Count the SQL statements one ``takeback`` command runs, store opening included.

Every SQLite connection the store opens is given a trace callback (``set_trace_callback``)
by wrapping ``sqlite3.connect`` in this process only; the command then runs in-process
through ``takeback.cli.main``. Nothing in the library is changed to allow it.

Run it with the project's virtualenv, after making a store to count against::

    .venv/bin/takeback --root WS --store ST turn begin
    .venv/bin/python bench/count_statements.py --root WS --store ST touch a.txt
    .venv/bin/python bench/count_statements.py --verbose --root WS --store ST touch a.txt

It prints the count (and, with ``--verbose``, each statement with its database file) on
stderr, and exits with the command's exit code.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from typing import Any

from takeback.cli import main


def _count(argv: list[str], *, verbose: bool) -> int:
    seen: list[tuple[str, str]] = []
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        name = os.path.basename(str(args[0] if args else kwargs["database"]).split("?")[0])
        conn.set_trace_callback(lambda sql: seen.append((name, sql)))
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        code = main(argv)
    finally:
        sqlite3.connect = real
    if verbose:
        for name, sql in seen:
            print(f"{name}: {' '.join(sql.split())[:120]}", file=sys.stderr)
    print(f"statements: {len(seen)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    args = sys.argv[1:]
    verbose = "--verbose" in args
    sys.exit(_count([a for a in args if a != "--verbose"], verbose=verbose))
