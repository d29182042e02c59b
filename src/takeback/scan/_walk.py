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

Race rule (as git's "racy clean" and borg's): a file whose mtime or ctime is not older
than the scan's start minus the timestamp granularity could still change within the same
tick without its stat changing, so it is never trusted: its folder's stat key is saved
empty and the file's cached stat as None, and the next scan rehashes it.
"""

from __future__ import annotations

import errno
import hashlib
import marshal
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .._fs import TMP_PREFIX, allow_deep_trees, open_regular, read_regular
from ..errors import ScanError
from ..model import DIR, FILE, LARGE, LINK, UNREADABLE, Entry, Tree, encode_tree
from ._gitindex import GitIndex, common_git_dir, resolve_git_dir
from ._ignore import IgnoreRules

#: How close to the scan's start a timestamp may be before it is not trusted.
GRANULARITY_NS = 1_000_000_000
#: How many skipped (too large) files, and how many unreadable paths, a snapshot names.
SKIPPED_NAMED = 20
CACHE_KEY = "dirs-v6"

#: What the cache keeps of one folder (a plain tuple: marshal stores it fast):
#: listing key, names left out, ignored folders holding tracked files, stat key, subfolder
#: names, subfolder tree ids ("" for one that could not be read), tree id, own kept-file
#: count, own too-large file names, whether its ignore decisions consulted git's index,
#: own unreadable entries (path, reason).
_Fast = tuple[Any, ...]
(_LISTING, _SKIP, _PARTIAL, _STAT, _NAMES, _IDS, _TREE, _FILES, _LARGE, _USES_INDEX, _UNREAD) = (
    range(11)
)
_FAST_LEN = 11


def cached_ids(fast: bytes | None, details: Iterable[bytes]) -> tuple[set[str], set[str]]:
    """Return the tree ids and blob ids the scan cache names.

    The next scan reuses them without writing them again (a folder whose stats are
    unchanged keeps its tree id; a file whose stat is unchanged keeps its blob), so a
    store that removes objects (gc) must keep every one of them, or forget the cache.

    Args:
        fast: the cache's value under ``CACHE_KEY`` (None: there is none).
        details: every detailed row (the ``dircache`` table).
    """
    trees: set[str] = set()
    blobs: set[str] = set()
    if fast:
        try:
            folders = marshal.loads(fast)
        except (ValueError, EOFError, TypeError):
            folders = {}
        if isinstance(folders, dict):
            for v in folders.values():
                if isinstance(v, tuple) and len(v) == _FAST_LEN:
                    trees.add(str(v[_TREE]))
                    trees.update(str(i) for i in v[_IDS] if i)
    for raw in details:
        try:
            rows = marshal.loads(raw)
        except (ValueError, EOFError, TypeError):
            continue
        if not isinstance(rows, dict):
            continue
        for v in rows.values():
            try:
                kind, _mode, oid, _size = v[1]
            except (TypeError, ValueError, IndexError):
                continue
            if kind in (FILE, LINK) and oid:
                blobs.add(bytes(oid).hex())
    return trees, blobs


class _Unreadable(Exception):  # noqa: N818 - internal signal, never leaves the scan
    """A folder or file cannot be read; ``reason`` says why, in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _why(e: OSError) -> str:
    """Name why a path cannot be read, in the words ``--json`` uses."""
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.ENAMETOOLONG:
        return "path too long"
    return (e.strerror or type(e).__name__).lower()


@dataclass
class _Listing:
    """One folder as listed now: the rules in force in it, what is kept, its digests."""

    rules: IgnoreRules
    key: bytes
    listing_key: bytes
    skip: tuple[str, ...]
    partial: tuple[str, ...]
    uses_index: bool
    stat_key: bytes
    kept: list[tuple[str, os.stat_result]]
    subdirs: list[tuple[str, int]]
    #: entries whose own stat failed: name, reason
    unreadable: list[tuple[str, str]]


def _stat_sig(path: str) -> bytes:
    """Name a file by its stat (size, mtime, inode), or ``-`` when it is absent."""
    try:
        st = os.stat(path)
    except OSError:
        return b"-"
    return b"%s %d %d %d" % (os.fsencode(path), st.st_size, st.st_mtime_ns, st.st_ino)


def _with_parents(paths: Iterable[str]) -> set[str]:
    """Return the folders to list again: each named folder and every folder above it."""
    out: set[str] = set()
    for p in paths:
        while p not in out:
            out.add(p)
            if not p:
                break
            p = p.rpartition("/")[0]
    return out


def _can_fork() -> bool:
    """Fork only a single-threaded process (forking threads can deadlock the child)."""
    import threading

    return hasattr(os, "fork") and threading.active_count() == 1


def _digest(*parts: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p)
        h.update(b"\0")
    return h.digest()


@dataclass
class ScanResult:
    """What a scan found: the root tree and the counts a snapshot records."""

    tree: str
    files: int
    skipped: list[str]
    skipped_count: int
    duration_ms: int
    #: paths that could not be read (the first SKIPPED_NAMED), with why
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    unreadable_count: int = 0
    changed_dirs: int = 0
    hashed_files: int = 0
    #: What the caller saves once the objects are committed (None: the cache is as it was).
    cache: bytes | None = None
    cache_rows: dict[str, bytes | None] = field(default_factory=dict)


class Scanner:
    """One scan of one workspace into a store.

    Args:
        root: the workspace root (absolute, real).
        put: stores an object (kind, bytes, known id or None, the id of an earlier version
            to store it as a delta against, or None) and returns its id.
        cache_get: returns the cached folder digests (or None).
        dircache_get: returns the detailed rows of some folders.
        max_file_bytes: files larger than this are counted and named, not kept.
        exclude_env: leave ``.env`` and ``.env.*`` out.
        exclude: absolute paths never to scan (the store, when it lies inside the root).
        on_progress: called with the number of files read so far, every few hundred
            (a first snapshot reads every file).
    """

    def __init__(
        self,
        root: str,
        *,
        put: Callable[[str, bytes, str | None, str | None], str],
        cache_get: Callable[[str], bytes | None],
        dircache_get: Callable[[Iterable[str]], dict[str, bytes]],
        max_file_bytes: int,
        exclude_env: bool = True,
        exclude: Iterable[str] = (),
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        self.root = root
        self._put = put
        self._cache_get = cache_get
        self._dircache_get = dircache_get
        self.max_file_bytes = max_file_bytes
        self.exclude_env = exclude_env
        self._exclude = {
            os.path.relpath(p, root)
            for p in exclude
            if p == root or p.startswith(root.rstrip("/") + "/")
        }
        self._gitindex: GitIndex | None | bool = False
        self._old: dict[str, _Fast] = {}
        self._new: dict[str, _Fast] = {}
        self._detail_out: dict[str, bytes | None] = {}
        self._large: list[str] = []
        self._large_count = 0
        self._unread: list[tuple[str, str]] = []
        self._unread_count = 0
        self._files = 0
        self._hashed = 0
        self._changed_dirs = 0
        self._racy_ns = 0
        self._index_sig = b"-"
        self._on_progress = on_progress

    # -- entry point -----------------------------------------------------------------

    def scan(self, *, hint: Iterable[str] | None = None) -> ScanResult:
        """Walk the workspace and return its root tree (blobs and trees are stored).

        With a cache from an earlier scan, a first pass only compares each folder's
        digests (split between this process and one forked worker, since a walk is
        bound by ``lstat`` calls, and two processes make them twice as fast on two
        cores); the second pass lists again only the folders that differ.

        Args:
            hint: when a watcher knows which paths changed, the folders holding them are
                the only ones listed; every other folder with a cache entry is taken as
                it was. None walks everything.

        Raises:
            ScanError: the root is missing or cannot be listed (what cannot be read below
                it is named in the result instead).
        """
        t0 = time.monotonic()
        self._racy_ns = time.time_ns() - GRANULARITY_NS
        raw = self._cache_get(CACHE_KEY)
        if raw:
            try:
                self._old = marshal.loads(raw)
            except (ValueError, EOFError, TypeError):
                self._old = {}
            if any(len(v) != _FAST_LEN for v in self._old.values()):
                self._old = {}
        try:
            st = os.lstat(self.root)
        except OSError as e:
            raise ScanError(
                f"cannot read the workspace root {self.root}: {e.strerror}", path=self.root
            ) from e
        if not stat.S_ISDIR(st.st_mode):
            raise ScanError(f"the workspace root is not a folder: {self.root}", path=self.root)
        rules = IgnoreRules.for_root(self.root, exclude_env=self.exclude_env)
        key = self._root_key()
        revisit: set[str] | None = None
        try:
            if hint is not None:
                revisit = _with_parents(p.strip("/") for p in hint)
            elif self._old:
                revisit = _with_parents(self._dirty_dirs(rules, key))
            allow_deep_trees()
            if revisit is not None and not revisit and "" in self._old:
                tree_id = self._old[""][_TREE]
                self._new = self._old
                self._count_all()
            else:
                tree_id = self._walk("", rules, key, False, revisit)
        except _Unreadable as e:
            raise ScanError(
                f"cannot read the workspace root {self.root}: {e.reason}", path=self.root
            ) from e
        cache: bytes | None = None
        if self._new != self._old:
            cache = marshal.dumps(self._new)
            for gone in self._old.keys() - self._new.keys():
                self._detail_out[gone] = None
        return ScanResult(
            tree=tree_id,
            files=self._files,
            skipped=self._large[:SKIPPED_NAMED],
            skipped_count=self._large_count,
            unreadable=self._unread[:SKIPPED_NAMED],
            unreadable_count=self._unread_count,
            duration_ms=int((time.monotonic() - t0) * 1000),
            changed_dirs=self._changed_dirs,
            hashed_files=self._hashed,
            cache=cache,
            cache_rows=self._detail_out,
        )

    def _root_key(self) -> bytes:
        """Digest of what the root's rules depend on besides the ignore files in the tree.

        ``info/exclude`` is named by its stat, so a change to it makes every folder decide
        its ignores afresh. The index is not part of it: agents rewrite the index all the
        time (``git add``, ``commit``, ``checkout``), and only folders with an ignored
        entry consult it (see ``_index_sig``).
        """
        # The size limit decides what is kept: a folder cached under another limit is not
        # as it would be scanned now.
        parts = [b"env" if self.exclude_env else b"noenv", b"%d" % self.max_file_bytes]
        gitdir = resolve_git_dir(self.root)
        index_sig = b"-"
        if gitdir is not None:
            parts.append(_stat_sig(os.path.join(common_git_dir(gitdir), "info", "exclude")))
            index_sig = _stat_sig(os.path.join(gitdir, "index"))
        self._index_sig = index_sig
        return _digest(*parts)

    def _index(self) -> GitIndex | None:
        if self._gitindex is False:
            self._gitindex = GitIndex.load(self.root)
        return self._gitindex  # type: ignore[return-value]

    # -- the check pass --------------------------------------------------------------

    def _dirty_dirs(self, rules: IgnoreRules, key: bytes) -> list[str]:
        """Return the folders whose listing or stats differ from the cache (or are new)."""
        top = self._list("", rules, key, False, self._old.get(""))
        dirty: list[str] = []
        old = self._old.get("")
        if old is None or old[_LISTING] != top.listing_key or old[_STAT] != top.stat_key:
            dirty.append("")
        jobs = [(name, top.rules, top.key, name in top.partial) for name, _m in top.subdirs]
        if len(jobs) < 2 or not _can_fork():
            for job in jobs:
                self._check(*job, dirty)
            return dirty
        # Balance by the size of each subtree in the cache (folders below it).
        weight: dict[str, int] = {}
        for d in self._old:
            head = d.split("/", 1)[0]
            weight[head] = weight.get(head, 0) + 1
        mine: list[tuple[str, IgnoreRules, bytes, bool]] = []
        theirs: list[tuple[str, IgnoreRules, bytes, bool]] = []
        load = [0, 0]
        for job in sorted(jobs, key=lambda j: -weight.get(j[0], 1)):
            side = 0 if load[0] <= load[1] else 1
            (mine if side == 0 else theirs).append(job)
            load[side] += weight.get(job[0], 1)
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the worker, reported through the pipe
            code = 0
            try:
                os.close(rfd)
                found: list[str] = []
                for job in theirs:
                    self._check(*job, found)
                payload = marshal.dumps(found)
            except BaseException:
                payload = marshal.dumps(None)
                code = 1
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(wfd, view) :]
            finally:
                os._exit(code)
        os.close(wfd)
        try:
            for job in mine:
                self._check(*job, dirty)
        finally:
            chunks = []
            with os.fdopen(rfd, "rb") as r:
                while chunk := r.read(1 << 20):
                    chunks.append(chunk)
            os.waitpid(pid, 0)
        theirs_found = marshal.loads(b"".join(chunks)) if chunks else None
        if theirs_found is None:
            # The worker failed (a folder vanished under it, say): check its part here.
            theirs_found = []
            for job in theirs:
                self._check(*job, theirs_found)
        return dirty + theirs_found

    def _check(
        self, rel: str, rules: IgnoreRules, key: bytes, excluded: bool, dirty: list[str]
    ) -> None:
        old = self._old.get(rel)
        try:
            got = self._list(rel, rules, key, excluded, old)
        except _Unreadable:
            dirty.append(rel)  # never cached: its parent names it again
            return
        if old is None or old[_LISTING] != got.listing_key or old[_STAT] != got.stat_key:
            dirty.append(rel)
        prefix = rel + "/"
        for name, _mode in got.subdirs:
            self._check(prefix + name, got.rules, got.key, excluded or name in got.partial, dirty)

    # -- one folder ------------------------------------------------------------------

    def _list(
        self, rel: str, rules: IgnoreRules, key: bytes, excluded: bool, old: _Fast | None
    ) -> _Listing:
        """List one folder: its rules, what is in scope, and the digests of both."""
        absdir = os.path.join(self.root, rel) if rel else self.root
        try:
            with os.scandir(absdir) as it:
                dirents = list(it)
        except (FileNotFoundError, NotADirectoryError):
            dirents = []
        except OSError as e:
            raise _Unreadable(_why(e)) from e
        names = [d.name for d in dirents]
        # The listing names each entry with its kind: a file that becomes a folder of the
        # same name must be decided again (a "build/" pattern matches only the folder).
        kinds = [
            n + "/" if d.is_dir(follow_symlinks=False) else n
            for n, d in zip(names, dirents, strict=True)
        ]
        if ".gitignore" in names or ".takebackignore" in names:
            gi = self._read_small(absdir, ".gitignore") if ".gitignore" in names else None
            ti = self._read_small(absdir, ".takebackignore") if ".takebackignore" in names else None
            rules = rules.descend(rel, gi, ti)
            key = _digest(key, os.fsencode(rel), gi or b"-", ti or b"-")
        base_key = _digest(key, b"x" if excluded else b"", os.fsencode("\0".join(kinds)))
        # A folder whose decisions consulted git's index (it has an ignored entry, which
        # stays in scope if git tracks it) also depends on the index; others do not.
        if old is not None and old[_USES_INDEX]:
            listing_key = _digest(base_key, self._index_sig)
        else:
            listing_key = base_key
        if old is not None and old[_LISTING] == listing_key:
            skip, partial, uses_index = old[_SKIP], old[_PARTIAL], old[_USES_INDEX]
        else:
            skip, partial, uses_index = self._decide(rel, dirents, rules, excluded)
            listing_key = _digest(base_key, self._index_sig) if uses_index else base_key
        sigs: list[tuple[Any, ...]] = []
        kept: list[tuple[str, os.stat_result]] = []
        subdirs: list[tuple[str, int]] = []
        unreadable: list[tuple[str, str]] = []
        for d in dirents:
            name = d.name
            if name in skip:
                continue
            try:
                st = d.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError as e:
                if e.errno != errno.ENAMETOOLONG:
                    # Listed but not searchable (read without execute permission): the
                    # folder as a whole is what cannot be read.
                    raise _Unreadable(_why(e)) from e
                unreadable.append((name, _why(e)))
                sigs.append((name, _why(e)))
                continue
            m = st.st_mode
            fmt = m & 0o170000
            if fmt == 0o040000:
                subdirs.append((name, m & 0o7777))
                sigs.append((name, m))
            elif fmt == 0o100000 or fmt == 0o120000:
                kept.append((name, st))
                sigs.append((name, m, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
        stat_key = _digest(key, marshal.dumps(sigs))
        return _Listing(
            rules, key, listing_key, skip, partial, uses_index, stat_key, kept, subdirs, unreadable
        )

    def _walk(
        self, rel: str, rules: IgnoreRules, key: bytes, excluded: bool, revisit: set[str] | None
    ) -> str:
        old = self._old.get(rel)
        if revisit is not None and rel not in revisit and old is not None:
            self._keep_subtree(rel)
            return str(old[_TREE])
        got = self._list(rel, rules, key, excluded, old)
        prefix = rel + "/" if rel else ""
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
        if (
            old is not None
            and old[_STAT] == got.stat_key
            and old[_IDS] == children
            and old[_LISTING] == got.listing_key
        ):
            self._new[rel] = old
            self._count(old[_FILES], old[_LARGE], old[_UNREAD])
            return str(old[_TREE])
        return self._rebuild(rel, got, names, children, old, closed)

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
        detail: dict[str, Any] = {}
        if old is not None:
            raw = self._dircache_get([rel]).get(rel)
            if raw:
                try:
                    detail = marshal.loads(raw)
                except (ValueError, EOFError, TypeError):
                    detail = {}
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
            if cached is not None and cached[0] == sig:
                kind, mode, raw, size = cached[1]
                entry = Entry(kind, mode, raw.hex(), size)
            else:
                # The previous version of the file, if any, is the base of a delta.
                prev = cached[1][2].hex() if cached is not None and cached[1][2] else None
                try:
                    found = self._read_entry(prefix + name, st, prev)
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
        tree_id = self._put("tree", encode_tree(tree), None, old[_TREE] if old else None)
        self._new[rel] = (
            got.listing_key,
            got.skip,
            got.partial,
            b"" if racy else got.stat_key,
            names,
            children,
            tree_id,
            files,
            tuple(large),
            got.uses_index,
            tuple(unread),
        )
        self._detail_out[rel] = marshal.dumps(new_detail)
        self._count(files, tuple(large), tuple(unread))
        return tree_id

    def _read_one(self) -> None:
        self._hashed += 1
        if self._on_progress is not None and self._hashed % 500 == 0:
            self._on_progress(self._hashed)

    def _count(
        self, files: int, large: tuple[str, ...], unread: tuple[tuple[str, str], ...]
    ) -> None:
        self._files += files
        self._large_count += len(large)
        room = SKIPPED_NAMED - len(self._large)
        if room > 0 and large:
            self._large.extend(large[:room])
        self._unread_count += len(unread)
        room = SKIPPED_NAMED - len(self._unread)
        if room > 0 and unread:
            self._unread.extend(unread[:room])

    def _count_all(self) -> None:
        for fast in self._old.values():
            self._count(fast[_FILES], fast[_LARGE], fast[_UNREAD])

    def _keep_subtree(self, rel: str) -> None:
        """Carry a folder the checks found unchanged (and everything below) into the cache."""
        fast = self._old.get(rel)
        if fast is None or rel in self._new:
            return
        self._new[rel] = fast
        self._count(fast[_FILES], fast[_LARGE], fast[_UNREAD])
        prefix = rel + "/" if rel else ""
        for name in fast[_NAMES]:
            self._keep_subtree(prefix + name)

    def _decide(
        self, rel: str, dirents: list[os.DirEntry[str]], rules: IgnoreRules, excluded: bool
    ) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        """Return the names a folder leaves out, and its ignored folders git tracks files in.

        Left out: what the ignore rules match (unless git tracks it), ``.git``, our own
        temporary files, and the store. A folder the rules match but that holds tracked
        files is walked with every entry ignored but the tracked ones (git's rule that a
        tracked file is never ignored).
        """
        prefix = rel + "/" if rel else ""
        skip: list[str] = []
        partial: list[str] = []
        uses_index = False
        for d in dirents:
            name = d.name
            path = prefix + name
            if name == ".git" or name.startswith(TMP_PREFIX) or path in self._exclude:
                skip.append(name)
                continue
            try:
                is_dir = d.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if excluded or rules.ignored(path, is_dir):
                uses_index = True
                index = self._index()
                if index is not None:
                    if is_dir and index.has_tracked_under(path):
                        partial.append(name)
                        continue
                    if not is_dir and index.is_tracked(path):
                        continue
                skip.append(name)
        return tuple(skip), tuple(partial), uses_index

    @staticmethod
    def _read_small(folder: str, name: str) -> bytes | None:
        # Not through a symlink (as git reads in-tree ignore files), never from a FIFO.
        return read_regular(os.path.join(folder, name), limit=1 << 20)

    # -- one file --------------------------------------------------------------------

    def _read_entry(
        self, rel: str, st: os.stat_result, base: str | None = None
    ) -> tuple[Entry, tuple[int, ...]] | None:
        """Hash (and store) a file or symlink; None if it vanished.

        Raises:
            _Unreadable: it cannot be read (no permission, an I/O error).
        """
        path = os.path.join(self.root, rel)
        sig: tuple[int, ...] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.fsencode(os.readlink(path))
            except FileNotFoundError:
                return None
            except OSError as e:
                raise _Unreadable(_why(e)) from e
            self._read_one()
            return Entry(LINK, 0o777, self._put("blob", target, None, None), len(target)), sig
        mode = stat.S_IMODE(st.st_mode)
        if st.st_size > self.max_file_bytes:
            return Entry(LARGE, mode, "", st.st_size), sig
        for _attempt in range(3):
            try:
                got = open_regular(path)
            except FileNotFoundError:
                return None
            except OSError as e:
                if e.errno == errno.ELOOP:  # it became a symlink since the listing
                    try:
                        st = os.lstat(path)
                    except FileNotFoundError:
                        return None
                    return self._read_entry(rel, st, base)
                raise _Unreadable(_why(e)) from e
            if got is None:
                return None  # no longer a file (a FIFO or a folder now): not kept
            try:
                with os.fdopen(got[0], "rb") as f:
                    data = f.read()
                    after = os.fstat(f.fileno())
            except OSError as e:
                raise _Unreadable(_why(e)) from e
            sig = (after.st_mode, after.st_size, after.st_mtime_ns, after.st_ctime_ns, after.st_ino)
            if len(data) == after.st_size and after.st_mtime_ns == st.st_mtime_ns:
                break
            # It changed while we read it: take it again, and if it keeps changing keep the
            # last read with its stat, which the race rule will not trust next time.
            st = after
        mode = stat.S_IMODE(sig[0])
        if len(data) > self.max_file_bytes:
            return Entry(LARGE, mode, "", len(data)), sig
        self._read_one()
        return Entry(FILE, mode, self._put("blob", data, None, base), len(data)), sig
