"""Scan layer: walk the workspace into per-folder trees, rehashing only what changed.

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

Race rule (as git's "racy clean" and borg's): a file whose mtime or ctime is not older
than the scan's start minus the timestamp granularity could still change within the same
tick without its stat changing, so it is never trusted: its folder's stat key is saved
empty and the file's cached stat as None, and the next scan rehashes it.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .._fs import TMP_PREFIX
from ..errors import ScanError
from ..model import DIR, FILE, LARGE, LINK, Entry, Tree, encode_tree
from ._gitindex import GitIndex, common_git_dir, resolve_git_dir
from ._ignore import IgnoreRules

#: How close to the scan's start a timestamp may be before it is not trusted.
GRANULARITY_NS = 1_000_000_000
#: How many skipped (too large) files a snapshot names.
SKIPPED_NAMED = 20
CACHE_KEY = "dirs-v1"

#: (listing key, ignored names, stat key, child tree ids, tree id, own file count, large names)
_Fast = tuple[bytes, tuple[str, ...], bytes, tuple[str, ...], str, int, tuple[str, ...]]


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
    changed_dirs: int = 0
    hashed_files: int = 0
    new_trees: dict[str, Tree] = field(default_factory=dict)
    #: What the caller saves once the objects are committed (None: the cache is as it was).
    cache: bytes | None = None
    cache_rows: dict[str, bytes | None] = field(default_factory=dict)


class Scanner:
    """One scan of one workspace into a store.

    Args:
        root: the workspace root (absolute, real).
        put: stores an object (kind, bytes, known id or None) and returns its id.
        cache_get: returns the cached folder digests (or None).
        dircache_get: returns the detailed rows of some folders.
        max_file_bytes: files larger than this are counted and named, not kept.
        exclude_env: leave ``.env`` and ``.env.*`` out.
        exclude: absolute paths never to scan (the store, when it lies inside the root).
    """

    def __init__(
        self,
        root: str,
        *,
        put: Callable[[str, bytes, str | None], str],
        cache_get: Callable[[str], bytes | None],
        dircache_get: Callable[[Iterable[str]], dict[str, bytes]],
        max_file_bytes: int,
        exclude_env: bool = True,
        exclude: Iterable[str] = (),
    ) -> None:
        self.root = root
        self._put = put
        self._cache_get = cache_get
        self._dircache_get = dircache_get
        self.max_file_bytes = max_file_bytes
        self.exclude_env = exclude_env
        self._exclude = {os.path.relpath(p, root) for p in exclude
                         if p == root or p.startswith(root.rstrip("/") + "/")}
        self._gitindex: GitIndex | None | bool = False
        self._old: dict[str, _Fast] = {}
        self._new: dict[str, _Fast] = {}
        self._detail_out: dict[str, bytes | None] = {}
        self._large: list[str] = []
        self._large_count = 0
        self._files = 0
        self._hashed = 0
        self._changed_dirs = 0
        self._new_trees: dict[str, Tree] = {}
        self._racy_ns = 0

    # -- entry point -----------------------------------------------------------------

    def scan(self, *, hint: Iterable[str] | None = None) -> ScanResult:
        """Walk the workspace and return its root tree (blobs and trees are stored).

        Args:
            hint: when a watcher knows which paths changed, the folders holding them are
                the only ones listed; every other folder with a cache entry is taken as
                it was. None walks everything.

        Raises:
            ScanError: the root is missing or a file cannot be read.
        """
        t0 = time.monotonic()
        self._racy_ns = time.time_ns() - GRANULARITY_NS
        raw = self._cache_get(CACHE_KEY)
        if raw:
            try:
                self._old = marshal.loads(raw)
            except (ValueError, EOFError, TypeError):
                self._old = {}
        revisit: set[str] | None = None
        if hint is not None:
            revisit = {""}
            for p in hint:
                parts = p.strip("/").split("/")
                for i in range(len(parts)):
                    revisit.add("/".join(parts[:i]))
        try:
            st = os.lstat(self.root)
        except OSError as e:
            raise ScanError(f"cannot read the workspace root {self.root}: {e.strerror}",
                            path=self.root) from e
        if not stat.S_ISDIR(st.st_mode):
            raise ScanError(f"the workspace root is not a folder: {self.root}", path=self.root)
        rules = IgnoreRules.for_root(self.root, exclude_env=self.exclude_env)
        tree_id = self._walk("", rules, self._root_key(), False, revisit)
        cache: bytes | None = None
        if self._new != self._old:
            cache = marshal.dumps(self._new)
            for gone in self._old.keys() - self._new.keys():
                self._detail_out[gone] = None
        return ScanResult(
            tree=tree_id, files=self._files, skipped=self._large[:SKIPPED_NAMED],
            skipped_count=self._large_count,
            duration_ms=int((time.monotonic() - t0) * 1000),
            changed_dirs=self._changed_dirs, hashed_files=self._hashed,
            new_trees=self._new_trees, cache=cache, cache_rows=self._detail_out,
        )

    def _root_key(self) -> bytes:
        """Digest of what the root's rules depend on besides the ignore files in the tree.

        ``info/exclude`` and the index (tracked files are never ignored) are named by their
        stat, so a change to either makes every folder decide its ignores afresh.
        """
        parts = [b"env" if self.exclude_env else b"noenv"]
        gitdir = resolve_git_dir(self.root)
        places = []
        if gitdir is not None:
            places = [os.path.join(common_git_dir(gitdir), "info", "exclude"),
                      os.path.join(gitdir, "index")]
        for path in places:
            try:
                st = os.stat(path)
                parts.append(b"%s %d %d %d" % (os.fsencode(path), st.st_size, st.st_mtime_ns,
                                               st.st_ino))
            except OSError:
                parts.append(b"-")
        return _digest(*parts)

    def _index(self) -> GitIndex | None:
        if self._gitindex is False:
            self._gitindex = GitIndex.load(self.root)
        return self._gitindex  # type: ignore[return-value]

    # -- one folder ------------------------------------------------------------------

    def _walk(self, rel: str, rules: IgnoreRules, key: bytes, excluded: bool,
              revisit: set[str] | None) -> str:
        old = self._old.get(rel)
        if revisit is not None and rel not in revisit and old is not None and not excluded:
            self._keep_subtree(rel)
            return old[4]
        absdir = os.path.join(self.root, rel) if rel else self.root
        try:
            with os.scandir(absdir) as it:
                dirents = list(it)
        except FileNotFoundError:
            dirents = []
        except PermissionError as e:
            raise ScanError(f"cannot read folder {rel or '.'}: permission denied", path=rel) from e
        names = [d.name for d in dirents]
        if ".gitignore" in names or ".takebackignore" in names:
            gi = self._read_small(absdir, ".gitignore") if ".gitignore" in names else None
            ti = self._read_small(absdir, ".takebackignore") if ".takebackignore" in names else None
            rules = rules.descend(rel, gi, ti)
            key = _digest(key, os.fsencode(rel), gi or b"-", ti or b"-")
        listing_key = _digest(key, b"x" if excluded else b"", os.fsencode("\0".join(names)))
        if old is not None and old[0] == listing_key:
            ignored = set(old[1])
        else:
            ignored = self._decide(rel, dirents, rules, excluded)
        prefix = rel + "/" if rel else ""

        sigs: list[tuple[Any, ...]] = []
        kept: list[tuple[str, os.stat_result]] = []
        subdirs: list[tuple[str, int]] = []
        for d in dirents:
            name = d.name
            if name in ignored or name == ".git" or name.startswith(TMP_PREFIX):
                continue
            if prefix + name in self._exclude:
                continue
            try:
                st = d.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            m = st.st_mode
            if stat.S_ISDIR(m):
                subdirs.append((name, stat.S_IMODE(m)))
                sigs.append((name, 0, stat.S_IMODE(m)))
            elif stat.S_ISREG(m) or stat.S_ISLNK(m):
                kept.append((name, st))
                sigs.append((name, m, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
        stat_key = _digest(key, marshal.dumps(sigs))

        child_ids: list[str] = []
        for name, _mode in subdirs:
            child_ids.append(
                self._walk(prefix + name, rules, key, excluded and name in ignored, revisit)
            )
        children = tuple(child_ids)

        if old is not None and old[2] == stat_key and old[3] == children:
            self._new[rel] = (listing_key, tuple(sorted(ignored)), stat_key, children, old[4],
                              old[5], old[6])
            self._count(old[5], old[6])
            return old[4]
        return self._rebuild(rel, listing_key, ignored, stat_key, kept, subdirs, children, old)

    def _rebuild(self, rel: str, listing_key: bytes, ignored: set[str], stat_key: bytes,
                 kept: list[tuple[str, os.stat_result]], subdirs: list[tuple[str, int]],
                 children: tuple[str, ...], old: _Fast | None) -> str:
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
        racy = False
        files = 0
        for name, st in kept:
            sig = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            cached = detail.get(name)
            entry: Entry | None
            if cached is not None and cached[0] == sig:
                entry = Entry(*cached[1])
            else:
                got = self._read_entry(prefix + name, st)
                if got is None:
                    continue
                entry, sig = got
            if sig[2] >= self._racy_ns or sig[3] >= self._racy_ns:
                racy = True
                saved: Any = None
            else:
                saved = sig
            tree[name] = entry
            new_detail[name] = (saved, tuple(entry))
            if entry.kind == LARGE:
                large.append(prefix + name)
            else:
                files += 1
        for (name, mode), cid in zip(subdirs, children, strict=True):
            tree[name] = Entry(DIR, mode, cid, 0)
        data = encode_tree(tree)
        tree_id = self._put("tree", data, None)
        self._new_trees[tree_id] = tree
        self._new[rel] = (listing_key, tuple(sorted(ignored)), b"" if racy else stat_key,
                          children, tree_id, files, tuple(large))
        self._detail_out[rel] = marshal.dumps(new_detail)
        self._count(files, tuple(large))
        return tree_id

    def _count(self, files: int, large: tuple[str, ...]) -> None:
        self._files += files
        self._large_count += len(large)
        room = SKIPPED_NAMED - len(self._large)
        if room > 0 and large:
            self._large.extend(large[:room])

    def _keep_subtree(self, rel: str) -> None:
        """Carry a folder the hint says is untouched (and everything below) into the cache."""
        prefix = rel + "/" if rel else ""
        for d, fast in self._old.items():
            if d == rel or d.startswith(prefix) or rel == "":
                if d not in self._new:
                    self._new[d] = fast
                    self._count(fast[5], fast[6])

    def _decide(self, rel: str, dirents: list[os.DirEntry[str]], rules: IgnoreRules,
                excluded: bool) -> set[str]:
        """Return the names of a folder that the ignore rules leave out."""
        prefix = rel + "/" if rel else ""
        out: set[str] = set()
        for d in dirents:
            name = d.name
            path = prefix + name
            try:
                is_dir = d.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if excluded or rules.ignored(path, is_dir):
                index = self._index()
                if index is not None:
                    if is_dir and index.has_tracked_under(path):
                        continue  # walked as an excluded folder: only tracked files count
                    if not is_dir and index.is_tracked(path):
                        continue
                out.add(name)
        return out

    @staticmethod
    def _read_small(folder: str, name: str) -> bytes | None:
        try:
            with open(os.path.join(folder, name), "rb") as f:
                return f.read(1 << 20)
        except OSError:
            return None

    # -- one file --------------------------------------------------------------------

    def _read_entry(self, rel: str, st: os.stat_result) -> tuple[Entry, tuple[int, ...]] | None:
        """Hash (and store) a file or symlink; None if it vanished."""
        path = os.path.join(self.root, rel)
        sig = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.fsencode(os.readlink(path))
            except FileNotFoundError:
                return None
            except OSError as e:
                raise ScanError(f"cannot read link {rel}: {e.strerror}", path=rel) from e
            self._hashed += 1
            return Entry(LINK, 0o777, self._put("blob", target, None), len(target)), sig
        mode = stat.S_IMODE(st.st_mode)
        if st.st_size > self.max_file_bytes:
            return Entry(LARGE, mode, "", st.st_size), sig
        for _attempt in range(3):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                return None
            except PermissionError as e:
                raise ScanError(f"cannot read {rel}: permission denied", path=rel) from e
            except OSError as e:
                if e.errno == 40:  # ELOOP: it became a symlink since the listing
                    try:
                        st = os.lstat(path)
                    except FileNotFoundError:
                        return None
                    return self._read_entry(rel, st)
                raise ScanError(f"cannot read {rel}: {e.strerror}", path=rel) from e
            try:
                with os.fdopen(fd, "rb") as f:
                    data = f.read()
                    after = os.fstat(f.fileno())
            except OSError as e:
                raise ScanError(f"cannot read {rel}: {e.strerror}", path=rel) from e
            sig = (after.st_mode, after.st_size, after.st_mtime_ns, after.st_ctime_ns, after.st_ino)
            if len(data) == after.st_size and after.st_mtime_ns == st.st_mtime_ns:
                break
            # It changed while we read it: take it again, and if it keeps changing keep the
            # last read with its stat, which the race rule will not trust next time.
            st = after
        mode = stat.S_IMODE(sig[0])
        if len(data) > self.max_file_bytes:
            return Entry(LARGE, mode, "", len(data)), sig
        self._hashed += 1
        return Entry(FILE, mode, self._put("blob", data, None), len(data)), sig
