"""Scan layer: the check pass, which finds the folders that differ from the scan's cache.

A scan with a cache from an earlier one first lists every in-scope folder for its two
digests alone (``_list.py``) and compares them with the cache's; the walk then lists again
only the folders that differ, and those above them. Where the C module is built, each
top-level folder's subtree is checked there (``check_tree``: listed, digested and compared
with no Python a folder), and what it cannot decide alone comes back to be listed here.
The pass is bound by ``lstat`` calls, so the top-level folders are split, by the size of
their subtrees in the cache, between this process and ``forks`` forked workers, which
share no lock (``_fork.py``). A process with threads of its own (a server's) must not fork: there
the parts go to threads instead, where the C listing runs without the GIL.

A worker that fails (a folder vanished under it, say) costs time, never a folder missed:
its part is checked again here.
"""

from __future__ import annotations

import marshal
import os

from ._cache import _FILES, _LISTING, _PARTIAL, _SKIP, _STAT, _USES_INDEX, _Fast
from ._fork import can_fork, fork_worker, receive, send
from ._ignore import IgnoreRules
from ._list import Lister, _Unreadable, native_listing

try:  # the C check of a whole subtree; built with the native listing
    from ._listing import check_tree as _native_check
except ImportError:  # pragma: no cover - checked folder by folder in Python
    _native_check = None  # type: ignore[assignment]

#: Where a cache record keeps what the native check compares (see ``_listing.c``).
_CHECKED_FIELDS = (_LISTING, _SKIP, _PARTIAL, _STAT, _USES_INDEX)

#: One top-level folder to check: its path, the rules and key in force above it, and
#: whether it lies in an ignored folder that git tracks files in.
_Job = tuple[str, IgnoreRules, bytes, bool]


class Checker:
    """The check pass of one scan, over forks or threads.

    Args:
        lister: lists the workspace's folders (its root key already taken).
        old: the cache's record of every folder.
        forks: how many forked processes (or threads) share the pass with this one.
    """

    def __init__(self, lister: Lister, old: dict[str, _Fast], forks: int) -> None:
        self._lister = lister
        self._old = old
        self._forks = forks

    def dirty_dirs(self, rules: IgnoreRules, key: bytes) -> list[str]:
        """Return the folders whose listing or stats differ from the cache (or are new)."""
        old = self._old.get("")
        top = self._lister.listing("", rules, key, False, old, keep=False)
        dirty: list[str] = []
        if old is None or old[_LISTING] != top.listing_key or old[_STAT] != top.stat_key:
            dirty.append("")
        jobs = [(name, top.rules, top.key, name in top.partial) for name, _m in top.subdirs]
        forks = min(self._forks, len(jobs) - 1)
        # A process with threads of its own (a server's) must not fork; the native module
        # lists without the GIL, so threads share the pass there instead.
        threads = forks >= 1 and not can_fork() and native_listing()
        if forks < 1 or not (threads or can_fork()):
            for job in jobs:
                self._check(*job, dirty)
            return dirty
        # Balance by the size of each subtree in the cache (its folders and files).
        weight: dict[str, int] = {}
        for d, fast in self._old.items():
            head = d.split("/", 1)[0]
            weight[head] = weight.get(head, 0) + 1 + fast[_FILES]
        parts: list[list[_Job]] = [[] for _ in range(forks + 1)]
        load = [0] * (forks + 1)
        for job in sorted(jobs, key=lambda j: -weight.get(j[0], 1)):
            side = load.index(min(load))
            parts[side].append(job)
            load[side] += weight.get(job[0], 1)
        if threads:
            found = self._thread_check(parts, dirty)
        else:
            workers = [self._fork_check(part) for part in parts[1:]]
            try:
                for job in parts[0]:
                    self._check(*job, dirty)
            finally:
                found = [self._join_check(pid, rfd) for pid, rfd in workers]
        for part, theirs in zip(parts[1:], found, strict=True):
            if theirs is None:
                # The worker failed (a folder vanished under it, say): check its part here.
                theirs = []
                for job in part:
                    self._check(*job, theirs)
            dirty.extend(theirs)
        return dirty

    def _thread_check(self, parts: list[list[_Job]], dirty: list[str]) -> list[list[str] | None]:
        """Check ``parts[0]`` here and each other part on a thread; return what each found.

        None for a part whose thread failed (the caller checks it again here).
        """
        import threading

        found: list[list[str] | None] = [None] * (len(parts) - 1)

        def check(i: int) -> None:
            mine: list[str] = []
            try:
                for job in parts[i + 1]:
                    self._check(*job, mine)
            except BaseException:  # noqa: BLE001 - reported as None: checked again here
                return
            found[i] = mine

        workers = [
            threading.Thread(target=check, args=(i,), name=f"takeback-check-{i}")
            for i in range(len(parts) - 1)
        ]
        for t in workers:
            t.start()
        try:
            for job in parts[0]:
                self._check(*job, dirty)
        finally:
            for t in workers:
                t.join()
        return found

    def _fork_check(self, jobs: list[_Job]) -> tuple[int, int]:
        """Check some top-level folders in a forked worker; return its pid and pipe."""

        def run(_requests: int, answers: int) -> None:  # pragma: no cover - in the worker
            found: list[str] = []
            for job in jobs:
                self._check(*job, found)
            send(answers, marshal.dumps(found))

        pid, requests, answers = fork_worker(run)
        os.close(requests)  # it is sent nothing: its jobs are in its memory
        return pid, answers

    @staticmethod
    def _join_check(pid: int, answers: int) -> list[str] | None:
        """Read what a worker found and reap it (None: it failed)."""
        try:
            raw = receive(answers)
        finally:
            os.close(answers)
            os.waitpid(pid, 0)
        found = marshal.loads(raw) if raw is not None else None
        return found if isinstance(found, list) else None

    def _check(
        self, rel: str, rules: IgnoreRules, key: bytes, excluded: bool, dirty: list[str]
    ) -> None:
        """Check the folder ``rel`` and everything below it; add what differs to ``dirty``.

        The C module checks every folder it can decide alone (those with a record, no
        ignore file of their own and the names they had), with no Python a folder; it
        hands back the others, listed here, where their subfolders go back to it.
        """
        if _native_check is None:
            self._check_listed(rel, rules, key, excluded, dirty)
            return
        old, lister = self._old, self._lister
        handed = _native_check(
            lister.root, rel, key, excluded, old, lister.index_sig, dirty, _CHECKED_FIELDS
        )
        for there, there_excluded in handed:
            self._check_listed(there, rules, key, there_excluded, dirty)

    def _check_listed(
        self, rel: str, rules: IgnoreRules, key: bytes, excluded: bool, dirty: list[str]
    ) -> None:
        """Check one folder listed in Python, then what is below it (:meth:`_check`)."""
        old = self._old.get(rel)
        try:
            got = self._lister.listing(rel, rules, key, excluded, old, keep=False)
        except _Unreadable:
            dirty.append(rel)  # never cached: its parent names it again
            return
        if old is None or old[_LISTING] != got.listing_key or old[_STAT] != got.stat_key:
            dirty.append(rel)
        prefix = rel + "/"
        for name, _mode in got.subdirs:
            self._check(prefix + name, got.rules, got.key, excluded or name in got.partial, dirty)
