"""Model layer: a restore plan, one line per path that will change."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ._tree import DIR, Entry

#: What a restore does to a path: ``M`` restored in place, ``A`` (added later) removed,
#: ``D`` (deleted later) made again.
PlanAction = Literal["M", "A", "D"]

#: What will happen to a path, in words: the letter says what changed since the target
#: (``M`` changed, ``A`` created since, ``D`` deleted since), the effect what the restore
#: does about it. Plans show their paths grouped under these (``would recreate:``).
PlanEffect = Literal["restore", "remove", "recreate"]

#: Each letter's effect: one word for one idea, the same on the command line and the page.
EFFECTS: dict[PlanAction, PlanEffect] = {"M": "restore", "A": "remove", "D": "recreate"}


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One path of a plan: ``M`` restored in place, ``A`` will be removed, ``D`` recreated."""

    action: PlanAction
    path: str
    current: Entry | None
    target: Entry | None

    @property
    def effect(self) -> PlanEffect:
        """What will happen to the path: ``restore``, ``remove`` or ``recreate``."""
        return EFFECTS[self.action]

    def shown(self) -> str:
        """The path as plans show it: a folder's ends in ``/``."""
        e = self.target if self.target is not None else self.current
        return self.path + ("/" if e is not None and e.kind == DIR else "")

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form: ``action``, ``path`` and ``effect``.

        A folder's path ends in ``/``; ``effect`` is what the restore does: ``restore``,
        ``remove`` or ``recreate``.
        """
        return {"action": self.action, "path": self.shown(), "effect": self.effect}


@dataclass(frozen=True, slots=True)
class Plan:
    """What a rewind will do, computed before anything is written."""

    target: str
    items: tuple[PlanItem, ...]
    #: paths the target needs but never kept (over the size limit, or unreadable then)
    not_restorable: tuple[str, ...] = field(default=())
    #: paths left as they are, and why: what no snapshot keeps (a file over the size
    #: limit, an ignored file in the way), what the target's rules left out
    left: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Return how many paths each action touches."""
        out = {"M": 0, "A": 0, "D": 0}
        for item in self.items:
            out[item.action] += 1
        return out
