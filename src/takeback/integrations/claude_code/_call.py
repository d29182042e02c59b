"""Integrations layer: what one ``takeback hook`` process was given.

The lowest module of the package: the hook's every other part (its bound, its log, its
payload, its first snapshot) names the call, and this names nothing of theirs.
"""

from __future__ import annotations

#: the agent whose words the hook payloads are read into
AGENT = "claude-code"


class HookCall:
    """What one ``takeback hook`` process was given (``problems``: what could not be read)."""

    def __init__(
        self,
        *,
        agent: str = AGENT,
        root: str | None = None,
        store: str | None = None,
        session: str | None = None,
        max_file_bytes: int | None = None,
        event: str | None = None,
    ) -> None:
        self.agent = agent
        self.event = event  # for an agent whose payloads do not name their event
        self.root = root
        self.store = store
        self.session = session
        self.max_file_bytes = max_file_bytes
        self.problems: list[str] = []
