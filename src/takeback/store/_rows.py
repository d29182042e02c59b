"""Store layer: the rows the seam hands out, typed (both stores give the same ones).

``ops`` and the API read the history through these (``takeback.store`` exports them):
turns, touches, change lists, ops, every object's index entry and the store-wide
sequence numbers. They are the seam's, not any one store's.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..model import ChangeStatus, TurnState


class Seqs(NamedTuple):
    """The store-wide sequence numbers of the history's rows.

    Attributes:
        snapshots: snapshot id -> its number.
        turns: (session, n) -> (the number it began at, the one it ended at or None).
        ops: op id -> its number.
    """

    snapshots: dict[str, int]
    turns: dict[tuple[str, int], tuple[int, int | None]]
    ops: dict[int, int]


class TurnRow(NamedTuple):
    """One turn as stored (its change list is read apart, with ``Meta.changes``).

    Attributes:
        n: the turn's number in its session.
        label: what the turn was begun with (may be empty).
        before: the snapshot taken when it began, if one was.
        after: the snapshot taken when it ended, if one was.
        state: ``open``, ``done``, ``undone`` or ``reverted``.
    """

    n: int
    label: str
    before: str | None
    after: str | None
    state: TurnState


class TouchRow(NamedTuple):
    """What a turn kept of one path before its first write.

    Attributes:
        state: the path's state before the turn, encoded (None: there was nothing).
        tool_call_id: the one tool call that changed it (None: unknown, or several).
        unconfirmed: a command step whose end was never seen changed it (a denied or
            failed call): what it holds may be anyone's.
    """

    state: str | None
    tool_call_id: str | None
    unconfirmed: bool = False


class ChangeRow(NamedTuple):
    """One row of a turn's change list, as stored.

    Attributes:
        path: the path, relative to the root.
        status: ``created``, ``modified`` or ``deleted``.
        added: lines added.
        removed: lines removed.
        before: the state before the turn, encoded (None: nothing was there).
        after: the state the turn left, encoded (None: it deleted the path).
        sha256: the content the turn left (None for a deletion or a folder).
        undoable: false when the state before was never kept (over the size limit).
        approximate: the line counts are an upper bound, not git's.
        unconfirmed: a step whose end was never seen changed it (see ``TouchRow``).
    """

    path: str
    status: ChangeStatus
    added: int
    removed: int
    before: str | None
    after: str | None
    sha256: str | None
    undoable: bool
    approximate: bool = False
    unconfirmed: bool = False


class OpRow(NamedTuple):
    """One recorded undo, redo, revert, unrevert or one-file undo.

    Attributes:
        id: its number (a later op has a larger one).
        kind: ``undo``, ``undo-file``, ``redo``, ``revert``, ``revert-move`` or
            ``unrevert``.
        turns: the turns it concerns.
        pre: the snapshot taken before it wrote anything.
        data: what it keeps beside (the paths it wrote and the states it wrote there).
        state: ``active``, ``redone``, ``unreverted`` or ``final``.
    """

    id: int
    kind: str
    turns: list[int]
    pre: str | None
    data: dict[str, Any]
    state: str


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
