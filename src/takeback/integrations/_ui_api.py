"""Integrations layer: what the page behind ``takeback ui`` asks, answered from the public API.

Each answer is a JSON-ready dict built from the library's own results (their ``to_json``):
the timeline (sessions, turns with their steps, and the take-backs and rewinds between
them), diffs (a turn's own, a step's, or any two points), a file's text at a point, and
the take-backs, each planned first (the library's dry run) and then done. The page adds
no rule: every check is the library's.

Each call opens the workspace afresh and calls are taken one at a time: the server runs
requests in threads, and a store connection belongs to the thread that opened it.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .. import summary
from ..errors import UsageError
from ._per_call import PerCall

if TYPE_CHECKING:
    from .. import (
        DiffResult,
        Session,
        SessionInfo,
        SnapshotInfo,
        StepInfo,
        StoreAddress,
        Workspace,
    )

#: a file's patch longer than this is named, not sent (the page would choke on it)
MAX_FILE_PATCH = 400_000
#: all the patches of one diff together are cut here; the rest are named, not sent
MAX_DIFF_PATCH = 4_000_000
#: a file's text at a point is sent up to this many bytes
MAX_SHOW_BYTES = 2_000_000

#: the operations the page can ask for (``rewind`` plans through its own dry run)
OPS = (
    "undo",
    "undo-turn-file",
    "undo-hunk",
    "undo-file",
    "redo",
    "revert",
    "unrevert",
    "rewind",
)


@dataclass(frozen=True)
class UiConfig:
    """Where the page looks: the workspace, its store, and the session shown first."""

    root: str
    store: str | StoreAddress | None = None
    session: str | None = None
    max_file_bytes: int | None = None


class UiApi:
    """The page's questions and actions, each on a workspace opened for the call."""

    def __init__(self, config: UiConfig) -> None:
        self.config = config
        self._calls = PerCall(config.root, config.store, config.max_file_bytes)

    def workspace(self) -> AbstractContextManager[Workspace]:
        """Open the workspace for one call (one call at a time)."""
        return self._calls.workspace()

    def listener(self) -> Any:
        """A listener for the history's changes (a database store), or None (see files)."""
        from .. import Workspace

        return Workspace(self.config.root, store=self.config.store).listen()

    def store_path(self) -> str:
        """Where the store lives (its event log is what the page follows)."""
        from .. import Workspace

        return Workspace(self.config.root, store=self.config.store).store_path

    def _session(self, ws: Workspace, name: str | None) -> Session:
        return ws.session(name or self.config.session or ws.active_session())

    # -- reading -----------------------------------------------------------------------

    def timeline(self, session: str | None) -> dict[str, Any]:
        """Return the sessions, and one session's turns, steps and take-backs.

        Turns come with their change list (``TurnInfo.to_json``) and their steps; the
        take-backs and rewinds are entries of their own, found by the snapshot each took
        before it wrote. Times are those of the snapshots (a turn's is its ``before``).
        """
        with self.workspace() as ws:
            if not ws.has_store():
                return {"root": ws.root, "store": False, "sessions": [], "session": None}
            s = self._session(ws, session)
            snaps = {i.id: i for i in ws.log(s.name)}
            turns = []
            steps = s.steps()

            def step_doc(st: StepInfo) -> dict[str, Any]:
                return {
                    "n": st.n,
                    "label": st.label,
                    "command": st.command,
                    "before": st.before,
                    "after": st.after,
                    "exit_code": st.exit_code,
                    "created_at": _time(snaps, st.before),
                }

            for t in s.turns():
                doc = t.to_json()
                doc["created_at"] = _time(snaps, t.before)
                doc["steps"] = [step_doc(st) for st in steps if st.turn == t.n]
                turns.append(doc)
            loose = [step_doc(st) for st in steps if st.turn is None]
            recorded = s.operations()
            names = _point_names(s.name, turns, steps, recorded, ws.sessions())
            takebacks = [{**op, "message": _op_message(op)} for op in recorded if op["pre"]] + [
                {
                    "op": "rewind",
                    "pre": i.id,
                    "message": _rewind_message(i.message, names),
                    "created_at": i.created_at,
                    "turns": [],
                    "state": None,
                }
                for i in snaps.values()
                if i.kind == "pre-rewind"
            ]
            points = [
                {"ref": i.id, "kind": i.kind, "created_at": i.created_at, "message": i.message}
                for i in snaps.values()
            ]
            sessions = ws.sessions()
            agents = ws.session_agents()
            baseline = next((i.baseline for i in sessions if i.name == s.name), None)
            return {
                "root": ws.root,
                "store": True,
                "session": s.name,
                "active": ws.active_session(),
                "baseline": baseline,
                "sessions": [
                    {
                        "name": i.name,
                        "label": _session_label(i.name, agents.get(i.name)),
                        "baseline": i.baseline,
                        "created_at": i.created_at,
                        "agent": agents.get(i.name),
                    }
                    for i in sessions
                ],
                # What the bar's Redo and Unrevert would act on, in this session: the
                # same rule as ops.redo and ops.unrevert (an undo, or a revert, that is
                # still active).
                "can_redo": any(
                    o["op"] in ("undo", "undo-file") and o["state"] == "active" for o in recorded
                ),
                "can_unrevert": any(
                    o["op"] == "revert" and o["state"] == "active" for o in recorded
                ),
                "turns": turns,
                "loose_steps": loose,
                "takebacks": sorted(takebacks, key=lambda x: x["created_at"]),
                "points": sorted(points, key=lambda x: x["created_at"]),
            }

    def turn_diff(self, session: str | None, turn: int, path: str | None) -> dict[str, Any]:
        """Return a turn's own diff (its change list's states), file by file."""
        with self.workspace() as ws:
            s = self._session(ws, session)
            info = s.ended_turn(turn)
            result = s.turn_diff(turn, paths=[path] if path else None)
            return {
                **info.to_json(),
                **_files(result),
                "from": f"turn:{turn}",
                "to": f"after turn {turn}",
            }

    def diff(
        self, session: str | None, from_ref: str, to_ref: str | None, path: str | None
    ) -> dict[str, Any]:
        """Return the diff between two points (``to_ref`` None: the files now)."""
        with self.workspace() as ws:
            s = self._session(ws, session)
            result = ws.diff(
                from_ref, to_ref, paths=[path] if path else None, session=s.name, patch=True
            )
            return {
                **_files(result),
                "session": s.name,
                "from": from_ref,
                "to": to_ref or "now",
                "from_id": ws.resolve(from_ref, session=s.name).snapshot.id,
                "to_id": ws.resolve(to_ref, session=s.name).snapshot.id if to_ref else None,
            }

    def step_points(self, session: str | None, step: int) -> dict[str, Any]:
        """Return the two points a step's diff compares: before it, and after it.

        After a command step: the snapshot taken after it. After a file-tool step: the
        next snapshot of the session (the next step's, a turn's, or one a take-back took
        before writing), or the files now when there is none yet.
        """
        with self.workspace() as ws:
            s = self._session(ws, session)
            info = next((st for st in s.steps() if st.n == step), None)
            if info is None or info.before is None:
                raise UsageError(f"no step {step} with a snapshot in session {s.name!r}")
            after = info.after
            if after is None:
                snaps = sorted(ws.log(s.name), key=lambda i: i.created_at)
                start = next(i for i in snaps if i.id == info.before)
                later = [i for i in snaps if i.created_at > start.created_at]
                after = later[0].id if later else None
            return {"from": info.before, "to": after}

    def show(self, session: str | None, ref: str, path: str) -> dict[str, Any]:
        """Return a file's whole text as it was at ``ref`` (or that it is binary)."""
        with self.workspace() as ws:
            s = self._session(ws, session)
            data = ws.show(ref, path, session=s.name)
            binary = b"\0" in data[:8000]
            cut = len(data) > MAX_SHOW_BYTES
            text = "" if binary else data[:MAX_SHOW_BYTES].decode("utf-8", "replace")
            return {
                "ref": ref,
                "id": ws.resolve(ref, session=s.name).snapshot.id,
                "path": path,
                "size": len(data),
                "binary": binary,
                "truncated": cut and not binary,
                "text": text,
            }

    # -- taking back -------------------------------------------------------------------

    def take_back(self, op: str, args: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
        """Plan (``dry_run``) or do one take-back; the result is the library's ``to_json``.

        Args:
            op: one of :data:`OPS`.
            args: ``session``, ``turn``, ``file``, ``hunk``, ``to_turn``, ``ref``, ``force``,
                ``merge`` (false, true or ``"markers"``: the library's ``merge``), and
                ``plan``: the token of the plan the person confirmed.
            dry_run: only plan.

        Raises:
            UsageError: an unknown operation, a missing or bad argument.
            ConflictError: (not a dry run) a file changed since the record.
            StalePlanError: (not a dry run) the plan confirmed is out of date.
        """
        force = bool(args.get("force"))
        merge = _merge(args)
        # What the person confirmed: the plan's token. The operation does that plan or
        # refuses (StalePlanError), and the page then shows the plan as it is now.
        plan = None if dry_run else _opt_str(args, "plan")
        with self.workspace() as ws:
            s = self._session(ws, _opt_str(args, "session"))
            if op == "rewind":
                if merge:
                    raise UsageError("a rewind does not merge")
                ref = _need(args, "ref", str)
                r = ws.rewind(ref, dry_run=dry_run, session=s.name, plan=plan)
                doc = r.to_json()
                counts = doc["counts"]
                line = (
                    f"{'Would rewind' if dry_run else 'Rewound'} to {_point(ref)}: "
                    f"{counts.get('M', 0)} restored, {counts.get('A', 0)} removed, "
                    f"{counts.get('D', 0)} made again."
                )
                if r.note:
                    line += f" ({r.note})"
                return {**doc, "op": "rewind", "session": s.name, "summary": line}
            if op == "undo":
                result = s.undo(
                    turn=_opt_int(args, "turn"),
                    force=force,
                    merge=merge,
                    dry_run=dry_run,
                    plan=plan,
                )
            elif op == "undo-turn-file":
                result = s.undo(
                    turn=_need(args, "turn", int),
                    file=_need(args, "file", str),
                    force=force,
                    merge=merge,
                    dry_run=dry_run,
                    plan=plan,
                )
            elif op == "undo-hunk":
                # One hunk of a turn (``PATH#K``, as the turn's diff shows it), taken back
                # by merge as the command line's ``undo --hunk``.
                if force:
                    raise UsageError("a hunk is taken back by merge, never forced")
                result = s.undo(
                    turn=_need(args, "turn", int),
                    hunks=[_need(args, "hunk", str)],
                    merge=merge or True,
                    dry_run=dry_run,
                    plan=plan,
                )
            elif op == "undo-file":
                result = s.undo_file(
                    _need(args, "file", str), force=force, merge=merge, dry_run=dry_run, plan=plan
                )
            elif op == "redo":
                result = s.redo(force=force, merge=merge, dry_run=dry_run, plan=plan)
            elif op == "revert":
                result = s.revert(
                    to_turn=_need(args, "to_turn", int),
                    force=force,
                    merge=merge,
                    dry_run=dry_run,
                    plan=plan,
                )
            elif op == "unrevert":
                result = s.unrevert(force=force, merge=merge, dry_run=dry_run, plan=plan)
            else:
                raise UsageError(f"unknown operation: {op!r}")
            return {**result.to_json(), "summary": summary(result)}


def _point(ref: str) -> str:
    """A ref as a person reads it: ``before step 3``, ``before turn 2``, ``the start``."""
    if ref == "start":
        return "the session's start"
    if ref.startswith("turn:"):
        return f"before turn {ref[5:]}"
    if ref.isdigit() and len(ref) < 8:
        return f"before step {ref}"
    return ref[:10]


def _session_label(name: str, agent: str | None) -> str:
    """A session as a person knows it: ``claude-code 5f0c3b1e``, not a 36-character id."""
    from .. import DEFAULT_SESSION

    if name == DEFAULT_SESSION:
        return f"{name} (commands run by hand)"
    short = name[:8] if len(name) > 16 and _ID_LIKE.fullmatch(name) else name
    return f"{agent} {short}" if agent else short


_ID_LIKE = re.compile(r"[0-9A-Fa-f-]+")


def _point_names(
    session: str,
    turns: list[dict[str, Any]],
    steps: list[StepInfo],
    recorded: list[dict[str, Any]],
    sessions: list[SessionInfo],
) -> dict[str, str]:
    """Each snapshot a person can name, by its id: ``before turn 2``, ``after step 5``."""
    names: dict[str, str] = {}
    for i in sessions:
        if i.name == session and i.baseline:
            names[i.baseline] = "the session's start"
    for t in turns:
        if t.get("before"):
            names.setdefault(t["before"], f"before turn {t['turn']}")
    for st in steps:
        if st.before:
            names.setdefault(st.before, f"before step {st.n}")
    for st in steps:
        if st.after:
            names.setdefault(st.after, f"after step {st.n}")
    for op in recorded:
        if op["pre"]:
            names.setdefault(op["pre"], f"before the {op['op']}")
    return names


def _rewind_message(message: str, names: dict[str, str]) -> str:
    """A rewind's entry: ``rewound to before step 3`` (its snapshot keeps a short id)."""
    short = message.rpartition(" ")[2]
    if len(short) >= 8 and _ID_LIKE.fullmatch(short):
        found = [words for sid, words in names.items() if sid.startswith(short)]
        if len(found) == 1:
            return f"rewound to {found[0]}"
    return message.replace("before rewind", "rewound")


def _op_message(op: dict[str, Any]) -> str:
    """What a recorded take-back did, in a few words (``took back turn 3``)."""
    turns = ", ".join(map(str, op["turns"]))
    word = "turn" if len(op["turns"]) == 1 else "turns"
    n = op["paths"]
    files = f"{n} path{'s' if n != 1 else ''}"
    what = {
        "undo": f"took back {word} {turns}",
        "undo-file": f"put {op['file']} back",
        "redo": f"brought back {word} {turns}" if turns else "brought a file back",
        "revert": f"took back {word} {turns}",
        "revert-move": f"moved the revert ({word} {turns})",
        "unrevert": f"brought back {word} {turns}",
    }.get(op["op"], op["op"])
    if op["op"] == "undo" and op["file"]:
        what = f"took back {op['file']} of turn {turns}"
    return f"{what} · {files}"


def _time(snaps: dict[str, SnapshotInfo], sid: str | None) -> float | None:
    info = snaps.get(sid) if sid else None
    return info.created_at if info else None


def _need(args: dict[str, Any], key: str, kind: type) -> Any:
    value = args.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise UsageError(f"missing or bad {key!r}")
    return value


def _merge(args: dict[str, Any]) -> bool | Literal["markers"]:
    """The ``merge`` field: absent, false, true or ``"markers"``; anything else is refused."""
    value = args.get("merge", False)
    if value is None or value is False:
        return False
    if value is True or value == "markers":
        return "markers" if value == "markers" else True
    raise UsageError("bad 'merge': false, true or \"markers\"")


def _opt_int(args: dict[str, Any], key: str) -> int | None:
    return None if args.get(key) is None else int(_need(args, key, int))


def _opt_str(args: dict[str, Any], key: str) -> str | None:
    return None if args.get(key) is None else str(_need(args, key, str))


def _files(result: DiffResult) -> dict[str, Any]:
    """The diff's files, each with its own patch (or why it is not sent)."""
    chunks = result.parts
    files = []
    total = 0
    for i, f in enumerate(result.files):
        doc = f.to_json()
        chunk = chunks[i] if i < len(chunks) else b""
        head = chunk[:2000]
        doc["binary"] = b"\nBinary files " in head or head.startswith(b"Binary files ")
        doc["over_limit"] = b"(over the size limit)" in head
        doc["unreadable"] = b"differ (unreadable)" in head
        too_big = len(chunk) > MAX_FILE_PATCH or total + len(chunk) > MAX_DIFF_PATCH
        doc["too_large"] = too_big
        doc["patch"] = "" if too_big else chunk.decode("utf-8", "replace")
        if not too_big:
            total += len(chunk)
        files.append(doc)
    return {
        "files": files,
        "added": sum(f.added for f in result.files),
        "removed": sum(f.removed for f in result.files),
    }
