"""Ops layer: a plan's token, which carries what a plan was made from to the write.

A person decides from a plan (a dry run, the page's dialog); the operation confirmed from
it must do that plan or nothing. The token names the plan by what it depends on: the
history it was decided from (the store's sequence number of its last change: a turn
begun or ended, a take-back recorded) and, for every path it names, the state found there
and the state it would write, with what it would leave and why. The operation confirmed
with a token plans again under the store's exclusive lock, from the snapshot it takes
before writing, and writes only when that plan has the same token: the same files
written, removed and left, from the same history. Otherwise it refuses
(:class:`~takeback.errors.StalePlanError`, exit 3) before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from ..errors import StalePlanError
from ..model import Entry, entry_state
from ._engine import Checked

#: what tokens of this format start with (another format never matches)
_FORMAT = "p1"


def _state(e: Entry | None) -> list[object] | None:
    s = entry_state(e)
    return None if s is None else [*s, e.size if e is not None else 0]


def plan_token(
    *,
    kind: str,
    session: str | None,
    history: int,
    subject: Iterable[object],
    checked: Checked,
) -> str:
    """Return the token of a plan.

    Args:
        kind: the operation (``undo``, ``rewind``, ...).
        session: the session it acts on.
        history: the history's sequence number the plan was decided from (0: a plan that
            depends on no history, a rewind to a snapshot).
        subject: what else names the operation (its turns, its target, its paths).
        checked: the engine's check: what will be written, conflicts, what is left.
    """
    body = {
        "kind": kind,
        "session": session,
        "subject": list(subject),
        "todo": sorted([m.path, _state(m.now), _state(m.write)] for m in checked.todo),
        "conflicts": sorted(checked.conflicts),
        "left": sorted(checked.left.items()),
        "not_restored": sorted(checked.not_restored),
    }
    digest = hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    return f"{_FORMAT}.{history}.{digest[:40]}"


def check_plan(expected: str, token: str, *, kind: str) -> None:
    """Refuse an operation whose plan now is not the one confirmed.

    Args:
        expected: the token of the plan the caller confirmed.
        token: the token of the plan the operation made now, under the lock.
        kind: the operation, for the message.

    Raises:
        StalePlanError: the tokens differ; nothing was written.
    """
    if expected == token:
        return
    was = expected.split(".")
    now = token.split(".")
    history = len(was) != 3 or was[:2] != now[:2]
    what = (
        "the history changed (a turn or a take-back since)"
        if history
        else "the workspace changed (a file it names is not as it was)"
    )
    raise StalePlanError(
        f"the {kind} planned is out of date: {what} since the plan was made; "
        "nothing was written (plan again)",
        planned=expected,
        now=token,
        reason="history" if history else "workspace",
    )
