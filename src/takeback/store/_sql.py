"""Store layer: the SQL stores' common words: a dialect, and their rows typed.

A query of :class:`~._sql_meta.SqlMeta` is written as a template, in SQLite's words, with
named parameters (``:name``) and these words in braces, which a :class:`Dialect` fills in
(once per template):

- a table, ``{snapshots}``: its name (PostgreSQL's are in the ``takeback`` schema);
- the workspace's scope: ``{ws}`` opens a ``WHERE`` (``ws=:ws AND `` where several
  workspaces share the tables, else nothing), ``{where_ws}`` is a whole ``WHERE`` that
  asks for nothing else, ``{ws_t}`` and ``{ws_ut}`` scope the one join (tables ``t``, ``u``);
- ``{next_seq}``: the store-wide sequence's next number (SQLite binds the number
  ``next_seq()`` handed out as ``:seq``; PostgreSQL's sequence gives it in place);
- ``{distinct}``: ``IS NOT`` or ``IS DISTINCT FROM`` (NULL compares as a value);
- ``{written}``: the column that orders a table's rows as they were written.

Inserts are made by :meth:`Dialect.insert` (the workspace's column first where it has one;
insert-or-ignore in each store's words).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ..model import Change, SnapshotInfo, StepInfo, change_kind
from ._rows import ChangeRow, OpRow

#: the largest integer both stores keep; a step or turn number beyond it names no row
MAX_INT = 2**63 - 1

#: the history's tables, by their name in a template
TABLES = ("meta", "snapshots", "sessions", "steps", "turns", "touches", "changes", "ops")

#: a named parameter of a template (not a ``::`` cast)
_PARAM = re.compile(r"(?<![:\w]):(\w+)")


class Dialect:
    """What differs between two stores' SQL, and the templates filled in for one of them.

    Args:
        schema: put before each table's name (``"takeback."``; ``""``: none).
        scoped: every row names its workspace (column ``ws``), and every query asks
            for this one's.
        pyformat: parameters are written ``%(name)s`` (the PostgreSQL driver's way),
            not ``:name`` (SQLite's).
        ignore: an insert that leaves a row whose key is there: the words before the
            table and those after the values.
        distinct: the comparison for which NULL is a value like any other.
        next_seq: SQL for the next number of the store-wide sequence (None: a number
            bound as ``:seq``).
        written: the column that orders a table's rows as they were written.
    """

    def __init__(
        self,
        *,
        schema: str,
        scoped: bool,
        pyformat: bool,
        ignore: tuple[str, str],
        distinct: str,
        next_seq: str | None,
        written: str,
    ) -> None:
        self.scoped = scoped
        self.binds_seq = next_seq is None
        self._pyformat = pyformat
        self._ignore = ignore
        self.words = {t: schema + t for t in TABLES} | {
            "ws": "ws=:ws AND " if scoped else "",
            "where_ws": " WHERE ws=:ws" if scoped else "",
            "ws_t": "t.ws=:ws AND " if scoped else "",
            "ws_ut": "u.ws=t.ws AND " if scoped else "",
            "next_seq": next_seq or ":seq",
            "distinct": distinct,
            "written": written,
        }
        self._done: dict[Any, str] = {}

    def sql(self, template: str) -> str:
        """Return a template in this dialect's words (made once, then remembered)."""
        got = self._done.get(template)
        if got is None:
            got = template.format_map(self.words)
            if self._pyformat:
                got = _PARAM.sub(r"%(\1)s", got)
            self._done[template] = got
        return got

    def insert(
        self,
        table: str,
        cols: Sequence[str],
        *,
        ignore: bool = False,
        seq: str | None = None,
        returning: str | None = None,
    ) -> str:
        """Return an insert of one row, each column's value the parameter of its name.

        Args:
            table: the table.
            cols: its columns (the workspace's is added where there is one).
            ignore: a row whose key is there already is left as it is.
            seq: a column that takes the store-wide sequence's next number.
            returning: a column the insert returns.
        """
        key = (table, tuple(cols), ignore, seq, returning)
        got = self._done.get(key)
        if got is None:
            names = (["ws"] if self.scoped else []) + list(cols)
            values = [f":{c}" for c in names]
            if seq is not None:
                names.append(seq)
                values.append("{next_seq}")
            before, after = self._ignore if ignore else ("INSERT INTO", "")
            template = (
                f"{before} {{{table}}}({', '.join(names)}) VALUES ({','.join(values)}){after}"
                + (f" RETURNING {returning}" if returning else "")
            )
            got = self._done[key] = self.sql(template)
        return got


# -- the two stores' dialects, side by side --------------------------------------------

#: SQLite's words for the shared queries (one workspace per file: no scope)
SQLITE = Dialect(
    schema="",
    scoped=False,
    pyformat=False,
    ignore=("INSERT OR IGNORE INTO", ""),
    distinct="IS NOT",
    next_seq=None,
    written="rowid",
)

#: The store-wide sequence: the snapshots' own, from which turns and ops take their
#: numbers too (one order for all three, whatever the clock says).
NEXT_SEQ = "nextval(pg_get_serial_sequence('takeback.snapshots', 'seq'))"

#: PostgreSQL's words for the shared queries: the ``takeback`` schema, each workspace's
#: rows apart (``ws``), the driver's parameters
POSTGRES = Dialect(
    schema="takeback.",
    scoped=True,
    pyformat=True,
    ignore=("INSERT INTO", " ON CONFLICT DO NOTHING"),
    distinct="IS DISTINCT FROM",
    next_seq=NEXT_SEQ,
    written="seq",
)


def storable(n: int) -> bool:
    """Whether both stores can keep ``n`` (a larger step or turn number names no row)."""
    return -MAX_INT - 1 <= n <= MAX_INT


def stored_path(value: object) -> str:
    """A path as stored: its bytes (a name need not be UTF-8; SQL text must be)."""
    return os.fsdecode(bytes(value)) if isinstance(value, bytes | memoryview) else str(value)


def step_of(r: Sequence[Any]) -> StepInfo:
    """Type a ``steps`` row (``STEP_COLS``)."""
    return StepInfo(r[0], r[1], r[2], r[3], r[4], r[5], r[6], command=bool(r[7]))


def snapshot_of(row: Sequence[Any]) -> SnapshotInfo:
    """Type a ``snapshots`` row (``SNAP_COLS``)."""
    return SnapshotInfo(
        id=row[0],
        tree=row[1],
        created_at=row[2],
        kind=row[3],
        session=row[4],
        turn=row[5],
        step=row[6],
        message=row[7],
        files=row[8],
        skipped=tuple(json.loads(row[9])),
        skipped_count=row[10],
        duration_ms=row[11],
        unreadable=tuple((str(p), str(r)) for p, r in json.loads(row[12])),
        unreadable_count=row[13],
    )


def op_of(r: Sequence[Any]) -> OpRow:
    """Type an ``ops`` row (its first columns, ``id, kind, turns, pre, data, state``)."""
    return OpRow(int(r[0]), r[1], json.loads(r[2]), r[3], json.loads(r[4]), r[5])


def change_row(r: Sequence[Any]) -> ChangeRow:
    """Type a ``changes`` row as both stores select it.

    Its columns: path, status, added, removed, before, after, sha256, undoable,
    approximate, unconfirmed.
    """
    return ChangeRow(
        stored_path(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]), bool(r[8]), bool(r[9])
    )


def changes_of(rows: Iterable[ChangeRow]) -> list[Change]:
    """A turn's change list from its rows."""
    return [
        Change(
            path=r.path,
            status=r.status,
            added=r.added,
            removed=r.removed,
            sha256=r.sha256,
            undoable=r.undoable,
            kind=change_kind(r.status, r.before, r.after),
            approximate=r.approximate,
            unconfirmed=r.unconfirmed,
        )
        for r in rows
    ]


class SqlBase:
    """How a SQL store's queries are sent: a template, filled in by the store's dialect.

    A subclass gives :attr:`dialect`, :meth:`_run` and :meth:`_many` (sending one
    statement, with the workspace's id where its rows name one), and the parts that
    differ: :meth:`tx`, :meth:`next_seq`, :meth:`history_seq`, :meth:`set_meta`,
    :meth:`snapshot_ids_with_prefix`, the scan's cache, :meth:`drop_history_tx`,
    :meth:`_one_write` and :meth:`_copy_order`.
    """

    dialect: Dialect

    # -- what each store gives -------------------------------------------------------

    def _run(self, sql: str, params: dict[str, Any]) -> Any:
        """Send one statement; return its cursor (rows, ``fetchone``, ``rowcount``)."""
        raise NotImplementedError

    def _many(self, sql: str, rows: list[dict[str, Any]]) -> None:
        """Send one statement for each row of parameters."""
        raise NotImplementedError

    def tx(self) -> AbstractContextManager[Any]:
        """Return a write transaction (re-entrant: an inner block joins the outer one)."""
        raise NotImplementedError

    def _one_write(self) -> AbstractContextManager[Any]:
        """Return what one conditional write runs in (see :meth:`swap_meta`)."""
        raise NotImplementedError

    def next_seq(self) -> int:
        """Hand out the next number of the store-wide sequence (snapshots, turns, ops)."""
        raise NotImplementedError

    def set_meta(self, key: str, value: str) -> None:
        """Set a store-level setting."""
        raise NotImplementedError

    def drop_scan_cache(self) -> None:
        """Forget the scan cache (the caller's transaction): the next scan reads every file."""
        raise NotImplementedError

    def _copy_order(self, table: str) -> str:
        """Return what orders a table's rows as they were written, for a copy."""
        raise NotImplementedError

    # -- sending ---------------------------------------------------------------------

    def _q(self, template: str, /, **params: Any) -> Any:
        """Send a template's statement with these parameters; return its cursor."""
        return self._run(self.dialect.sql(template), params)

    def _one(self, template: str, /, **params: Any) -> Any:
        """Return the first row of a template's query, or None."""
        return self._q(template, **params).fetchone()

    def _rows(self, template: str, /, **params: Any) -> Iterator[Any]:
        """Return the rows of a template's query."""
        return iter(self._q(template, **params))

    def _seq(self, params: dict[str, Any]) -> dict[str, Any]:
        """Add the store-wide sequence's next number to ``params``, where it is bound."""
        if self.dialect.binds_seq:
            params["seq"] = self.next_seq()
        return params
