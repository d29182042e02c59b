"""Integrations layer: command steps begun by one hook process and finished by another.

A command's step begins in one process (the call before the command) and ends in another
(the call after it): the step's number is kept between the two in a small file under
``<store>/claude-code/pending/<session>/``, one per tool call, claimed by an atomic rename
so that two processes never finish the same step. Agent-neutral: every agent's hook
keeps its open steps here.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # not typing's: a hook call's start-up (see takeback/__init__.py)
if TYPE_CHECKING:
    from typing import Any

PENDING_DIR = os.path.join("claude-code", "pending")


class Pending:
    """The command steps begun by a ``PreToolUse`` call and not yet finished."""

    def __init__(self, store_path: str, session: str) -> None:
        self.dir = os.path.join(store_path, PENDING_DIR, step_key(session))

    def put(self, tool_use_id: str | None, record: dict[str, Any]) -> None:
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        final = os.path.join(self.dir, step_key(tool_use_id or "-") + ".json")
        tmp = f"{final}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        os.replace(tmp, final)

    def claim(self, tool_use_id: str | None) -> dict[str, Any] | None:
        return self._claim(os.path.join(self.dir, step_key(tool_use_id or "-") + ".json"))

    def claim_all(self, *, but: str | None = None) -> list[dict[str, Any]]:
        """Claim every pending step (but the one of tool call ``but``), oldest first."""
        skip = step_key(but) + ".json" if but is not None else None
        try:
            names = sorted(n for n in os.listdir(self.dir) if n.endswith(".json") and n != skip)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = [self._claim(os.path.join(self.dir, n)) for n in names]
        return sorted((r for r in found if r is not None), key=lambda r: int(r.get("step", 0)))

    @staticmethod
    def _claim(path: str) -> dict[str, Any] | None:
        # The rename is the claim: of two processes finishing one step, one wins.
        mine = f"{path}.{os.getpid()}.claimed"
        try:
            os.rename(path, mine)
        except FileNotFoundError:
            return None
        try:
            with open(mine, encoding="utf-8") as f:
                record = json.load(f)
        finally:
            os.unlink(mine)
        return record if isinstance(record, dict) else None


def step_key(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
