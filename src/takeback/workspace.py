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
from ._stores import default_data_dir, find_moved_store, find_root
from .errors import (
    PathError,
    ScanError,
    StoreMissingError,
    TakebackError,
    UsageError,
)
from .model import DIR, LARGE, UNREADABLE, RewindResult, SessionInfo, SnapshotInfo
from .ops import Options
from .store import (
    Store,
    StoreAddress,
    default_store_path,
    is_database_url,
    local_store_path,
    open_store,
    read_marker,
    rehome,
    release_reserve,
)

if TYPE_CHECKING:
    from ._likeness import Likeness
    from .ops import DiffResult, FileDiff, Resolved
    from .store._pg_listen import PgListener as Listener

DEFAULT_SESSION = "default"
#: a store setting per session: the agent whose hooks record it (``Workspace.mark_agent``)
AGENT_KEY = "session-agent:"

#: An event: a dict with an ``event`` key (``snapshot.taken``, ``file.changed``,
#: ``snapshot.failed``) and the fields the spec names.
Event = dict[str, Any]


class Workspace:
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

    def open_store(self, *, create: bool = False) -> Store:
        """Return the open store, opening (or, with ``create``, making) it on first use.

        Raises:
            StoreMissingError: there is none and ``create`` is false.
            StoreError: the store is unusable (version, root, damage).
        """
        if self._store is None:
            try:
                self._store = open_store(
                    self.store_url or self.store_path,
                    self.root,
                    local=self.store_path,
                    create=create,
                )
            except StoreMissingError as e:
                moved = self.moved_store() if self._default_store else None
                if moved is None:
                    raise
                raise StoreMissingError(
                    f"{e.message}; this folder looks like {moved[1]}, moved: adopt its "
                    f"history with `takeback adopt {moved[0]}`",
                    path=self.store_path,
                ) from e
        return self._store

    def moved_store(self) -> tuple[str, str] | None:
        """Return (store, old root) of this folder's history from before it was moved.

        A default store (in the user's data folder) whose recorded folder no longer
        exists and was this one (same device and inode); None when there is none.
        """
        return find_moved_store(self.root, self._data_dir or default_data_dir())

    def adopt(
        self,
        store: str | os.PathLike[str] | None = None,
        *,
        force: bool = False,
        dry_run: bool = False,
    ) -> str:
        """Make a moved workspace's history this folder's (nothing in the folder is written).

        The store's ``store.json`` is given this root; a default store (in the user's
        data folder) is renamed to this folder's default store, where commands look.
        The folder must look like the recorded one (see ``_likeness.py``): a reused
        inode number alone never attaches another project's history.

        Args:
            store: the store to adopt (default: the one :meth:`moved_store` finds).
            force: adopt it even when this folder does not look like the recorded one.
            dry_run: check and return where it would be, changing nothing.

        Returns:
            Where the adopted store is now (would be, with ``dry_run``).

        Raises:
            UsageError: no moved store found, its folder still exists (a copy, not a
                move), this folder has a store already, or it does not look like the
                recorded folder (without ``force``).
            StoreCorruptError: the store's marker is unreadable.
        """
        self.close()
        if self.store_url is not None:
            raise UsageError(
                "a database store finds a workspace by its key, not by its folder: "
                "nothing to adopt (name the key with #key after the address)"
            )
        if store is None:
            found = self.moved_store()
            if found is None:
                raise UsageError(f"no moved workspace's store found for {self.root}")
            path = found[0]
        else:
            path = os.path.realpath(os.fspath(store))
        info = read_marker(path)
        if info is None:
            raise UsageError(f"not a takeback store: {path}")
        old = str(info["root"])
        if old == self.root:
            return path
        if os.path.lexists(old):
            raise UsageError(
                f"store {path} belongs to {old}, which still exists: a copy of a "
                "workspace does not take its history (snapshot the copy instead)"
            )
        base = os.path.join(self._data_dir or default_data_dir(), "workspaces")
        target = path
        if self._default_store and os.path.dirname(path) == base:
            target = self.store_path
            if target != path and os.path.lexists(target):
                raise UsageError(
                    f"this folder has a store already ({target}); remove it to adopt {path}"
                )
        from ._likeness import likeness

        self.last_likeness = like = likeness(path, old, self.root)
        if not like.alike and not force:
            raise UsageError(
                f"{self.root} does not look like {old}, whose history {path} holds "
                f"({like.describe()}); adopt it anyway with --force"
            )
        if dry_run:
            return target
        # Renamed first: a failure between the two leaves a store at this folder's key
        # that names the old root, which the next command recognizes (and offers again).
        if target != path:
            os.rename(path, target)
        rehome(target, self.root)
        self.store_path = target
        return target

    def has_store(self) -> bool:
        """Return whether a store exists for this workspace."""
        if self.store_url is not None:
            try:
                self.open_store()
            except StoreMissingError:
                return False
            return True
        return os.path.exists(os.path.join(self.store_path, "store.json"))

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
        from .store._pg_listen import PgListener

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

    def recording(self, *, create: bool = False) -> ops.Recording:
        """Return what the use cases work with: the store, the options, and this sink.

        Raises:
            StoreMissingError: there is no store and ``create`` is false.
        """
        return ops.Recording(self.open_store(create=create), self.options, self.emit)

    def emit(self, event: Event) -> None:
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
            self.recording(create=True),
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
            self.recording(),
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

    # -- keeping the store bounded ------------------------------------------------------

    def policy(self) -> ops.Policy:
        """Return the store's retention policy (the defaults where it sets none).

        Raises:
            StoreMissingError: there is no store.
        """
        return ops.read_policy(self.open_store().meta)

    def set_policy(
        self,
        *,
        keep_turns: int | None = None,
        keep_days: float | None = None,
        auto: bool | None = None,
    ) -> ops.Policy:
        """Set parts of the retention policy (kept in the store); return the whole policy.

        Raises:
            UsageError: ``keep_turns`` below 1, or ``keep_days`` below 0.
            StoreMissingError: there is no store.
        """
        return ops.write_policy(
            self.open_store(), keep_turns=keep_turns, keep_days=keep_days, auto=auto
        )

    def gc(
        self,
        *,
        keep_turns: int | None = None,
        keep_days: float | None = None,
        dry_run: bool = False,
        now: float | None = None,
        pause: Callable[[str], None] | None = None,
    ) -> ops.GcResult:
        """Remove what the retention policy no longer keeps (see ``ops._gc``).

        Args:
            keep_turns: this run's turn count, instead of the policy's.
            keep_days: this run's day limit, instead of the policy's.
            dry_run: only say what would go.
            now: the moment the day limit counts back from (default: now).
            pause: called between gc's steps with the next one's name (tests).

        Raises:
            UsageError: a bad ``keep_turns`` or ``keep_days``.
            StoreMissingError: there is no store.
        """
        ops.check_policy(keep_turns, keep_days)
        if not dry_run:
            self._make_room()
        store = self.open_store()
        policy = ops.read_policy(store.meta)
        policy = dataclasses.replace(
            policy,
            keep_turns=policy.keep_turns if keep_turns is None else keep_turns,
            keep_days=policy.keep_days if keep_days is None else keep_days,
        )
        result = ops.gc(store, policy, dry_run=dry_run, now=now, pause=pause)
        if not dry_run:
            self.emit({"event": "gc.done", **result.to_json()})
        return result

    def last_gc(self) -> float:
        """When gc last ran (0: never; a store made before gc existed says nothing).

        Raises:
            StoreMissingError: there is no store.
        """
        store = self.open_store()
        raw = store.meta.get_meta(ops.LAST_GC)
        return ops.last_gc(store) if raw is not None else 0.0

    def _make_room(self) -> None:
        """Free the room the store keeps for gc, before gc opens its databases.

        On a full disk, opening a database to write needs room too; a store opened
        read-only for want of it is opened again. (A database store keeps no reserve:
        its server's disk is not this machine's.)
        """
        if self.store_url is not None:
            return
        if self.has_store() and release_reserve(self.store_path):
            if self._store is not None and self._store.readonly:
                self.close()

    def purge(
        self, session: str | None = None, *, everything: bool = False, dry_run: bool = False
    ) -> ops.GcResult:
        """Remove a session's history for good (or every session's), then what only it reached.

        Nothing to purge (no such session) is not an error: the result removes nothing.
        With ``everything``, a database store's local folder on this machine goes too (its
        scan cache, the hook's records and log), and the one an older takeback kept for
        the folder whatever the history.

        Raises:
            UsageError: neither a session nor ``everything``, or the session is the one an
                interrupted restore needs.
            StoreMissingError: there is no store.
        """
        if (session is None) == (not everything):
            raise UsageError("purge takes a session or everything, not both or neither")
        if not dry_run:
            self._make_room()
        store = self.open_store()
        result = ops.gc(
            store,
            ops.read_policy(store.meta),
            dry_run=dry_run,
            purge=[session] if session is not None else None,
            purge_all=everything,
        )
        if not dry_run:
            self.emit({"event": "purge.done", **result.to_json()})
            if everything and self.store_url is not None:
                self._drop_local()
        return result

    def _drop_local(self) -> None:
        """Remove what a database store keeps on this machine for this workspace."""
        import shutil

        self.close()
        older = local_store_path(self.root, self._data_dir or default_data_dir())
        for path in (self.store_path, older):
            shutil.rmtree(path, ignore_errors=True)

    def fsck(
        self, *, read_data: bool = False, on_progress: Callable[[int, int], None] | None = None
    ) -> ops.FsckResult:
        """Check the store (with ``read_data``, every object's hash); see ``ops._fsck``.

        Raises:
            StoreMissingError: there is no store.
            StoreCorruptError: the store cannot be opened at all.
        """
        return ops.fsck(self.open_store(), read_data=read_data, on_progress=on_progress)

    def du(self) -> ops.DuResult:
        """Return the store's size, per session, and what gc would free.

        Raises:
            StoreMissingError: there is no store.
        """
        store = self.open_store()
        return ops.du(store, ops.read_policy(store.meta))

    def claim_auto_gc(self) -> bool:
        """Whether gc is due by itself (over a day since the last), claiming the run if so.

        False when there is no store or it cannot be written.
        """
        if not self.has_store():
            return False
        try:
            return ops.claim_auto_gc(self.open_store())
        except TakebackError:
            return False

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
        rec = self.recording()
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
            plan_of=plan.token or "" if isinstance(plan, RewindResult) else plan,
        )
        result = dataclasses.replace(done, note=resolved.note)
        if not dry_run:
            actions = {i.path: i.action for i in done.plan.items}
            self.announce_restore(
                "rewind",
                session,
                {p: actions.get(p, "M") for p in done.restored},
                pre=done.pre,
                turns=[],
                left=len(done.left),
            )
        return result

    def announce_restore(
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
            self.emit,
            [
                (p, file_word(written[p] != "D", written[p] != "A"), None)
                for p in sorted(written)
                if not p.endswith("/")
            ],
            limit=self.MAX_FILE_EVENTS,
            session=session,
            op=op,
        )
        self.emit(
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
