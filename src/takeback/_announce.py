"""API layer: the one announcer of ``file.changed`` events, with the one word table.

A turn's end (its change list), a command run outside any turn (what its snapshots saw)
and a take-back (what it wrote) each tell the listeners which files changed. They say it
the same way: one ``file.changed`` per file, ``change`` in one word (a file that was not
there and is now was ``created``, one that was and is not ``deleted``, else ``updated``),
at most ``MAX_FILE_EVENTS`` of them, the rest counted in one ``file.changed.more``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

#: What a ``file.changed`` event says happened to a file.
FileWord = Literal["created", "updated", "deleted"]

#: At most this many ``file.changed`` events for one step, turn or take-back; the rest are
#: counted in one ``file.changed.more`` event (``more``: how many).
MAX_FILE_EVENTS = 100

#: The word table: (the file was there before, it is there now) -> the event's word.
_WORDS: dict[tuple[bool, bool], FileWord] = {
    (False, True): "created",
    (True, False): "deleted",
    (True, True): "updated",
}


def file_word(was: bool, is_now: bool) -> FileWord:
    """The event's word for a file that was (or was not) there and is (or is not) now."""
    return _WORDS.get((was, is_now), "updated")


def announce_files(
    emit: Callable[[dict[str, Any]], None],
    files: Sequence[tuple[str, FileWord, str | None]],
    *,
    limit: int = MAX_FILE_EVENTS,
    **where: Any,
) -> None:
    """Send ``file.changed`` for each file (at most ``limit``), then the rest's count.

    Args:
        emit: where events go (``Workspace._emit``: the log and the listeners).
        files: (path, word, tool call id) per file, in the order to announce.
        limit: at most this many ``file.changed`` events.
        where: what the change belongs to, put in every event (``session`` and
            ``turn``, ``step`` or ``op``).
    """
    for path, word, call in files[:limit]:
        emit(
            {
                "event": "file.changed",
                "path": path,
                "change": word,
                "tool_call_id": call,
                **where,
            }
        )
    if len(files) > limit:
        emit({"event": "file.changed.more", "more": len(files) - limit, **where})
