"""CLI layer: ``takeback log``: sessions, turns, steps and snapshots, newest first."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ._app import number
from ._render import sid, when

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "show the history, newest first"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument("-n", "--limit", type=number, default=None, help="show at most N snapshots")
    p.add_argument("--all", action="store_true", help="every session, not just the current")


def run(ctx: Ctx) -> int:
    """Print the history, a line per step (its snapshots before and after, as one)."""
    ws = ctx.workspace()
    session = None if ctx.args.all else ctx.session
    snaps = ws.log(session, limit=ctx.args.limit)
    if ctx.json:
        # The spec makes this one a bare list of snapshot objects (no schema wrapper).
        print(json.dumps([s.to_json() for s in snaps], indent=2, sort_keys=True))
        return 0
    meta = ws.open_store().meta
    agents = ws.session_agents()
    exits: dict[tuple[str, int], int | None] = {}
    for name in {s.session for s in snaps if s.session}:
        for st in meta.steps(name):
            exits[(name, st.n)] = st.exit_code
    # A step's snapshot before it is shown with its snapshot after (one line a step).
    after = {(s.session, s.step) for s in snaps if s.kind == "step-after"}
    width = _width()
    for s in snaps:
        if s.kind == "step" and (s.session, s.step) in after:
            continue
        what = _what(s.kind, s.turn, s.step, s.message)
        code = exits.get((s.session or "", s.step or 0)) if s.step is not None else None
        failed = f"  exit {code}" if code not in (None, 0) else ""
        who = _short(s.session) if s.session else "-"
        agent = agents.get(s.session) if s.session else None
        if agent:
            who += f" ({agent})"
        label = s.message if s.kind in ("step", "step-after", "manual", "turn") else ""
        line = f"{sid(s.id)}  {when(s.created_at)}  {who:<8}  {what}{failed}"
        if label:
            line += f"  {label}"
        ctx.out(line[:width] if width else line)
    return 0


def _short(session: str) -> str:
    """A session's name as people read it: a UUID shortened to 8 characters, as git's ids."""
    import re

    if re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", session):
        return session[:8]
    return session


def _what(kind: str, turn: int | None, step: int | None, message: str) -> str:
    """Name what a snapshot is: a step, a turn's start, an operation's before-state."""
    where = " ".join(
        part for part in (f"turn {turn}" if turn else "", f"step {step}" if step else "") if part
    )
    if kind in ("step", "step-after"):
        return f"{where or 'step'}" + (
            "  (running, or its end was not seen)" if kind == "step" else ""
        )
    if kind == "baseline":
        return "session start"
    if kind == "turn":
        return "turn begins"
    if kind == "manual":
        return "snapshot"
    if kind.startswith("pre-"):
        op = kind[4:].replace("-", " ")
        turns = message.rpartition("turn(s) ")[2].strip() if "turn(s) " in message else ""
        of = f" of turn {turns}" if turns else ""
        return f"before {op}{of}"
    return f"{kind} {where}".strip()


def _width() -> int:
    """The terminal's width when stdout is one (lines are cut to it); 0 otherwise."""
    import os
    import sys

    if sys.stdout is None or not sys.stdout.isatty():
        return 0
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return 0
