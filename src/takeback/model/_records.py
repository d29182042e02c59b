"""Model layer: the records of the history (snapshots, sessions, turns, steps, changes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: What happened to a path (the API, events, ``--json`` and the docs use these words).
ChangeStatus = Literal["created", "modified", "deleted"]
#: What a path is, in a change list.
ChangeKind = Literal["file", "symlink", "folder"]
#: Where a turn stands.
TurnState = Literal["open", "done", "undone", "reverted"]


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """One snapshot as listed by ``log``."""

    id: str
    tree: str
    created_at: float
    kind: str
    session: str | None
    turn: int | None
    step: int | None
    message: str
    files: int
    skipped: tuple[str, ...]
    skipped_count: int
    duration_ms: int
    #: paths the scan could not read, with why (``permission denied``, ``path too long``)
    unreadable: tuple[tuple[str, str], ...] = ()
    unreadable_count: int = 0
    #: how the scan behind it was taken: "service" or "full" ("" when not known: the
    #: snapshot was read back from the store, which does not keep it)
    scan_mode: str = ""
    #: why a full scan was taken, or how many folders the service named
    scan_reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``--json``).

        ``scan`` (``mode``, ``reason``) is there for a snapshot just taken.
        """
        out = self._json()
        if self.scan_mode:
            out["scan"] = {"mode": self.scan_mode, "reason": self.scan_reason}
        return out

    def _json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "kind": self.kind,
            "session": self.session,
            "turn": self.turn,
            "step": self.step,
            "message": self.message,
            "files": self.files,
            "skipped": list(self.skipped),
            "skipped_count": self.skipped_count,
            "unreadable": unreadable_json(self.unreadable),
            "unreadable_count": self.unreadable_count,
            "duration_ms": self.duration_ms,
        }


def unreadable_json(paths: tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
    """Return the ``unreadable`` list of ``--json``: ``{"path": ..., "reason": ...}`` each."""
    return [{"path": p, "reason": r} for p, r in paths]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session: its name and the baseline snapshot taken when it started."""

    name: str
    baseline: str
    created_at: float


@dataclass(frozen=True, slots=True)
class StepInfo:
    """A step: the snapshot before it, and after it where one was taken."""

    session: str
    n: int
    turn: int | None
    before: str | None
    after: str | None
    label: str
    exit_code: int | None
    #: a command's step (snapshots before and after), not a batch of file-tool calls
    command: bool = False


@dataclass(frozen=True, slots=True)
class Change:
    """One path a turn changed: a file, a symlink, or a folder it made or removed.

    ``sha256`` is what the turn left (None when it deleted the file, and for a folder);
    ``undoable`` is false when the state before the turn was never kept (a file over the
    size limit); ``kind`` is ``file``, ``symlink`` or ``folder``: what the turn left there,
    or for a deletion, what it deleted. ``approximate`` is true when the line counts are an
    upper bound rather than git's (the shortest edit was too costly to find).
    ``unconfirmed`` is true when a command step whose end was never seen (a denied or
    failed call) changed it: what it holds may be a person's edit, so a take-back treats
    it as a conflict unless forced.
    """

    path: str
    status: ChangeStatus
    added: int
    removed: int
    sha256: str | None
    undoable: bool
    kind: ChangeKind = "file"
    approximate: bool = False
    unconfirmed: bool = False

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``--json``)."""
        return {
            "path": self.path,
            "status": self.status,
            "added": self.added,
            "removed": self.removed,
            "sha256": self.sha256,
            "undoable": self.undoable,
            "kind": self.kind,
            "approximate": self.approximate,
            "unconfirmed": self.unconfirmed,
        }


def change_kind(status: str, before: str | None, after: str | None) -> ChangeKind:
    """What a change is of, from its states as stored (``d …`` a folder, ``l …`` a link)."""
    state = before if status == "deleted" else after
    kind = (state or "f").split(" ", 1)[0]
    return "folder" if kind == "d" else "symlink" if kind == "l" else "file"


@dataclass(frozen=True, slots=True)
class TurnInfo:
    """A turn: its number, label, the snapshot before it and its change list once ended."""

    session: str
    n: int
    label: str
    before: str | None
    state: TurnState
    changes: tuple[Change, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``changes --json``, MCP ``changes``)."""
        return {
            "session": self.session,
            "turn": self.n,
            "label": self.label,
            "state": self.state,
            "before": self.before,
            "files": len(self.changes),
            "added": sum(c.added for c in self.changes),
            "removed": sum(c.removed for c in self.changes),
            "changes": [c.to_json() for c in self.changes],
        }
