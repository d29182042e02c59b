"""Ops layer: gc's retention policy, as the store keeps it, and when gc runs by itself.

The policy (:class:`Policy`) keeps, per session, the newest ``keep_turns`` turns and
everything from the last ``keep_days`` days, whichever keeps more; what that keeps is
decided in ``_keep``. With ``auto``, gc runs by itself once a day. A hook call asks
whether it is due (:func:`claim_auto_gc`): it loads this module alone, none of gc.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..store import Meta, Store

DEFAULT_KEEP_TURNS = 50
DEFAULT_KEEP_DAYS = 30.0
#: gc runs by itself at most this often (seconds)
AUTO_INTERVAL = 86400.0

_KEYS = {"keep_turns": "gc.keep_turns", "keep_days": "gc.keep_days", "auto": "gc.auto"}
LAST_GC = "gc.last"


@dataclass(frozen=True, slots=True)
class Policy:
    """What gc keeps.

    The newest ``keep_turns`` turns of each session and everything from the last
    ``keep_days`` days, whichever keeps more; ``auto``: gc runs by itself once a day.
    """

    keep_turns: int = DEFAULT_KEEP_TURNS
    keep_days: float = DEFAULT_KEEP_DAYS
    auto: bool = True

    def to_json(self) -> dict[str, Any]:
        """Return the stable machine form (``config --json``)."""
        return {"keep_turns": self.keep_turns, "keep_days": self.keep_days, "auto": self.auto}


def check_policy(keep_turns: int | None, keep_days: float | None) -> None:
    """Refuse a policy that cannot be kept.

    Raises:
        UsageError: ``keep_turns`` below 1 (the newest turn is always kept) or
            ``keep_days`` below 0.
    """
    if keep_turns is not None and keep_turns < 1:
        raise UsageError(f"--keep-turns must be at least 1 (the newest turn is kept): {keep_turns}")
    if keep_days is not None and not keep_days >= 0:
        raise UsageError(f"--keep-days must be 0 or more: {keep_days}")


def read_policy(meta: Meta) -> Policy:
    """Return the store's policy (the defaults where it sets none)."""
    d = Policy()
    turns = meta.get_meta(_KEYS["keep_turns"])
    days = meta.get_meta(_KEYS["keep_days"])
    auto = meta.get_meta(_KEYS["auto"])
    try:
        return Policy(
            int(turns) if turns is not None else d.keep_turns,
            float(days) if days is not None else d.keep_days,
            auto != "off" if auto is not None else d.auto,
        )
    except ValueError:
        return d


def write_policy(
    store: Store,
    *,
    keep_turns: int | None = None,
    keep_days: float | None = None,
    auto: bool | None = None,
) -> Policy:
    """Set parts of the store's policy (the rest stays); return the whole policy.

    Raises:
        UsageError: a value :func:`check_policy` refuses.
    """
    check_policy(keep_turns, keep_days)
    meta = store.meta
    with meta.tx():
        if keep_turns is not None:
            meta.set_meta(_KEYS["keep_turns"], str(keep_turns))
        if keep_days is not None:
            meta.set_meta(_KEYS["keep_days"], repr(float(keep_days)))
        if auto is not None:
            meta.set_meta(_KEYS["auto"], "on" if auto else "off")
    return read_policy(meta)


def last_gc(store: Store) -> float:
    """When gc last ran (or was started by itself); the store's creation when never."""
    raw = store.meta.get_meta(LAST_GC)
    try:
        return float(raw) if raw is not None else store.created_at
    except ValueError:
        return 0.0


def claim_auto_gc(store: Store, *, now: float | None = None) -> bool:
    """Whether gc is due by itself, and if so, claim the run (one process wins).

    Due when the policy allows it and the last run is over a day old. The claim is one
    conditional write, so of several hooks that find it due at once, one starts it.
    """
    meta = store.meta
    when = time.time() if now is None else now
    if store.readonly:
        return False
    raw = meta.get_meta(LAST_GC)
    if raw is None and not store.created_at:
        # A store that says neither when it was made nor when gc last ran: the clock
        # starts now (once), rather than gc at the first command.
        with meta.tx():
            meta.set_meta(LAST_GC, repr(when))
        return False
    # The policy is read only when gc is due: every hook call asks, once a day it is.
    if when - last_gc(store) < AUTO_INTERVAL or not read_policy(meta).auto:
        return False
    return meta.swap_meta(LAST_GC, raw, repr(when))
