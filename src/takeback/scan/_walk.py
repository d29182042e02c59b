r"""Scan layer: walk the workspace into per-folder trees, rehashing only what changed.

The walk lists every in-scope folder and ``lstat``\\ s every in-scope entry; that is the
floor of any scan that trusts no watcher. Everything else is skipped when a folder is
unchanged, decided by two digests kept per folder from the previous scan:

- the *listing key* (the rules in force and the names in the folder) says whether the
  ignore decisions can be reused without matching a single pattern;
- the *stat key* (mode, size, mtime, ctime and inode of each kept entry) says whether the
  folder's files are as they were; with its subfolders' tree ids unchanged too, the
  folder's tree id is reused and nothing is read.

A folder whose stat key differs loads its detailed row (name -> stat and entry) and
rehashes only the files whose stat differs.

What cannot be read (a folder or file without permission, a path longer than the system
allows) is not an error: it goes into its folder's tree as an ``u`` entry, named with the
reason, and is never trusted from the cache, so it is tried again by every scan. A
restore leaves such a path (and all below it) as it is.

The walk is one of three parts, each with its own state: the check pass that finds the
folders whose digests differ (``_check.py``), the reader that reads, hashes and
compresses files on a pool, handed out as soon as a folder is listed so that they are
done by the time the walk comes back up to build that folder's tree (``_read.py``), and
the walk here, which builds the trees and the new cache. All three see a folder through
one listing (``_list.py``); the walk's counts are the cache module's ``Tally``.

Race rule (as git's "racy clean" and borg's): a file whose mtime or ctime is not older
than the scan's start minus the timestamp granularity could still change within the same
tick without its stat changing, so it is never trusted: its folder's stat key is saved
empty and the file's cached stat as None, and the next scan rehashes it.
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._fs import allow_deep_trees
from ..errors import ScanError, StoreError
from ..model import DIR, FILE, LARGE, UNREADABLE, Entry, Tree, encode_tree, replace_ids
from ._cache import (
    _FILES,
    _IDS,
    _LARGE,
    _LISTING,
    _NAMES,
    _PARTIAL,
    _STAT,
    _TREE,
    _UNREAD,
    _USES_INDEX,
    SKIPPED_NAMED,
    FolderCache,
    Tally,
    _Fast,
    is_linked,
    new_cache,
)
from ._check import Checker
from ._hint import to_list, with_parents
from ._ignore import IgnoreRules
from ._list import Lister, _last_tree, _links_key, _Listing, _Unreadable
from ._read import PutObject, Reader
from ._result import ScanResult

#: How close to the scan's start a timestamp may be before it is not trusted.
GRANULARITY_NS = 1_000_000_000


class Scanner:
    """One scan of one workspace into a store.

    Args:
        root: the workspace root (absolute, real).
        put: stores an object (kind, bytes, known id or None, the id of an earlier version
            to store it as a delta against, or None) and returns its id.
        cache: the folder cache of an earlier scan (None: there is none).
        dircache_get: returns the detailed rows of some folders.
        max_file_bytes: files larger than this are counted and named, not kept.
        exclude_env: leave ``.env`` and ``.env.*`` out.
        exclude: absolute paths never to scan (the store, when it lies inside the root).
        on_progress: called with the number of files read so far, every few hundred
            (a first snapshot reads every file).
        pack: compresses an object as the store keeps it, on any thread; with
            ``put_packed``, files are read, hashed and compressed on ``workers`` threads.
        put_packed: stores a batch of objects ``pack`` compressed (kind, id, size, bytes).
        workers: how many threads read files (0: none, everything on the calling one).
        forks: how many forked processes share the check pass with this one (0: none).
        get: returns a stored object's bytes; with it, a scan that lists only the
            folders a watcher named makes each folder above them from its last tree,
            without listing it (see ``_above_change``).
    """

    def __init__(
        self,
        root: str,
        *,
        put: PutObject,
        cache: FolderCache | None,
        dircache_get: Callable[[Iterable[str]], dict[str, bytes]],
        max_file_bytes: int,
        exclude_env: bool = True,
        exclude: Iterable[str] = (),
        on_progress: Callable[[int], None] | None = None,
        pack: Callable[[bytes], bytes] | None = None,
        put_packed: Callable[[Sequence[tuple[str, str, int, bytes]]], None] | None = None,
        workers: int = 0,
        forks: int = 1,
        get: Callable[[str], bytes] | None = None,
    ) -> None:
        self.root = root
        self._get = get
        self.max_file_bytes = max_file_bytes
        self.exclude_env = exclude_env
        self._put = put
        self._cache = cache
        self._dircache_get = dircache_get
        self._pack = pack
        self._put_packed = put_packed
        self._forks = forks
        self._lister = Lister(
            root, max_file_bytes=max_file_bytes, exclude_env=exclude_env, exclude=exclude
        )
        self._reader = Reader(
            root,
            max_file_bytes=max_file_bytes,
            put=put,
            pack=pack,
            put_packed=put_packed,
            workers=workers,
            on_progress=on_progress,
        )
        self._old: dict[str, _Fast] = {}
        self._new: dict[str, _Fast] = {}
        self._detail_out: dict[str, bytes | None] = {}
        #: the folders whose detailed row was read whole (see ``_detail``)
        self._detail_read: set[str] = set()
        self._tally = Tally()
        self._changed_dirs = 0
        self._racy_ns = 0
        #: detailed cache rows read ahead, by folder (the folders a scan lists again)
        self._details: dict[str, bytes] = {}
        #: folders listed ahead of the walk (a first snapshot), with their listing
        self._listed: dict[str, _Listing] = {}
        #: the new cache starts as a copy of the old (a scan that lists a few folders)
        self._bulk = False
        #: with ``_bulk``: the folders whose entry was replaced, added or dropped
        self._touched: set[str] = set()
        #: the scan lists only the folders a watcher named (and the linked ones)
        self._hinted = False
        #: with ``_hinted``: the folders rebuilt only because a folder below them changed
        self._above: set[str] = set()
        #: why this scan's result must not be used, a full scan being due, or "": a
        #: hinted scan found a hard link made or removed (a file's other names may be in
        #: folders it did not list), or a folder above a change not as its record says
        self.not_vouched = ""

    @property
    def folders(self) -> dict[str, _Fast]:
        """After a scan: every folder's cache record (its tree id among them)."""
        return self._new

    # -- entry point -----------------------------------------------------------------

    def scan(self, *, hint: Iterable[str] | None = None, recheck_index: bool = False) -> ScanResult:
        """Walk the workspace and return its root tree (blobs and trees are stored).

        With a cache from an earlier scan, a first pass only compares each folder's
        digests (the top-level folders split between this process and ``forks`` forked
        workers, since the pass is bound by ``lstat`` calls and the Python around them,
        and processes share no lock); the second pass lists again only the folders that
        differ.

        Args:
            hint: when a watcher knows which paths changed, the folders holding them are
                the only ones listed, with every folder that holds a file of several hard
                links (a write through another name is seen by no watch of its folder);
                every other folder with a cache entry is taken as it was. None walks
                everything. A hinted scan that cannot vouch for its result (a link made
                or removed, say) says why in ``not_vouched``: scan in full instead.
            recheck_index: with a hint, also list again every folder whose ignore
                decisions consulted git's index (the index changed since the hint's start).

        Raises:
            ScanError: the root is missing or cannot be listed (what cannot be read below
                it is named in the result instead).
        """
        t0 = time.monotonic()
        self._racy_ns = time.time_ns() - GRANULARITY_NS
        if self._cache is not None:
            self._old = self._cache.folders
        reader = self._reader
        # Every file is read: in processes, where each has a core of its own.
        reader.fork = not self._old and reader.workers > 0 and self._forks > 0
        try:
            st = os.lstat(self.root)
        except OSError as e:
            raise ScanError(
                f"cannot read the workspace root {self.root}: {e.strerror}", path=self.root
            ) from e
        if not stat.S_ISDIR(st.st_mode):
            raise ScanError(f"the workspace root is not a folder: {self.root}", path=self.root)
        rules = IgnoreRules.for_root(self.root, exclude_env=self.exclude_env)
        key = self._lister.root_key()
        revisit: set[str] | None = None
        try:
            if hint is not None:
                self._hinted = True
                hinted = [p.strip("/") for p in hint]
                if self._cache is not None:
                    hinted.extend(self._cache.linked)
                if recheck_index:
                    hinted.extend(rel for rel, fast in self._old.items() if fast[_USES_INDEX])
                revisit, self._above = to_list(hinted, self._old)
            elif self._old:
                checker = Checker(self._lister, self._old, self._forks)
                revisit = with_parents(checker.dirty_dirs(rules, key))
            if revisit:
                # The detailed rows of the folders listed again, in one query (a folder
                # above a change needs none: its row stays as it is).
                listed = revisit.difference(self._above)
                self._details = self._dircache_get([d for d in listed if d in self._old])
            allow_deep_trees()
            if revisit is not None and not revisit and "" in self._old:
                tree_id = self._old[""][_TREE]
                self._new = self._old
                self._tally = Tally(self._cache.sums() if self._cache is not None else None)
            else:
                if revisit is not None and "" in self._old:
                    # Every folder not listed again is taken as it was: start from all
                    # of them, replace those listed again, drop those that went away.
                    self._bulk = True
                    self._new = dict(self._old)
                tree_id = self._walk("", rules, key, False, revisit)
                if self._bulk and self._cache is not None:
                    self._tally = Tally.changed(self._cache, self._new, self._touched)
        except _Unreadable as e:
            raise ScanError(
                f"cannot read the workspace root {self.root}: {e.reason}", path=self.root
            ) from e
        finally:
            reader.stop()
        cache: dict[str, bytes | None] | None = None
        # A scan that started from the old records knows which it touched: nothing that
        # grows with the folders (a million files: 50,000) is compared or subtracted.
        if self._bulk:
            changed = bool(self._touched)
            gone = [rel for rel in self._touched if rel in self._old and rel not in self._new]
        else:
            # Not compared when nothing was listed: the records are the old ones (at a
            # million files, comparing 50,000 records with themselves took 10 ms).
            changed = self._new is not self._old and self._new != self._old
            gone = list(self._old.keys() - self._new.keys()) if changed else []
        if self._cache is None or self._cache.shards is None or changed:
            if self._cache is None:
                made, cache = new_cache(self._new)
            else:
                made, cache = self._cache.derive(self._new, self._touched if self._bulk else None)
            # This scan's sums are the new cache's: the next scan need not add them up.
            made.counts = self._tally.sums()
            for rel in gone:
                self._detail_out[rel] = None
        tally = self._tally
        return ScanResult(
            tree=tree_id,
            files=tally.files,
            skipped=tally.large[:SKIPPED_NAMED],
            skipped_count=tally.large_count,
            unreadable=tally.unread[:SKIPPED_NAMED],
            unreadable_count=tally.unread_count,
            duration_ms=int((time.monotonic() - t0) * 1000),
            changed_dirs=self._changed_dirs,
            hashed_files=reader.hashed,
            cache=cache,
            cache_rows=self._detail_out,
        )

    def _walk(
        self, rel: str, rules: IgnoreRules, key: bytes, excluded: bool, revisit: set[str] | None
    ) -> str:
        old = self._old.get(rel)
        if revisit is not None and rel not in revisit and old is not None:
            if not self._bulk:
                self._keep_subtree(rel)
            return str(old[_TREE])
        if rel in self._above and old is not None:
            made = self._above_change(rel, rules, key, excluded, revisit, old)
            if made is not None:
                return made
        got = self._listed.pop(rel, None) or self._lister.listing(rel, rules, key, excluded, old)
        reader = self._reader
        if (
            reader.workers
            and not reader.started(rel)
            and (old is None or old[_STAT] != got.stat_key or old[_LISTING] != got.listing_key)
        ):
            reader.start(rel, self._detail(rel, old), got.kept)
        prefix = rel + "/" if rel else ""
        if reader.fork:
            self._read_ahead(prefix, got, excluded)
        ids: list[str] = []
        closed: dict[str, str] = {}
        for name, _mode in got.subdirs:
            try:
                ids.append(
                    self._walk(
                        prefix + name, got.rules, got.key, excluded or name in got.partial, revisit
                    )
                )
            except _Unreadable as e:
                ids.append("")
                closed[name] = e.reason
        children = tuple(ids)
        names = tuple(name for name, _m in got.subdirs)
        if self._bulk and old is not None:
            # Subfolders gone, left out or unreadable now: their cached entries go too.
            for name in set(old[_NAMES]).difference(names).union(closed):
                self._drop_subtree(prefix + name)
        if (
            old is not None
            and old[_STAT] == got.stat_key
            and old[_IDS] == children
            and old[_LISTING] == got.listing_key
        ):
            self._new[rel] = old
            if not self._bulk:
                self._tally.add(old[_FILES], old[_LARGE], old[_UNREAD])
            return str(old[_TREE])
        return self._rebuild(rel, got, names, children, old, closed)

    def _above_change(
        self,
        rel: str,
        rules: IgnoreRules,
        key: bytes,
        excluded: bool,
        revisit: set[str] | None,
        old: _Fast,
    ) -> str | None:
        """Make a folder above a change from its last tree, without listing it.

        The watcher named no change in it: its entries are as its last tree holds them
        but for the ids of the subfolders below a change, which are replaced there and
        in its record. The rules its own ignore files add below it are read from them.

        Returns its tree's id, or None to list it after all (a racy file, hard links or
        an unreadable entry in its record; a last tree that cannot be read).
        """
        if self._get is None or not old[_STAT] or is_linked(old[_STAT]) or old[_UNREAD]:
            return None
        try:
            last = self._get(str(old[_TREE]))
        except StoreError:
            return None
        rules, key = self._lister.rules_below(rel, rules, key)
        prefix, partial = (rel + "/" if rel else ""), old[_PARTIAL]
        ids: list[str] = []
        for name in old[_NAMES]:
            try:
                ids.append(
                    self._walk(prefix + name, rules, key, excluded or name in partial, revisit)
                )
            except _Unreadable:
                # Its tree would name the subfolder as unreadable: as a full scan does.
                self.not_vouched = "a folder could not be read"
                return ""
        children = tuple(ids)
        changed = {
            name: (was, now)
            for name, was, now in zip(old[_NAMES], old[_IDS], children, strict=True)
            if was != now
        }
        if not changed:  # what changed below left every subfolder's tree as it was
            self._new[rel] = old
            if not self._bulk:
                self._tally.add(old[_FILES], old[_LARGE], old[_UNREAD])
            return str(old[_TREE])
        try:
            body = replace_ids(last, changed)
        except ValueError:
            self.not_vouched = "a folder's last tree is not as its cache record says"
            return ""
        tree_id = hashlib.sha256(body).hexdigest()
        self._put("tree", body, tree_id, str(old[_TREE]), base_bytes=lambda: last)
        self._changed_dirs += 1
        self._new[rel] = (*old[:_IDS], children, tree_id, *old[_TREE + 1 :])
        if self._bulk:
            self._touched.add(rel)
        else:
            self._tally.add(old[_FILES], old[_LARGE], old[_UNREAD])
        return tree_id

    def _read_ahead(self, prefix: str, got: _Listing, excluded: bool) -> None:
        """List a folder's new subfolders now and start their reads (a first snapshot).

        The walk waits for a folder's reads when it comes back up to build its tree: a
        folder without subfolders right after listing it. With its siblings' reads
        already started, the readers always have work while it waits.
        """
        reader = self._reader
        for name, _mode in got.subdirs:
            if reader.saturated():
                return  # enough in flight: the rest are listed as the walk comes to them
            child = prefix + name
            if child in self._old or child in self._listed:
                continue
            try:
                listed = self._lister.listing(
                    child, got.rules, got.key, excluded or name in got.partial, None
                )
            except _Unreadable:
                continue  # the walk lists it again, and names it for why
            self._listed[child] = listed
            reader.start(child, {}, listed.kept)

    def _within_limit(self, row: tuple[Any, ...]) -> bool:
        """Whether a cached row's kind agrees with this scan's size limit."""
        kind, size = row[0], row[3]
        if kind == LARGE:
            return bool(size > self.max_file_bytes)
        if kind == FILE:
            return bool(size <= self.max_file_bytes)
        return True

    def _rebuild(
        self,
        rel: str,
        got: _Listing,
        names: tuple[str, ...],
        children: tuple[str, ...],
        old: _Fast | None,
        closed: dict[str, str],
    ) -> str:
        self._changed_dirs += 1
        prefix = rel + "/" if rel else ""
        reader = self._reader
        started = reader.take(rel)
        loaded: dict[str, Any] = {}
        if started is not None:
            detail, loaded = started
        else:
            detail = self._detail(rel, old)
        tree: Tree = {}
        new_detail: dict[str, Any] = {}
        large: list[str] = []
        unread: list[tuple[str, str]] = []
        racy = False
        files = 0
        for name, st in got.kept:
            sig: tuple[int, ...] = (
                st.st_mode,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
                st.st_ino,
            )
            cached = detail.get(name)
            entry: Entry | None
            # The cache's row, when the file is as that row says, and the row's verdict on
            # its size is this scan's (the limit may have changed since).
            vouched = (
                cached
                if cached is not None and cached[0] == sig and self._within_limit(cached[1])
                else None
            )
            if vouched is not None:
                kind, mode, raw, size = vouched[1]
                entry = Entry(kind, mode, raw.hex(), size)
            else:
                # The previous version of the file, if any, is the base of a delta.
                prev = cached[1][2].hex() if cached is not None and cached[1][2] else None
                try:
                    if name in loaded:
                        found = reader.stored(loaded[name], prev)
                    else:
                        found = reader.read_entry(prefix + name, st, prev)
                except _Unreadable as e:
                    # Never trusted from the cache: the next scan tries it again.
                    tree[name] = Entry(UNREADABLE, stat.S_IMODE(st.st_mode), "", st.st_size)
                    unread.append((prefix + name, e.reason))
                    racy = True
                    continue
                if found is None:
                    continue
                entry, sig = found
            if sig[2] >= self._racy_ns or sig[3] >= self._racy_ns:
                racy = True
                saved: Any = None
            else:
                saved = sig
            tree[name] = entry
            if vouched is not None and saved is not None:
                new_detail[name] = vouched  # not racy now either: its row, as it was
            else:
                new_detail[name] = (
                    saved,
                    (entry.kind, entry.mode, bytes.fromhex(entry.oid), entry.size),
                )
            if entry.kind == LARGE:
                large.append(prefix + name)
            else:
                files += 1
        for name, reason in got.unreadable:
            tree[name] = Entry(UNREADABLE, 0, "", 0)
            unread.append((prefix + name, reason))
            racy = True
        for (name, mode), cid in zip(got.subdirs, children, strict=True):
            if name in closed:
                tree[name] = Entry(UNREADABLE, mode, "", 0)
                unread.append((prefix + name, closed[name]))
            else:
                tree[name] = Entry(DIR, mode, cid, 0)
        unread.sort()
        links = _links_key(got.kept)
        if self._hinted:
            had = old[_STAT] if old is not None and is_linked(old[_STAT]) else b""
            if links != had:
                self.not_vouched = "a hard link was made or removed"
        body = encode_tree(tree)
        if old is None and self._pack is not None and self._put_packed is not None:
            # A new folder (every folder of a first snapshot): no delta base to weigh,
            # so no query of whether it is stored (the insert keeps a stored one).
            tree_id = hashlib.sha256(body).hexdigest()
            self._put_packed([("tree", tree_id, len(body), self._pack(body))])
        elif old is None:
            tree_id = self._put("tree", body)
        else:
            made = functools.partial(_last_tree, detail, old, got.subdirs)
            tree_id = self._put("tree", body, None, old[_TREE], base_bytes=made)
        self._new[rel] = (
            got.listing_key,
            got.skip,
            got.partial,
            links or (b"" if racy else got.stat_key),
            names,
            children,
            tree_id,
            files,
            tuple(large),
            got.uses_index,
            tuple(unread),
        )
        if rel not in self._detail_read or new_detail != detail:
            # A folder rebuilt for its subfolders alone (above a change) keeps its row.
            self._detail_out[rel] = marshal.dumps(new_detail)
        if self._bulk:
            self._touched.add(rel)
        else:
            self._tally.add(files, tuple(large), tuple(unread))
        return tree_id

    def _detail(self, rel: str, old: _Fast | None) -> dict[str, Any]:
        """Return a folder's detailed cache row (name -> stat and entry), or {}."""
        if old is None:
            return {}
        raw = self._details.pop(rel) if rel in self._details else None
        if raw is None:
            raw = self._dircache_get([rel]).get(rel)
        if not raw:
            return {}
        try:
            detail: dict[str, Any] = marshal.loads(raw)
        except (ValueError, EOFError, TypeError):
            return {}
        if isinstance(detail, dict):
            self._detail_read.add(rel)
            return detail
        return {}

    def _drop_subtree(self, rel: str) -> None:
        """Drop a folder that went away (and everything below) from the new cache."""
        fast = self._old.get(rel)
        if fast is None:
            return
        if self._new.pop(rel, None) is not None:
            self._touched.add(rel)
        prefix = rel + "/" if rel else ""
        for name in fast[_NAMES]:
            self._drop_subtree(prefix + name)

    def _keep_subtree(self, rel: str) -> None:
        """Carry a folder the checks found unchanged (and everything below) into the cache."""
        fast = self._old.get(rel)
        if fast is None or rel in self._new:
            return
        self._new[rel] = fast
        self._tally.add(fast[_FILES], fast[_LARGE], fast[_UNREAD])
        prefix = rel + "/" if rel else ""
        for name in fast[_NAMES]:
            self._keep_subtree(prefix + name)
