"""API layer: sessions, turns and steps, the vocabulary an agent harness records in.

A snapshot that fails never stops the agent: the step or command goes on, and a
``snapshot.failed`` event says why. That holds for the session's baseline too: without
one the session cannot be recorded yet, so its turns and steps are *detached* (number 0):
their bodies run, their touches keep nothing, and the next turn or step tries again.

Events: ``snapshot.taken`` for every snapshot the API takes (those before an undo, redo,
revert or unrevert too); ``file.changed`` once per entry of a turn's change list when the
turn ends (with the tool call id when one call made the change), and, for a command run
outside any turn, once per file it changed when it finishes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from . import ops
from ._announce import FileWord, announce_files, file_word
from ._host import Host
from ._takebacks import TakeBacks
from .errors import TakebackError
from .model import DIR, Change, Entry, SessionInfo, SnapshotInfo, StepInfo
from .scan import in_scope

if TYPE_CHECKING:
    from .store import Store


class Session(TakeBacks):
    """One agent conversation or run; its baseline snapshot is taken on first use."""

    def __init__(self, workspace: Host, name: str) -> None:
        self.workspace = workspace
        self.name = name

    def __repr__(self) -> str:
        return f"<Session {self.name!r} of {self.workspace.root!r}>"

    def start(self, *, on_progress: Callable[[int], None] | None = None) -> SessionInfo:
        """Return the session's record, taking its baseline snapshot if it has none.

        Args:
            on_progress: called with the number of files read so far (the workspace's
                first snapshot reads them all).
        """
        store = self.workspace.open_store(create=True)
        info = store.meta.session(self.name)
        if info is not None:
            return info
        with ops.shared_lock(store):
            snap = ops.take(
                self.workspace._recording(create=True),
                kind="baseline",
                session=self.name,
                message="session start",
                on_progress=on_progress,
            )
            with store.meta.tx():
                if store.meta.session(self.name) is None:
                    store.meta.add_session(SessionInfo(self.name, snap.id, time.time()))
        info = store.meta.session(self.name)
        assert info is not None
        return info

    def _started(self) -> bool:
        """Start the session if need be; a baseline that fails is only an event.

        Raises:
            StoreError: the store cannot be opened (a setup error, not a failed snapshot).
        """
        store = self.workspace.open_store(create=True)
        if store.meta.session(self.name) is not None:
            return True
        try:
            self.start()
        except Exception as e:  # noqa: BLE001 - a failed snapshot never stops the agent
            self.workspace._emit(
                {
                    "event": "snapshot.failed",
                    "reason": _reason(e),
                    "session": self.name,
                    "turn": None,
                    "step": None,
                }
            )
            return False
        return True

    @property
    def baseline(self) -> str:
        """The id of the snapshot taken when the session started."""
        return self.start().baseline

    # -- turns and steps -----------------------------------------------------------------

    def turn(self, label: str = "") -> Turn:
        """Begin a turn (one reply of the agent); use it as a context manager to end it.

        A turn still open is ended first. A turn another process opened while this one
        was opening (parallel hooks of one reply, each finding no open turn) is that
        turn, not a reason for a second one. When the session's baseline cannot be
        taken, the turn is detached (see the module's docstring).
        """
        if not self._started():
            return Turn(self, 0, label)
        current = ops.open_turn(self.workspace.open_store(), self.name)
        if current is not None:
            Turn(self, current, "").end()
        return self._open_turn(label)

    def ensure_turn(self, label: str = "") -> Turn:
        """Return the open turn, opening one when none is (what a file tool's hook needs).

        Unlike :meth:`turn`, it never ends a turn: parallel callers that each find no
        open turn open one between them, and one that comes later joins it.
        """
        current = self.current_turn()
        if current is not None:
            return current
        if not self._started():
            return Turn(self, 0, label)
        return self._open_turn(label)

    def _open_turn(self, label: str) -> Turn:
        """Open a turn, or join one another process opened since the caller looked."""
        store = self.workspace.open_store()
        try:
            with ops.shared_lock(store):
                before = self._try_snapshot("turn", message=label)
                n = ops.begin_turn(
                    store, self.name, label, before.id if before else None, reuse_open=True
                )
        except TakebackError as e:
            # The store cannot be written (a full disk): the turn is detached, the agent
            # goes on.
            self.failed(e)
            return Turn(self, 0, label)
        row = store.meta.turn_row(self.name, n)
        return Turn(self, n, row.label if row is not None else label)

    def current_turn(self) -> Turn | None:
        """Return the open turn, if one is open."""
        if not self.workspace.has_store():
            return None
        store = self.workspace.open_store()
        n = ops.open_turn(store, self.name)
        if n is None:
            return None
        row = store.meta.turn_row(self.name, n)
        return Turn(self, n, row.label if row else "")

    def step(self, *, label: str = "", tool_call_ids: Sequence[str] = ()) -> Step:
        """Begin a step outside any turn (a snapshot before it)."""
        return Step(self, None, label=label, tool_call_ids=tool_call_ids, command=False)

    def command(self, label: str, *, tool_call_id: str | None = None) -> Step:
        """Bracket a command with snapshots; inside a turn its changes join the open turn.

        Outside one, the command is a turn of its own (labelled with ``label``), so that
        ``undo``, ``changes`` and ``revert`` take it as they take an agent's reply.
        """
        current = self.current_turn()
        step = Step(
            self,
            current.n if current else None,
            label=label,
            tool_call_ids=[tool_call_id] if tool_call_id else [],
            command=True,
        )
        step._own_turn = current is None
        return step

    def failed(self, e: BaseException, *, turn: int | None = None, step: int | None = None) -> None:
        """Say that recording failed (``snapshot.failed``); the agent goes on."""
        self.workspace._emit(
            {
                "event": "snapshot.failed",
                "reason": _reason(e),
                "session": self.name,
                "turn": turn,
                "step": step,
            }
        )

    def _try_snapshot(
        self,
        kind: str,
        *,
        turn: int | None = None,
        step: int | None = None,
        message: str = "",
        also: Callable[[SnapshotInfo], None] | None = None,
    ) -> SnapshotInfo | None:
        ws = self.workspace
        try:
            snap = ops.take(
                ws._recording(create=True),
                kind=kind,
                session=self.name,
                turn=turn,
                step=step,
                message=message,
                also=also,
            )
        except Exception as e:  # noqa: BLE001 - a failed snapshot never stops the agent
            ws._emit(
                {
                    "event": "snapshot.failed",
                    "reason": _reason(e),
                    "session": self.name,
                    "turn": turn,
                    "step": step,
                }
            )
            return None
        return snap

    def steps(self) -> list[StepInfo]:
        """Return the session's steps in order."""
        return self.workspace.open_store().meta.steps(self.name)

    def resume_step(self, n: int, *, tool_call_id: str | None = None) -> Step | None:
        """Return an unfinished command step, begun elsewhere, so this process can finish it.

        A hook begins a step before a command in one process and finishes it after the
        command in another; this is how the second one picks it up.

        Returns:
            The step, open; None when there is no such step or it is already finished.
        """
        info = self.workspace.open_store().meta.step(self.name, n)
        if info is None or info.after is not None or info.exit_code is not None:
            return None
        step = Step(
            self,
            info.turn,
            label=info.label,
            tool_call_ids=[tool_call_id] if tool_call_id else [],
            command=True,
        )
        step.n = n
        if info.before is not None:
            step.before = self.workspace.open_store().meta.snapshot(info.before)
        if info.turn is not None:
            # A command outside any turn opened its own, from the same snapshot.
            row = self.workspace.open_store().meta.turn_row(self.name, info.turn)
            step._own_turn = (
                row is not None
                and row.state == "open"
                and row.before == info.before
                and info.before is not None
            )
        step._open = True
        return step


class Turn:
    """One reply of the agent. ``with session.turn(...) as turn:`` ends it on exit."""

    def __init__(self, session: Session, n: int, label: str) -> None:
        self.session = session
        self.n = n
        self.label = label
        self._changes: list[Change] | None = None

    def __repr__(self) -> str:
        return f"<Turn {self.n} of session {self.session.name!r}>"

    def __enter__(self) -> Turn:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end()

    def step(self, *, label: str = "", tool_call_ids: Sequence[str] = ()) -> Step:
        """Begin a step of this turn: a snapshot before the batch of tool calls.

        Use it as a context manager (or call ``begin()`` and ``finish()``).
        """
        return Step(self.session, self.n, label=label, tool_call_ids=tool_call_ids, command=False)

    def command(self, label: str, *, tool_call_id: str | None = None) -> Step:
        """Bracket a command with snapshots; the files it changes join this turn."""
        return Step(
            self.session,
            self.n,
            label=label,
            tool_call_ids=[tool_call_id] if tool_call_id else [],
            command=True,
        )

    def touch(
        self,
        path: str | os.PathLike[str],
        text: str | None = None,
        *,
        tool_call_id: str | None = None,
    ) -> bool:
        """Keep a file's state before a file tool writes it; return whether it was kept.

        The first touch of a path in a turn wins; later ones are ignored. ``text`` is the
        caller's view of the file (an editor buffer); without it the file is read.
        Paths out of scope (ignored, ``.git``, secrets) are not recorded. A symlink is
        kept as a link, and the file it leads to inside the root is kept too: tools
        write through links.

        Raises:
            PathError: the path is outside the root.
        """
        ws = self.session.workspace
        rel = ws.rel(path)
        if self.n == 0:
            return False  # detached: the session could not be started
        kept = self._touch_one(rel, text, tool_call_id)
        full = os.path.join(ws.root, rel) if rel else ws.root
        if rel and os.path.islink(full):
            real = os.path.realpath(full)
            if real.startswith(ws.root.rstrip("/") + "/") and not os.path.isdir(real):
                target = real[len(ws.root.rstrip("/")) + 1 :]
                kept = self._touch_one(target, text, tool_call_id) or kept
        return kept

    def _touch_one(self, rel: str, text: str | None, tool_call_id: str | None) -> bool:
        ws = self.session.workspace
        if not rel or not in_scope(
            ws.root, rel, exclude_env=ws.options.exclude_env, exclude=(ws.store_path,)
        ):
            return False
        return ops.touch(
            ws._recording(create=True),
            self.session.name,
            self.n,
            rel,
            text=text if not os.path.islink(os.path.join(ws.root, rel)) else None,
            tool_call_id=tool_call_id,
        )

    def end(self) -> list[Change]:
        """Close the turn and return its change list (files back where they began drop)."""
        if self._changes is not None:
            return self._changes
        if self.n == 0:
            self._changes = []
            return self._changes
        ws = self.session.workspace
        store = ws.open_store()
        row = store.meta.turn_row(self.session.name, self.n)
        if row is not None and row.state != "open":
            self._changes = store.meta.changes(self.session.name, self.n)
            return self._changes
        touches = store.meta.touches(self.session.name, self.n)
        # A command interrupted in this turn never got its after-snapshot: take it now,
        # or the turn's change list (and so undo) would miss what the command did.
        ops.finish_open_steps(ws._recording(), self.session.name, self.n)
        self._changes = ops.end_turn(ws._recording(), self.session.name, self.n)
        # file.changed is of files; the change list holds folders too.
        announce_files(
            ws._emit,
            [
                (
                    c.path,
                    file_word(c.status != "created", c.status != "deleted"),
                    touches[c.path].tool_call_id if c.path in touches else None,
                )
                for c in self._changes
                if c.kind != "folder"
            ],
            limit=ws.MAX_FILE_EVENTS,
            session=self.session.name,
            turn=self.n,
        )
        return self._changes

    @property
    def changes(self) -> list[Change]:
        """The change list; while the turn is open, what it would be if it ended now.

        Reading it never ends the turn (``end()`` does, and leaving the ``with`` block).
        """
        if self._changes is not None or self.n == 0:
            return self.end()
        ws = self.session.workspace
        store = ws.open_store()
        row = store.meta.turn_row(self.session.name, self.n)
        if row is not None and row.state != "open":
            return self.end()
        return ops.measure_turn(ws._recording(), self.session.name, self.n)


class Step:
    """A batch of tool calls (or one command): a snapshot before it, and after a command.

    ``turn`` is the turn it belongs to (None: none; 0: a detached turn).
    """

    def __init__(
        self,
        session: Session,
        turn: int | None,
        *,
        label: str,
        tool_call_ids: Sequence[str],
        command: bool,
    ) -> None:
        self.session = session
        self.turn = turn
        self.label = label
        self.tool_call_ids = list(tool_call_ids)
        self.is_command = command
        self.n = 0
        self.before: SnapshotInfo | None = None
        self.after: SnapshotInfo | None = None
        self.changed: list[tuple[str, FileWord]] = []
        self._open = False
        #: a command begun outside any turn opens a turn of its own and ends it
        self._own_turn = False

    def __repr__(self) -> str:
        what = "command" if self.is_command else "step"
        return f"<Step {self.n} ({what} {self.label!r}) of session {self.session.name!r}>"

    def begin(self) -> Step:
        """Give the step its number and take the snapshot before it (a failure is an event).

        When the session cannot be started (its baseline failed), the step is detached:
        number 0, nothing recorded, and the caller goes on.
        """
        ws = self.session.workspace
        self._open = True
        if not self.session._started():
            return self
        store = ws.open_store()
        try:
            self._add_row(store)
        except TakebackError as e:
            self.n = 0  # the store cannot be written (a full disk): detached
            self.session.failed(e, turn=self.turn or None)
            return self
        try:
            return self._begin(store)
        except TakebackError as e:
            self.session.failed(e, turn=self.turn or None, step=self.n)
            return self

    def _add_row(self, store: Store) -> None:
        with store.meta.tx():
            self.n = store.meta.next_step(self.session.name)
            store.meta.add_step(
                StepInfo(
                    self.session.name,
                    self.n,
                    self.turn or None,
                    None,
                    None,
                    self.label,
                    None,
                    command=self.is_command,
                )
            )

    def _begin(self, store: Store) -> Step:
        name, n = self.session.name, self.n

        def started(info: SnapshotInfo) -> None:  # in the snapshot row's commit
            store.meta.set_step_start(name, n, before=info.id, turn=self.turn or None)

        with ops.shared_lock(store):
            self.before = self.session._try_snapshot(
                "step",
                turn=self.turn or None,
                step=self.n,
                message=self.label,
                also=None if self._own_turn else started,
            )
            if self.before is None:
                self._own_turn = False  # nothing to take back from: no turn either
                return self
            if self._own_turn:
                # The step's snapshot is the turn's "before" too: one scan, not two.
                self.turn = ops.begin_turn(store, self.session.name, self.label, self.before.id)
                with store.meta.tx():
                    started(self.before)
        return self

    def __enter__(self) -> Step:
        return self.begin()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.finish()

    def touch(self, path: str | os.PathLike[str], text: str | None = None) -> bool:
        """Keep a file's state before a file tool of this step writes it.

        A step outside any turn opens one (ended by the next turn, or by undo).

        Raises:
            PathError: the path is outside the root.
        """
        if self.turn is None:
            turn = self.session.ensure_turn()
            self.turn = turn.n
        else:
            turn = Turn(self.session, self.turn, "")
        call = self.tool_call_ids[0] if len(self.tool_call_ids) == 1 else None
        return turn.touch(path, text, tool_call_id=call)

    def finish(self, exit_code: int | None = None, *, unconfirmed: bool = False) -> None:
        """End the step; for a command, snapshot after it and record what it changed.

        Inside an open turn, the files a command changed join the turn (their
        ``file.changed`` events go out when the turn ends); outside one, they go out now.
        ``unconfirmed``: the command's end was never seen (a hook finishing a denied or
        failed call later): its changes are marked so, and a take-back treats them as
        conflicts unless forced.
        """
        if not self._open:
            return
        self._open = False
        if self.n == 0:
            return  # detached
        try:
            self._finish(exit_code, unconfirmed)
        except TakebackError as e:
            # The store cannot be written (a full disk): said, and the agent goes on.
            self.session.failed(e, turn=self.turn or None, step=self.n)

    def _finish(self, exit_code: int | None, unconfirmed: bool = False) -> None:
        ws = self.session.workspace
        store = ws.open_store()
        name, n = self.session.name, self.n
        joined: list[tuple[str, Entry | None, Entry | None]] | None = None

        def finished(info: SnapshotInfo | None) -> None:  # in the snapshot row's commit
            nonlocal joined
            store.meta.finish_step(name, n, info.id if info else None, exit_code)
            if info is not None and self.before is not None and self._in_turn(store):
                joined = self._join(store, info, unconfirmed)

        with ops.shared_lock(store):
            if self.is_command:
                self.after = self.session._try_snapshot(
                    "step-after",
                    turn=self.turn or None,
                    step=self.n,
                    message=self.label,
                    also=finished,
                )
            if self.after is None:
                with store.meta.tx():
                    finished(None)
            if self.is_command and self.before and self.after:
                self._record_changes(store, unconfirmed, joined)
        if self._own_turn and self.turn:
            Turn(self.session, self.turn, self.label).end()

    def _in_turn(self, store: Store) -> bool:
        """Whether the step's turn is open (what the command changes joins it)."""
        row = store.meta.turn_row(self.session.name, self.turn) if self.turn else None
        return row is not None and row.state == "open"

    def _join(
        self, store: Store, after: SnapshotInfo, unconfirmed: bool, *, commit: bool = False
    ) -> list[tuple[str, Entry | None, Entry | None]]:
        """Join what the command changed to its open turn (in the caller's transaction)."""
        assert self.before is not None and self.turn is not None
        return ops.join_command(
            self.session.workspace._recording(),
            self.session.name,
            self.turn,
            self.before.tree,
            after.tree,
            self.tool_call_ids[0] if self.tool_call_ids else None,
            before_at=self.before.created_at,
            unconfirmed=unconfirmed,
            commit=commit,
        )

    def _record_changes(
        self,
        store: Store,
        unconfirmed: bool = False,
        joined: list[tuple[str, Entry | None, Entry | None]] | None = None,
    ) -> None:
        """What a command changed: joined to its turn, or announced now outside one.

        ``joined``: what :meth:`_join` joined already, in the snapshot's commit.
        """
        assert self.before is not None and self.after is not None
        ws = self.session.workspace
        call = self.tool_call_ids[0] if self.tool_call_ids else None
        in_turn = joined is not None or self._in_turn(store)
        if joined is not None:
            deltas = joined
        elif in_turn:
            deltas = self._join(store, self.after, unconfirmed, commit=True)
        else:
            deltas = [
                (p, a, b)
                for p, a, b in ops.diff_trees(
                    store.objects.tree_changes, self.before.tree, self.after.tree
                )
                if not ((a is None or a.kind == DIR) and (b is None or b.kind == DIR))
            ]
        for path, old, new in deltas:
            if (old is None or old.kind == DIR) and (new is None or new.kind == DIR):
                continue  # a folder made or removed: in the change list, not a file event
            was = old is not None and old.kind != DIR
            self.changed.append((path, file_word(was, new is not None and new.kind != DIR)))
        if not in_turn:
            announce_files(
                ws._emit,
                [(path, word, call) for path, word in self.changed],
                limit=ws.MAX_FILE_EVENTS,
                session=self.session.name,
                step=self.n,
            )


def _reason(e: BaseException) -> str:
    """Why a snapshot failed, for the event (the class name when the message is empty)."""
    text = e.message if isinstance(e, TakebackError) else str(e)
    return text or type(e).__name__
