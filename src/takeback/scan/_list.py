r"""Scan layer: one folder listed, and what the ignore rules leave out of it.

Every pass of a scan sees a folder through :meth:`Lister.listing`: the check pass
(``_check.py``) for its digests alone, the walk (``_walk.py``) with its files' stats too.
A C module (``_listing.c``, built where a compiler is) lists and ``lstat``\\ s a folder
without the GIL; the Python listing here gives the same keys without it, and lists every
folder the C module hands back (an entry it cannot stat, a time that does not fit).

What a folder leaves out is decided from git's ignore rules (``_ignore.py``), git's index
(a tracked file is never ignored, ``_gitindex.py``), ``.git``, takeback's own temporary
files and the store. The decisions are kept with the folder's *listing key* in the scan's
cache, and made again only when that key changes.

What cannot be read raises :class:`_Unreadable`, with the reason in a few words: the
walk names it in its folder's tree, never an error.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import struct
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._fs import TMP_PREFIX, read_regular
from ..model import DIR, Entry, Tree, encode_tree
from ._cache import (
    _IDS,
    _LISTING,
    _NAMES,
    _PARTIAL,
    _SKIP,
    _UNREAD,
    _USES_INDEX,
    LINKED_PREFIX,
    _Fast,
)
from ._gitindex import GitIndex, common_git_dir, resolve_git_dir
from ._ignore import IgnoreRules

try:  # the C module that lists a folder for the check pass; built where a compiler is
    from ._listing import list_folder as _native_list
except ImportError:  # pragma: no cover - the same scan, listed in Python
    _native_list = None  # type: ignore[assignment]


def native_listing() -> bool:
    """Whether the C module lists folders here (it runs without the GIL)."""
    return _native_list is not None


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _StatFields(Protocol):
    """What the walk uses of a file's stat: ``os.stat_result`` or :class:`_Stat`."""

    @property
    def st_mode(self) -> int: ...
    @property
    def st_size(self) -> int: ...
    @property
    def st_mtime_ns(self) -> int: ...
    @property
    def st_ctime_ns(self) -> int: ...
    @property
    def st_ino(self) -> int: ...
    @property
    def st_nlink(self) -> int: ...


class _Stat:
    """The fields of a file's stat the walk needs, without an ``os.stat_result``.

    What a reader process is sent, and what the native listing gives.
    """

    __slots__ = ("st_ctime_ns", "st_ino", "st_mode", "st_mtime_ns", "st_nlink", "st_size")

    def __init__(
        self, mode: int, size: int, mtime_ns: int, ctime_ns: int, ino: int, nlink: int = 1
    ) -> None:
        self.st_mode = mode
        self.st_size = size
        self.st_mtime_ns = mtime_ns
        self.st_ctime_ns = ctime_ns
        self.st_ino = ino
        self.st_nlink = nlink


def _stat_fields(st: _StatFields) -> tuple[int, ...]:
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class _Unreadable(Exception):
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
    kept: list[tuple[str, _StatFields]]
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


#: The stat key's input for one entry (after its name, NUL and a kind byte), as the
#: native module writes it: a folder's mode; a file's or symlink's mode, size, mtime and
#: ctime (ns) and inode.
_DIR_SIG = struct.Struct("<I")
_FILE_SIG = struct.Struct("<IqqqQ")


def _without(sigs: bytes, skip: Sequence[str]) -> bytes:
    """Return a native stat key input without the entries named in ``skip``."""
    drop = {os.fsencode(name) for name in skip}
    out: list[bytes] = []
    at, size = 0, len(sigs)
    while at < size:
        nul = sigs.index(b"\0", at)
        end = nul + 2 + (_DIR_SIG.size if sigs[nul + 1] == 0x64 else _FILE_SIG.size)  # "d"
        if sigs[at:nul] not in drop:
            out.append(sigs[at:end])
        at = end
    return b"".join(out)


def _digest(*parts: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p)
        h.update(b"\0")
    return h.digest()


class Lister:
    """Lists one workspace's folders, deciding what each leaves out.

    Args:
        root: the workspace root (absolute, real).
        max_file_bytes: files larger than this are counted and named, not kept (part of
            the root's key: a folder cached under another limit is listed again).
        exclude_env: leave ``.env`` and ``.env.*`` out.
        exclude: absolute paths never to scan (the store, when it lies inside the root).
    """

    def __init__(
        self, root: str, *, max_file_bytes: int, exclude_env: bool, exclude: Iterable[str]
    ) -> None:
        self.root = root
        self.max_file_bytes = max_file_bytes
        self.exclude_env = exclude_env
        self._exclude = {
            os.path.relpath(p, root)
            for p in exclude
            if p == root or p.startswith(root.rstrip("/") + "/")
        }
        self._gitindex: GitIndex | None | bool = False
        self._index_sig = b"-"

    def root_key(self) -> bytes:
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

    @property
    def index_sig(self) -> bytes:
        """The signature of git's index, as :meth:`root_key` took it (``-``: none)."""
        return self._index_sig

    def _index(self) -> GitIndex | None:
        if self._gitindex is False:
            self._gitindex = GitIndex.load(self.root)
        return self._gitindex  # type: ignore[return-value]

    def listing(
        self,
        rel: str,
        rules: IgnoreRules,
        key: bytes,
        excluded: bool,
        old: _Fast | None,
        *,
        keep: bool = True,
    ) -> _Listing:
        """List one folder: its rules, what is in scope, and the digests of both.

        ``keep`` False leaves the files' stats out of the result (the check pass needs
        only the digests and the subfolders). The native module lists the folder when
        there is one; the Python listing below otherwise, or when it hands one back.
        """
        absdir = os.path.join(self.root, rel) if rel else self.root
        if _native_list is not None:
            try:
                listed = _native_list(absdir, stats=keep)
            except OSError:
                listed = None  # listed below, which says why (or that it is gone)
            if listed is not None:
                names, kinds_blob, sigs_blob, subdirs, files = listed
                folders = {name for name, _perm in subdirs}
                scope = self._scope(
                    rel,
                    absdir,
                    names,
                    lambda: [n + "/" if n in folders else n for n in names],
                    kinds_blob,
                    rules,
                    key,
                    excluded,
                    old,
                )
                skip = scope[3]
                if skip:
                    sigs_blob = _without(sigs_blob, skip)
                    subdirs = [d for d in subdirs if d[0] not in skip]
                kept: list[tuple[str, _StatFields]] = [
                    (f[0], _Stat(*f[1:])) for f in files or () if not skip or f[0] not in skip
                ]
                return _Listing(*scope, _digest(scope[1], sigs_blob), kept, subdirs, [])
        # Names from listdir and stats by lstat relative to the folder's handle: no
        # DirEntry objects to make, and a folder swapped for a symlink is not followed.
        try:
            fd = os.open(absdir, _DIR_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            fd = -1
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise _Unreadable(_why(e)) from e
            fd = -1  # a symlink now: not a folder any more, as if gone
        names = []
        stats: list[os.stat_result | OSError] = []
        if fd >= 0:
            try:
                listed_names = os.listdir(fd)
                lstat = os.lstat
                for name in listed_names:
                    try:
                        stats.append(lstat(name, dir_fd=fd))
                    except FileNotFoundError:
                        continue  # gone since the listing
                    except OSError as e:
                        stats.append(e)
                    names.append(name)
            except OSError as e:
                raise _Unreadable(_why(e)) from e
            finally:
                os.close(fd)
        # The listing names each entry with its kind: a file that becomes a folder of the
        # same name must be decided again (a "build/" pattern matches only the folder).
        kinds = [
            n + "/" if not isinstance(st, OSError) and st.st_mode & 0o170000 == 0o040000 else n
            for n, st in zip(names, stats, strict=True)
        ]
        scope = self._scope(
            rel,
            absdir,
            names,
            lambda: kinds,
            os.fsencode("\0".join(kinds)),
            rules,
            key,
            excluded,
            old,
        )
        skip = scope[3]
        # The stat key's input, entry by entry, as the native module builds it.
        sigs: list[bytes] = []
        kept = []
        subdirs = []
        unreadable: list[tuple[str, str]] = []
        fsencode = os.fsencode
        for name, st in zip(names, stats, strict=True):
            if skip and name in skip:
                continue
            if isinstance(st, OSError):
                if st.errno != errno.ENAMETOOLONG:
                    # Listed but not searchable (read without execute permission): the
                    # folder as a whole is what cannot be read.
                    raise _Unreadable(_why(st)) from st
                unreadable.append((name, _why(st)))
                sigs.append(fsencode(name) + b"\0!" + _why(st).encode() + b"\0")
                continue
            m = st.st_mode
            fmt = m & 0o170000
            if fmt == 0o040000:
                subdirs.append((name, m & 0o7777))
                sigs.append(fsencode(name) + b"\0d" + _DIR_SIG.pack(m))
            elif fmt == 0o100000 or fmt == 0o120000:
                if keep:
                    kept.append((name, st))
                fields = (m, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                try:
                    sigs.append(fsencode(name) + b"\0f" + _FILE_SIG.pack(*fields))
                except struct.error:
                    # A time past 2262 (or before 1678) does not fit in 64 bits: the same
                    # fields, written out whole (the native module hands such a folder here).
                    sigs.append(fsencode(name) + b"\0F" + b"%d %d %d %d %d\0" % fields)
        stat_key = _digest(scope[1], b"".join(sigs))
        return _Listing(*scope, stat_key, kept, subdirs, unreadable)

    def _scope(
        self,
        rel: str,
        absdir: str,
        names: list[str],
        kinds: Callable[[], list[str]],
        kinds_blob: bytes,
        rules: IgnoreRules,
        key: bytes,
        excluded: bool,
        old: _Fast | None,
    ) -> tuple[IgnoreRules, bytes, bytes, tuple[str, ...], tuple[str, ...], bool]:
        """Return a listed folder's rules, key, listing key, and what it leaves out.

        ``kinds_blob`` is the names joined by NUL, each folder's followed by ``/``;
        ``kinds`` gives them as a list, wanted only when the decisions are made afresh.
        Returns (rules, key, listing key, skip, partial, uses_index).
        """
        rules, key = self.descend(rel, absdir, names, rules, key)
        base_key = _digest(key, b"x" if excluded else b"", kinds_blob)
        # A folder whose decisions consulted git's index (it has an ignored entry, which
        # stays in scope if git tracks it) also depends on the index; others do not.
        if old is not None and old[_USES_INDEX]:
            listing_key = _digest(base_key, self._index_sig)
        else:
            listing_key = base_key
        if old is not None and old[_LISTING] == listing_key:
            skip, partial, uses_index = old[_SKIP], old[_PARTIAL], old[_USES_INDEX]
        else:
            skip, partial, uses_index = self._decide(rel, names, kinds(), rules, excluded)
            listing_key = _digest(base_key, self._index_sig) if uses_index else base_key
        return rules, key, listing_key, skip, partial, uses_index

    def descend(
        self, rel: str, absdir: str, names: Container[str], rules: IgnoreRules, key: bytes
    ) -> tuple[IgnoreRules, bytes]:
        """Return the rules and key in force below a folder holding ``names``.

        A folder's own ignore files (``.gitignore``, ``.takebackignore``) join the rules
        above it; the key says which rules those are.
        """
        if ".gitignore" in names or ".takebackignore" in names:
            gi = self._read_small(absdir, ".gitignore") if ".gitignore" in names else None
            ti = self._read_small(absdir, ".takebackignore") if ".takebackignore" in names else None
            rules = rules.descend(rel, gi, ti)
            key = _digest(key, os.fsencode(rel), gi or b"-", ti or b"-")
        return rules, key

    def rules_below(self, rel: str, rules: IgnoreRules, key: bytes) -> tuple[IgnoreRules, bytes]:
        """:meth:`descend` for a folder not listed: its ignore files are looked up by name."""
        absdir = os.path.join(self.root, rel) if rel else self.root
        present = [name for name in _IGNORE_FILES if _exists(os.path.join(absdir, name))]
        return self.descend(rel, absdir, present, rules, key)

    def _decide(
        self, rel: str, names: list[str], kinds: list[str], rules: IgnoreRules, excluded: bool
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
        for name, kind in zip(names, kinds, strict=True):
            path = prefix + name
            if name == ".git" or name.startswith(TMP_PREFIX) or path in self._exclude:
                skip.append(name)
                continue
            is_dir = kind.endswith("/")
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


#: A folder's own ignore files: their rules apply below it.
_IGNORE_FILES = (".gitignore", ".takebackignore")


def _exists(path: str) -> bool:
    """Whether a name is in its folder (whatever it is; a link is not followed)."""
    try:
        os.lstat(path)
    except OSError:
        return False
    return True


def _last_tree(detail: dict[str, Any], old: _Fast, subdirs: list[tuple[str, int]]) -> bytes | None:
    """Return a folder's last tree as its cache rows describe it (None: they cannot).

    Its files' entries are in its detailed row and its subfolders' ids in its record;
    their modes are taken from the listing, and an entry that could not be read is not
    described at all. The store uses the bytes only if they hash to the last tree's id,
    so a cache that differs in any way costs a read back, never a wrong base.
    """
    if old[_UNREAD]:
        return None
    tree: Tree = {
        name: Entry(kind, mode, raw.hex(), size)
        for name, (_sig, (kind, mode, raw, size)) in detail.items()
    }
    modes = dict(subdirs)
    for name, cid in zip(old[_NAMES], old[_IDS], strict=True):
        mode = modes.get(name)
        if mode is None or not cid:
            return None
        tree[name] = Entry(DIR, mode, cid, 0)
    return encode_tree(tree)


def _links_key(kept: Sequence[tuple[str, _StatFields]]) -> bytes:
    """The stat key a folder with files of several hard links saves (b"": it has none)."""
    pairs = sorted(
        (st.st_ino, st.st_nlink)
        for _name, st in kept
        if st.st_nlink > 1 and stat.S_ISREG(st.st_mode)
    )
    if not pairs:
        return b""
    return LINKED_PREFIX + _digest(*(b"%d %d" % p for p in pairs))
