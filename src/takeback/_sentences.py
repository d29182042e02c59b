"""API layer: what a result says in a sentence for people, for every face that shows one.

The result types (``model/``) are data: their machine form is ``to_json()``, and what they
mean in words is here, once, for the command line, the MCP server and the page alike
(``takeback.summary``). It lives at the API layer, not in ``cli/``, because the
integrations need the same sentence and may not import the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import TurnOpResult

#: What a take-back did, as the sentence's verb (a dry run's is ``Would <kind>``).
_DONE = {
    "undo": "Undid",
    "undo-hunks": "Took back hunks of",
    "redo": "Redid",
    "revert": "Reverted",
    "unrevert": "Unreverted",
}


def summary(result: TurnOpResult) -> str:
    """One line for people: what a take-back did, naming its session and turns.

    ``Undid turn 3 of session 'agent'. Files restored: 3.``, or ``Nothing to undo.``
    (with its reason, when there is one: ``Nothing to undo: turn 4's changes …``).

    Args:
        result: what an undo, redo, revert, unrevert, one-file undo or a take-back of
            hunks did (or, in a dry run, would do).
    """
    if result.nothing:
        why = f": {result.reason}" if result.reason else ""
        return f"Nothing to {result.kind}{why}."
    # Folders (``name/``) are counted apart: "files" means files (and links).
    folders = sum(1 for p in result.restored if p.endswith("/"))
    files = len(result.restored) - folders
    count = f"Files it would restore: {files}." if result.dry_run else f"Files restored: {files}."
    if folders:
        count += f" Folders: {folders}."
    if result.dry_run and result.conflicts:
        count += f" Conflicts: {len(result.conflicts)}."
    if result.merged:
        count += f" Merged: {len(result.merged)}."
    if result.markers:
        count += f" With conflict markers: {len(result.markers)}."
    named = result.session is not None
    of = f" of session {result.session!r}" if named else ""
    in_ = f" in session {result.session!r}" if named else ""
    if result.kind == "undo-file":
        would = "Would put" if result.dry_run else "Put"
        return f"{would} back as before {result.ref}{in_}. {count}"
    done = _DONE.get(result.kind, result.kind.capitalize())
    if result.dry_run:
        done = "Would take back hunks of" if result.kind == "undo-hunks" else f"Would {result.kind}"
    if not result.turns:
        return f"{done}{in_}. {count}"
    word = "turn" if len(result.turns) == 1 else "turns"
    return f"{done} {word} {', '.join(map(str, result.turns))}{of}. {count}"
