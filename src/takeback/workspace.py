"""API layer: ``Workspace``, the library's front door.

A workspace is a folder and the store that records it. The store is found (or made, for
operations that record) lazily on first use; nothing is read from the process's current
folder or environment here: the caller passes ``root`` and, optionally, ``store``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import ops
from ._announce import MAX_FILE_EVENTS, announce_files, file_word
from ._fs import to_rel
from ._session import Session, Step, Turn
from ._stores import StoreHome, default_data_dir, find_root
from ._upkeep import Upkeep
from .errors import (
    PathError,
    ScanError,
    TakebackError,
    UsageError,
)
from .model import DIR, LARGE, UNREADABLE, SessionInfo, SnapshotInfo
from .ops import Options
from .store import (
    Store,
    StoreAddress,
    default_store_path,
    is_database_url,
    local_store_path,
)

if TYPE_CHECKING:
    from ._likeness import Likeness
    from .model import RewindResult
    from .ops import DiffResult, FileDiff, Resolved
    from .store import PgListener as Listener

DEFAULT_SESSION = "default"
#: a store setting per session: the agent whose hooks record it (``Workspace.mark_agent``)
AGENT_KEY = "session-agent:"

#: An event: a dict with an ``event`` key (``snapshot.taken``, ``file.changed``,
#: ``snapshot.failed``) and the fields the spec names.
Event = dict[str, Any]


class Workspace(StoreHome, Upkeep):
    """A folder whose history takeback records.

    Args:
        root: the folder (made absolute and real).
        store: the store folder (default: one per workspace in the user's data folder),
            or a PostgreSQL database, ``postgresql://...`` (``#key`` names the workspace
            in it; default: its root path), whose local folder is in the data folder.
        data_dir: where default stores live (default: the platform's user data folder).
        max_file_bytes: files larger than this are counted and named but not kept.
        exclude_env: leave ``.env`` and ``.env.*`` files out of every snapshot.

    Raises:
        ScanError: the root is not a folder.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        store: str | os.PathLike[str] | StoreAddress | None = None,
        data_dir: str | None = None,
        max_file_bytes: int = ops.DEFAULT_MAX_FILE_BYTES,
        exclude_env: bool = True,
    ) -> None:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise ScanError(f"not a folder: {os.fspath(root)}", path=os.fspath(root))
        self.root = real
        self._data_dir = data_dir
        self._default_store = store is None
        #: the database a shared store is in (None: a folder store)
        self.store_url: StoreAddress | None = None
        if isinstance(store, str | StoreAddress) and is_database_url(store):
            self.store_url = store if isinstance(store, StoreAddress) else StoreAddress(store)
            self.store_path = local_store_path(real, data_dir or default_data_dir(), self.store_url)
        elif store is not None:
            assert not isinstance(store, StoreAddress)
            self.store_path = os.path.realpath(os.fspath(store))
        else:
            self.store_path = default_store_path(real, data_dir or default_data_dir())
        self.options = Options(max_file_bytes=max_file_bytes, exclude_env=exclude_env)
        self._store: Store | None = None
        self._listeners: list[Callable[[Event], None]] = []
        #: how much the folder looked like the recorded one at the last ``adopt``
        self.last_likeness: Likeness | None = None
        #: how the last look at the files now (``status``, ``diff``) was scanned:
        #: ``mode`` ("service" or "full") and ``reason``; None before the first
        self.last_scan: dict[str, str] | None = None

    #: At most this many ``file.changed`` events for one step, turn or take-back; the rest
    #: are counted in one ``file.changed.more`` event (``more``: how many).
    MAX_FILE_EVENTS = MAX_FILE_EVENTS

    def __repr__(self) -> str:
        return f"<Workspace {self.root!r}>"

    # -- plumbing ----------------------------------------------------------------------

    def listen(self) -> Listener | None:
        """Return a listener that hears when this workspace's history changes.

        A database store announces each event (LISTEN/NOTIFY); the listener holds a
        connection of its own until closed. None for a folder store: its files (the
        event log, ``meta.db``) change with the history, and are watched instead.

        Raises:
            StoreError: the database cannot be reached.
        """
        if self.store_url is None:
            return None
        from .store import PgListener

        return PgListener(self.store_url, self.store_url.key or self.root)

    def close(self) -> None:
        """Flush and close the store (the object can be used again; it reopens)."""
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def on_event(self, callback: Callable[[Event], None]) -> None:
        """Call ``callback`` with every event (it is also logged in the store)."""
        self._listeners.append(callback)

    def _recording(self, *, create: bool = False) -> ops.Recording:
        """Return what the use cases work with: the store, the options, and this sink.

        Raises:
            StoreMissingError: there is no store and ``create`` is false.
        """
        return ops.Recording(self.open_store(create=create), self.options, self._emit)

    def _emit(self, event: Event) -> None:
        """Log an event in the store and hand it to the listeners (never raises)."""
        if self._store is not None:
            self._store.log_event(event)
        for cb in self._listeners:
            try:
                cb(event)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop recording
                pass

    def rel(
        self, path: str | os.PathLike[str], *, base: str | None = None, follow: bool = True
    ) -> str:
        """Return a path relative to the root ('/'-separated).

        Args:
            path: relative to ``base`` (default: the root), or absolute.
            base: the folder a relative path is taken from.
            follow: resolve symlinked folders on the way (false: a path that lies in the
                root as written names that place, whatever stands there now).

        Raises:
            PathError: the path is outside the root.
        """
        return to_rel(self.root, os.fspath(path), base=base, follow=follow)

    def interrupted(self) -> dict[str, Any] | None:
        """Return the journal of a restore that did not finish, if any."""
        if not self.has_store():
            return None
        store = self.open_store()
        journal = store.read_journal()
        if journal is not None and store.restore_running():
            return None  # not interrupted: still running, in another process
        return journal

    # -- recording ---------------------------------------------------------------------

    def snapshot(
        self,
        message: str = "",
        *,
        session: str | None = None,
        kind: str = "manual",
        on_progress: Callable[[int], None] | None = None,
    ) -> SnapshotInfo:
        """Take a snapshot now (the session, if named, is started first).

        Args:
            message: a note kept with the snapshot.
            session: the session it belongs to (None: none).
            kind: what took it (``manual`` for a person's).
            on_progress: called with the number of files read so far (a first
                snapshot reads them all).

        Raises:
            ScanError: the workspace cannot be read.
        """
        if session is not None:
            self.session(session).start(on_progress=on_progress)
        info = ops.take(
            self._recording(create=True),
            kind=kind,
            session=session,
            message=message,
            on_progress=on_progress,
        )
        return info

    def audit(self, ask: Callable[[Any], tuple[list[str] | None, bool]]) -> ops.AuditResult:
        """Compare what the watching service would vouch for with a full scan (no writes).

        Args:
            ask: answers, for a mark, the folders changed since it (None: it cannot
                vouch) and whether git's index changed: the service's own watcher.
        """
        return ops.audit(self.open_store(), ask)

    def bisect(
        self,
        command: Sequence[str],
        *,
        good: str = "start",
        bad: str | None = None,
        by: str = "turn",
        session: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str = "",
        on_run: Callable[[ops.BisectRun], None] | None = None,
    ) -> ops.BisectResult:
        """Find the first turn (or step) after which ``command`` fails (see ``ops._bisect``).

        The command runs in scratch copies outside the workspace; neither the workspace
        nor its history is written.

        Args:
            command: the command line (exit 0 good, 125 skip, any other bad).
            good: a ref it passes at (default: the session's baseline).
            bad: a ref it fails at (default: the workspace now).
            by: ``turn`` or ``step``.
            session: whose turns (default: as take-backs choose).
            env: the command's environment (None: this process's).
            cwd: the folder below the root to run it in.
            on_run: called after each run.

        Raises:
            RefError: a bad ref. UsageError: no command, or good not before bad.
        """
        if by not in ("turn", "step"):
            raise UsageError(f"--by takes turn or step, not {by!r}")
        name = self.session(session).name
        return ops.bisect(
            self._recording(),
            name,
            command,
            good=good,
            bad=bad,
            by="turn" if by == "turn" else "step",
            env=env,
            cwd=cwd,
            on_run=on_run,
        )

    def session(self, name: str | None = None) -> Session:
        """Return a session (its baseline is taken on first use).

        Args:
            name: the session's name; None: the session whose turn ended last (as the
                command line does), else ``default``.
        """
        if name is None:
            name = self.active_session()
        if not name or "\n" in name:
            raise UsageError(f"bad session name: {name!r}")
        return Session(self, name)

    # -- reading -----------------------------------------------------------------------

    def log(self, session: str | None = None, *, limit: int | None = None) -> list[SnapshotInfo]:
        """Return snapshots, newest first (of one session, or all)."""
        return self.open_store().meta.snapshots(session, limit)

    def sessions(self) -> list[SessionInfo]:
        """Return every session, newest first."""
        return self.open_store().meta.sessions()

    def session_agents(self) -> dict[str, str]:
        """Return the agent each session records for, where its hooks said (name -> agent)."""
        if not self.has_store():
            return {}
        rows = self.open_store().meta.get_kv_prefix(AGENT_KEY)
        return {k[len(AGENT_KEY) :]: v.decode("utf-8", "replace") for k, v in rows}

    def mark_agent(self, session: str, agent: str) -> None:
        """Record that ``session`` is a conversation of ``agent`` (written only when new)."""
        meta = self.open_store().meta
        key = AGENT_KEY + session
        value = agent.encode("utf-8", "surrogatepass")
        if meta.get_kv(key) != value:
            meta.set_kv(key, value)

    def active_session(self) -> str:
        """Return the session a person most likely means: the one whose reply ended last.

        That is the session of the turn that ended last (with several conversations in one
        workspace, the reply a person just saw finish, even when another conversation's
        prompt came since); when no turn has ended, the session of the newest snapshot
        that has one, else the newest session, else ``default``.
        """
        if not self.has_store():
            return DEFAULT_SESSION
        meta = self.open_store().meta
        last = meta.last_ended_turn_session() or meta.last_recording_session()
        if last is not None:
            return last
        sessions = meta.sessions()
        return sessions[0].name if sessions else DEFAULT_SESSION

    def resolve(self, ref: str, *, session: str | None = None) -> Resolved:
        """Return the snapshot a ref names.

        ``start``, a step ``N`` and ``turn:N`` are the session's (None: the session whose
        turn ended last).

        Raises:
            RefError: unknown, ambiguous or malformed.
        """
        return ops.resolve(self.open_store(), ref, session or self.active_session())

    def _now_tree(self) -> str:
        store = self.open_store()
        with store.lock(exclusive=False):
            result = ops.scan(store, self.options)
        self.last_scan = {"mode": result.mode, "reason": result.reason}
        return result.tree

    def status(self) -> list[FileDiff]:
        """Return what changed since the latest snapshot (files only)."""
        store = self.open_store()
        latest = store.meta.latest_snapshot()
        if latest is None:
            raise UsageError("no snapshot yet: take one first")
        return list(ops.diff(store, latest.tree, self._now_tree(), patch=False).files)

    def diff(
        self,
        from_ref: str | None = None,
        to_ref: str | None = None,
        *,
        paths: Sequence[str | os.PathLike[str]] | None = None,
        session: str | None = None,
        patch: bool = True,
        binary: bool = False,
    ) -> DiffResult:
        """Compare two states: FROM defaults to the latest snapshot, TO to the files now.

        Args:
            from_ref: FROM (None: the latest snapshot).
            to_ref: TO (None: the files now).
            paths: only these paths (relative to the root, or absolute inside it) and
                what is under them.
            session: the session whose step numbers and turns the refs name (None: the
                session whose turn ended last).
            patch: also write the unified patch.
            binary: write binary files as git binary patches (``git diff --binary``), so
                that ``git apply`` can apply the whole patch; else they are named only.

        Raises:
            RefError: a ref names nothing.
        """
        store = self.open_store()
        if from_ref is None:
            latest = store.meta.latest_snapshot()
            if latest is None:
                raise UsageError("no snapshot yet: take one first")
            old = latest.tree
        else:
            old = self.resolve(from_ref, session=session).snapshot.tree
        new = self.resolve(to_ref, session=session).snapshot.tree if to_ref else self._now_tree()
        rels = [self.rel(p, follow=False) for p in paths] if paths is not None else None
        return ops.diff(store, old, new, paths=rels, patch=patch, binary=binary)

    def show(self, ref: str, path: str | os.PathLike[str], *, session: str | None = None) -> bytes:
        """Return the bytes of a file (or a link's target) as it was at ``ref``.

        Raises:
            PathError: the path was not a kept file at ``ref``.
        """
        store = self.open_store()
        snap = self.resolve(ref, session=session).snapshot
        rel = self.rel(path, follow=False)
        entry = ops.lookup(store.objects.get_tree, snap.tree, rel)
        if entry is None or entry.kind == DIR:
            raise PathError(f"no file {rel} in snapshot {snap.id[:10]}", path=rel)
        if entry.kind == LARGE:
            raise PathError(f"{rel} was over the size limit and was not kept", path=rel)
        if entry.kind == UNREADABLE:
            raise PathError(f"{rel} could not be read and was not kept", path=rel)
        return ops.read_entry(store, entry)

    # -- taking back -------------------------------------------------------------------

    def rewind(
        self,
        to: str,
        *,
        paths: Sequence[str | os.PathLike[str]] | None = None,
        dry_run: bool = False,
        session: str | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        join_open: bool = False,
        plan: str | RewindResult | None = None,
    ) -> RewindResult:
        """Put the workspace (or just ``paths``) back as it was at ``to``.

        A dry run plans against the files now and writes nothing (not even a snapshot).
        Otherwise a pre-rewind snapshot is taken first; its id undoes the rewind.
        With ``join_open`` (the agent's own rewind, asked over MCP inside its reply),
        what it writes joins the session's open turn, so undo of the reply takes it back.
        With ``plan`` (a dry run's result, or its ``token``), the rewind does exactly
        that plan, or refuses when a path it names changed since.

        Raises:
            StalePlanError: ``plan`` is out of date; nothing was written.
            RefError: ``to`` names nothing.
            StoreCorruptError: the store cannot give back what the rewind would overwrite;
                nothing was written.
            RestoreError: writes failed part way (what was done is attached).
        """
        session = session or self.active_session()
        resolved = self.resolve(to, session=session)
        target = resolved.snapshot
        rels = [self.rel(p, follow=False) for p in paths] if paths is not None else None
        rec = self._recording()
        if join_open and not dry_run:
            n = ops.open_turn(rec.store, session)
            if n is not None:
                rec = dataclasses.replace(rec, join=(session, n))
        done = ops.rewind(
            rec,
            target,
            paths=rels,
            dry_run=dry_run,
            session=session,
            on_progress=on_progress,
            plan_of=plan if plan is None or isinstance(plan, str) else plan.token or "",
        )
        result = dataclasses.replace(done, note=resolved.note)
        if not dry_run:
            actions = {i.path: i.action for i in done.plan.items}
            self._announce_restore(
                "rewind",
                session,
                {p: actions.get(p, "M") for p in done.restored},
                pre=done.pre,
                turns=[],
                left=len(done.left),
            )
        return result

    def _announce_restore(
        self,
        op: str,
        session: str,
        written: dict[str, str],
        *,
        pre: str | None,
        turns: list[int],
        left: int,
        conflicts: Sequence[str] = (),
    ) -> None:
        """Send ``file.changed`` for each file a take-back wrote, then ``restore.done``.

        Args:
            op: the operation (``rewind``, ``undo``, ``redo``, ...).
            session: its session.
            written: path -> plan action (``M``, ``A`` removed, ``D`` made again); folders
                (ending in ``/``) get no ``file.changed``.
            pre: the snapshot taken before it.
            turns: the turns it took back or brought back.
            left: how many paths it left as they are.
            conflicts: the paths it wrote over (forced).
        """
        # A (made since the target) is removed, D (gone since) made again, M rewritten.
        announce_files(
            self._emit,
            [
                (p, file_word(written[p] != "D", written[p] != "A"), None)
                for p in sorted(written)
                if not p.endswith("/")
            ],
            limit=self.MAX_FILE_EVENTS,
            session=session,
            op=op,
        )
        self._emit(
            {
                "event": "restore.done",
                "op": op,
                "session": session,
                "turns": turns,
                "pre": pre,
                "restored": len(written),
                "left": left,
                "conflicts": list(conflicts),
            }
        )


__all__ = [
    "DEFAULT_SESSION",
    "Event",
    "RewindResult",
    "Session",
    "Step",
    "TakebackError",
    "Turn",
    "Workspace",
    "find_root",
]


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        # RewindResult, named here too, is loaded on first use (``model``'s own rule).
        if name == "RewindResult":
            from .model import RewindResult

            return RewindResult
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
