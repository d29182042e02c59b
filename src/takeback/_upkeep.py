"""API layer: keeping a workspace's store bounded and sound: policy, gc, purge, fsck, du.

``Workspace`` has these from :class:`Upkeep`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from . import ops
from ._stores import default_data_dir
from .errors import TakebackError, UsageError
from .store import Store, StoreAddress, local_store_path, release_reserve


class Upkeep:
    """A workspace's store kept bounded and checked; ``Workspace`` gives the rest."""

    root: str
    store_path: str
    store_url: StoreAddress | None
    _store: Store | None
    _data_dir: str | None

    def open_store(self, *, create: bool = False) -> Store:
        """The open store (given by ``Workspace``)."""
        raise NotImplementedError

    def has_store(self) -> bool:
        """Whether a store exists (given by ``Workspace``)."""
        raise NotImplementedError

    def _emit(self, event: dict[str, Any]) -> None:
        """Send an event (given by ``Workspace``)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the store (given by ``Workspace``)."""
        raise NotImplementedError

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
            pause: called between gc's steps with the next one's name (tests), and
                with ``wait`` when another gc of the store runs (this one waits).

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
            self._emit({"event": "gc.done", **result.to_json()})
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
            self._emit({"event": "purge.done", **result.to_json()})
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
