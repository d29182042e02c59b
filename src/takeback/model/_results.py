"""Model layer: what a rewind returns: its plan and, unless it was a dry run, what it did.

One type from the use case (``ops.rewind``) to the API (``Workspace.rewind``) and each
face (``rewind --json``, MCP ``rewind``, the page): each renders from ``to_json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._plan import Plan
from ._records import SnapshotInfo


@dataclass
class RewindResult:
    """What a rewind planned and, unless it was a dry run, did.

    ``ops.rewind`` makes it; ``Workspace.rewind`` adds the ref's ``note``.
    """

    plan: Plan
    target: SnapshotInfo
    #: what the ref named, when it is not exactly what was asked (``note:`` on the CLI)
    note: str = ""
    dry_run: bool = False
    pre: str | None = None
    restored: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    kept_dirs: list[str] = field(default_factory=list)
    #: paths left as they are, and why (out of scope and in the way, never kept, ...)
    left: dict[str, str] = field(default_factory=dict)
    #: the plan's token: ``rewind(..., plan=token)`` does exactly this plan or refuses
    token: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``rewind --json``, MCP ``rewind``).

        A dry run's ``not_restored`` and ``left`` are what the plan foresees.
        """
        plan = self.plan
        return {
            "target": self.target.id,
            "dry_run": self.dry_run,
            "note": self.note,
            "plan": [i.to_json() for i in plan.items],
            "counts": plan.counts(),
            "pre_rewind": self.pre,
            "restored": self.restored,
            "not_restored": list(plan.not_restorable) if self.dry_run else list(self.not_restored),
            "kept_dirs": self.kept_dirs,
            "left": plan.left if self.dry_run else self.left,
            "token": self.token,
        }
