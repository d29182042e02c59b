"""API layer: a session's take-backs and what they act on.

Undo, one-file undo, redo, revert and unrevert; a turn's changes, diff and hunks; the
operations recorded.

``Session`` has these from :class:`TakeBacks`: each ends the session's open turn first
(the one place an open turn ends before a take-back, so that its events go out) or joins
its writes to it, runs the use case (``ops``), and announces what it wrote.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from . import ops
from ._host import Host
from .errors import StalePlanError, UsageError
from .model import Change, TurnInfo


class OpenTurn(Protocol):
    """What a take-back needs of the session's open turn (``Turn`` is one)."""

    n: int

    def end(self) -> list[Change]: ...


class TakeBacks:
    """The take-backs of a session; ``Session`` gives the rest."""

    workspace: Host
    name: str

    def current_turn(self) -> OpenTurn | None:
        """The session's open turn (given by ``Session``)."""
        raise NotImplementedError

    def turns(self) -> list[TurnInfo]:
        """Return the session's turns in order, each with its change list."""
        meta = self.workspace.open_store().meta
        return [
            TurnInfo(
                self.name, r.n, r.label, r.before, r.state, tuple(meta.changes(self.name, r.n))
            )
            for r in meta.turn_rows(self.name)
        ]

    def ended_turn(self, turn: int | None = None) -> TurnInfo:
        """Return an ended turn with its change list (default: the last one ended).

        Raises:
            UsageError: there is no such turn.
        """
        turns = [t for t in self.turns() if t.state != "open"]
        if turn is None:
            if not turns:
                raise UsageError(f"session {self.name!r} has no ended turn")
            return turns[-1]
        for t in turns:
            if t.n == turn:
                return t
        raise UsageError(f"no ended turn {turn} in session {self.name!r}")

    def operations(self) -> list[dict[str, Any]]:
        """Return the session's recorded take-backs, oldest first (rewinds are not among them).

        Each is a JSON-ready dict: ``op`` (``undo``, ``undo-file``, ``redo``, ``revert``,
        ``revert-move``, ``unrevert``), ``turns``, ``pre`` (the snapshot taken before it
        wrote: ``rewind --to`` it takes the operation back), ``file`` (a one-file undo's),
        ``paths`` (how many it wrote), ``state`` (``active``, ``redone``, ``unreverted``
        or ``final``) and ``created_at``. A take-back refused for a conflict is not one.
        """
        if not self.workspace.has_store():
            return []
        meta = self.workspace.open_store().meta
        times = meta.op_times(self.name)
        return [
            {
                "op": op.kind,
                "turns": op.turns,
                "pre": op.pre,
                "file": op.data.get("file"),
                "paths": len(op.data.get("paths") or ()),
                "state": op.state,
                "created_at": times.get(op.id),
            }
            for op in reversed(meta.ops(self.name))
        ]

    def turn_diff(
        self, turn: int | None = None, *, paths: Sequence[str] | None = None
    ) -> ops.DiffResult:
        """Return a turn's diff: each file it changed, before the turn and as it left it.

        The states come from the turn's change list (default: the last ended turn), so
        nothing done before or since shows, and the patch is one ``git apply`` accepts.

        Args:
            turn: the turn (default: the last one ended).
            paths: only these paths (relative to the root) and what is under them.

        Raises:
            UsageError: there is no such ended turn.
        """
        n = self.ended_turn(turn).n
        return ops.turn_diff(self.workspace.open_store(), self.name, n, paths=paths)

    def hunks(self, turn: int | None = None) -> list[ops.Hunk]:
        """Return a turn's changes hunk by hunk (default: the last ended turn).

        Each hunk's id is ``PATH#K``, K from 1 in file order, stable for the turn.

        Raises:
            UsageError: there is no such turn.
        """
        n = self.ended_turn(turn).n
        return ops.turn_hunks(self.workspace.open_store(), self.name, n)

    def changes(self, turn: int | None = None) -> list[Change]:
        """Return the change list of a turn (default: the last ended one).

        Raises:
            UsageError: there is no such turn.
        """
        return list(self.ended_turn(turn).changes)

    def undo(
        self,
        *,
        turn: int | None = None,
        file: str | os.PathLike[str] | None = None,
        force: bool = False,
        end_open: bool = True,
        merge: ops.MergeOption = False,
        dry_run: bool = False,
        hunks: Sequence[str] = (),
        plan: str | ops.TurnOpResult | None = None,
    ) -> ops.TurnOpResult:
        """Take back the last turn (or ``turn``, or one ``file`` of it, or some ``hunks``).

        A turn still open is ended first, and is then the last turn (a dry run ends
        nothing: it plans the take-back of the last turn that ended).

        Args:
            turn: the turn to take back (default: the last one not undone).
            file: take back only this file of the turn.
            force: overwrite files changed since the turn (they are in the result's
                ``conflicts``, and in the snapshot taken before).
            end_open: false when the agent itself asks (over MCP): its open turn is the
                reply asking, and the last turn is the last one ended; what the undo
                writes joins that open turn (undo of the reply takes it back too).
            merge: a file changed since the turn is merged instead of refused: the
                turn's hunks are taken back, the edits since kept (``merged`` in the
                result). Where both changed the same lines nothing is written and the
                ``ConflictError`` names the regions, unless ``"markers"``: then those
                files get conflict markers (``markers`` in the result).
            dry_run: plan only: nothing is written and no snapshot is taken; the result
                says what would be written (``restored``, ``actions``), what conflicts
                (``conflicts``, with ``why`` naming each, merge regions included; a dry
                run returns them instead of raising) and ``preview``, the diff each merge
                would write.
            hunks: take back only these hunks (``PATH#K``, see :meth:`hunks`) of
                ``turn`` (default: the last turn ended), by three-way merge: every
                other line stays as it is now; a hunk whose lines changed since is a
                conflict (``merge="markers"`` writes markers instead).
            plan: a dry run's result (or its ``token``) that a person confirmed: the
                undo does exactly that plan, or refuses with ``StalePlanError`` (exit 3,
                nothing written) when the history or a path it names changed since.
                The same holds for every take-back below.

        Returns:
            What was restored, and the snapshot taken before (``pre``); ``nothing`` when
            there was nothing to undo.

        Raises:
            StalePlanError: ``plan`` is out of date; nothing was written.
            ConflictError: a file changed after the turn; nothing was written.
            UsageError: no such turn, or it did not change ``file``.
            PathError: ``file`` is outside the root.
        """
        ws = self.workspace
        # A restore names the place as written: a folder on the way that is a link now
        # is for the engine to refuse, not a reason to look elsewhere.
        rel = ws.rel(file, follow=False) if file is not None else None
        if hunks:
            if file is not None or force:
                raise UsageError("hunks are taken back by merge: not with a file or force")
            return self._take_back(
                ops.undo_hunks,
                turn if turn is not None else self.ended_turn(None).n,
                list(hunks),
                merge="markers" if merge == "markers" else True,
                end_open=end_open,
                dry_run=dry_run,
                plan=plan,
            )
        return self._take_back(
            ops.undo,
            turn=turn,
            file=rel,
            force=force,
            merge=merge,
            end_open=end_open,
            dry_run=dry_run,
            plan=plan,
        )

    def undo_file(
        self,
        file: str | os.PathLike[str],
        *,
        force: bool = False,
        end_open: bool = True,
        merge: ops.MergeOption = False,
        dry_run: bool = False,
        plan: str | ops.TurnOpResult | None = None,
    ) -> ops.TurnOpResult:
        """Put one file back as it was before the session first changed it.

        The turns' change lists say when that was (where the session has no turns, its
        command steps do). A file the session created is removed, with the folders made
        for it when they are left empty. A turn still open is ended first, unless
        ``end_open`` is false.

        Args:
            file: the path (relative to the root, or absolute inside it).
            force: overwrite the file when it changed since what the session's record
                last says of it (an undo, redo or revert counts; a person's edit does
                not): the snapshot taken before keeps the edit.
            end_open: false when the agent itself asks (over MCP), inside its reply: the
                open turn stays open, and what the undo writes joins it.
            merge: merge the file when it changed since (as :meth:`undo`).
            dry_run: plan only (as :meth:`undo`).
            plan: a plan confirmed (as :meth:`undo`).

        Returns:
            What was restored (``kind`` is ``undo-file``), and the snapshot taken before.

        Raises:
            ConflictError: the file changed since the record's last word on it.
            UsageError: the session never changed the file.
            PathError: ``file`` is outside the root.
        """
        ws = self.workspace
        rel = ws.rel(file, follow=False)
        if not rel:
            raise UsageError("undo_file takes a file, not the whole workspace")
        return self._take_back(
            lambda rec, name, **how: ops.undo_file(
                rec, name, rel, open_turn=rec.join[1] if rec.join else None, **how
            ),
            force=force,
            merge=merge,
            end_open=end_open,
            dry_run=dry_run,
            plan=plan,
        )

    def redo(
        self,
        *,
        force: bool = False,
        join_open: bool = False,
        merge: ops.MergeOption = False,
        dry_run: bool = False,
        plan: str | ops.TurnOpResult | None = None,
    ) -> ops.TurnOpResult:
        """Bring back what the last undo took back (undo after undo, redo walks forward).

        A file the undo merged goes back to what it held when the undo began (the turn's
        hunks, and the edits the merge kept).

        Args:
            force: overwrite files changed since the undo.
            merge: merge files changed since the undo (as :meth:`undo`).
            dry_run: plan only (as :meth:`undo`).
            plan: a plan confirmed (as :meth:`undo`).
            join_open: the agent itself asks (over MCP), inside its reply: what the redo
                writes joins the session's open turn.

        Raises:
            ConflictError: a file changed since the undo; nothing was written.
        """
        return self._take_back(
            ops.redo,
            force=force,
            merge=merge,
            end_open=False,
            join=join_open,
            dry_run=dry_run,
            plan=plan,
        )

    def revert(
        self,
        *,
        to_turn: int,
        force: bool = False,
        merge: ops.MergeOption = False,
        dry_run: bool = False,
        plan: str | ops.TurnOpResult | None = None,
    ) -> ops.TurnOpResult:
        """Take back every turn after ``to_turn`` at once (0: every turn).

        ``merge``, ``dry_run`` and ``plan`` as for :meth:`undo`.

        Raises:
            ConflictError: a file changed after the turn that last changed it.
            UsageError: ``to_turn`` is not 0 or a turn of the session.
        """
        return self._take_back(
            ops.revert,
            to_turn=to_turn,
            force=force,
            merge=merge,
            end_open=True,
            dry_run=dry_run,
            plan=plan,
        )

    def unrevert(
        self,
        *,
        force: bool = False,
        merge: ops.MergeOption = False,
        dry_run: bool = False,
        plan: str | ops.TurnOpResult | None = None,
    ) -> ops.TurnOpResult:
        """Put back what the last revert took back, as it was when the revert began.

        ``merge``, ``dry_run`` and ``plan`` as for :meth:`undo`.

        Raises:
            ConflictError: a file changed since the revert.
        """
        return self._take_back(
            ops.unrevert,
            force=force,
            merge=merge,
            end_open=False,
            dry_run=dry_run,
            plan=plan,
        )

    def _take_back(
        self,
        op: Callable[..., ops.TurnOpResult],
        *args: Any,
        end_open: bool,
        join: bool | None = None,
        dry_run: bool = False,
        plan: str | ops.TurnOpResult | None = None,
        **how: Any,
    ) -> ops.TurnOpResult:
        """Run one of ops' take-backs, ending the open turn first or joining its writes to it.

        ``op`` is called as ``op(rec, session, *args, dry_run=, plan=, **how)``.
        ``join`` (default: not ``end_open``) joins what it writes to the open turn: the
        agent's reply that asked for it. A dry run (``op`` only plans) ends nothing and
        announces nothing.
        """

        def run(rec: ops.Recording) -> ops.TurnOpResult:
            return op(rec, self.name, *args, dry_run=dry_run, plan=_token(plan, dry_run), **how)

        ws = self.workspace
        current = self.current_turn()
        rec = ws._recording()
        if dry_run:
            planned = run(rec)
            planned.dry_run = True  # "nothing to do" is answered before any planning
            return planned
        if end_open:
            # The one place an open turn ends before a take-back: its events go out.
            if current is not None:
                current.end()
        elif (not end_open if join is None else join) and current is not None:
            rec = dataclasses.replace(rec, join=(self.name, current.n))
        result = run(rec)
        shown_nothing = isinstance(plan, ops.TurnOpResult) and plan.nothing
        if result.nothing and plan is not None and not shown_nothing:
            # The plan confirmed did something; now there is nothing to do: not that plan.
            raise StalePlanError(
                f"the {result.kind} planned is out of date: there is nothing to "
                f"{result.kind} now; nothing was written (plan again)",
                planned=_token(plan, False) or "",
                now="",
                reason="history",
            )
        if not result.nothing and not result.dry_run:
            ws._announce_restore(
                result.kind,
                self.name,
                {p: result.actions.get(p.rstrip("/"), "M") for p in result.restored},
                pre=result.pre,
                turns=result.turns,
                left=len(result.left),
                conflicts=result.conflicts,
            )
        return result


def _token(plan: str | ops.TurnOpResult | None, dry_run: bool) -> str | None:
    """The token of a confirmed plan (a dry run has none to keep to)."""
    if plan is None or dry_run:
        return None
    return plan if isinstance(plan, str) else plan.token or ""
