"""Scan layer: the set of paths git tracks, read straight from ``.git/index``.

Git never treats a tracked path as ignored, so the scan needs the index to apply ignore rules
the way git does. takeback must work where git is not installed, so the index file is parsed
here rather than asked of ``git ls-files``. Only what the scan needs is read: the path of
every entry (formats 2, 3 and 4, SHA-1 or SHA-256 object names, split indexes). Checksums,
stat data and extensions other than ``link`` are skipped, never verified.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from .._fs import read_regular

_SIGNATURE = b"DIRC"
_HEADER = struct.Struct(">4sII")
_UINT16 = struct.Struct(">H")
_UINT32 = struct.Struct(">I")
_STAT_SIZE = 40  # ctime, mtime, dev, ino, mode, uid, gid, size: ten 32-bit fields
_MODE_OFFSET = 24
_SPARSE_DIR_MODE = 0o040000
_NAME_MASK = 0x0FFF
_EXTENDED_FLAG = 0x4000
_HASH_SIZES = (20, 32)  # SHA-1, SHA-256


def resolve_git_dir(root: str) -> str | None:
    """Find the git directory of a worktree.

    Args:
        root: The workspace root.

    Returns:
        ``root/.git`` when it is a directory; the target of ``root/.git`` when that is a
        ``gitdir: PATH`` file (as in worktrees and submodules) naming an existing directory,
        relative paths being taken from ``root``; otherwise None.

    """
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    content = read_regular(dot_git, limit=4096, follow=True)
    if content is None or not content.startswith(b"gitdir: "):
        return None
    # git strips only line endings here, so a path ending in a space stays intact.
    target = os.fsdecode(content[len(b"gitdir: ") :].rstrip(b"\r\n"))
    if not target:
        return None
    target = os.path.join(root, target)
    return target if os.path.isdir(target) else None


def common_git_dir(git_dir: str) -> str:
    """Return the directory shared by all worktrees of the repository owning ``git_dir``.

    Args:
        git_dir: A git directory, as returned by :func:`resolve_git_dir`.

    Returns:
        The directory named by ``git_dir/commondir`` for a linked worktree, else ``git_dir``.

    """
    raw = read_regular(os.path.join(git_dir, "commondir"), limit=4096, follow=True)
    if raw is None:
        return git_dir
    common = os.fsdecode(raw.rstrip(b"\r\n"))
    if not common:
        return git_dir
    return os.path.join(git_dir, common)


class _Corrupt(Exception):
    """The bytes do not parse as an index with the hash size tried."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    # git's offset varint: each continuation adds one before shifting, so encodings are unique.
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, pos


def _plain_entries(data: bytes, hash_size: int, count: int) -> tuple[list[bytes], int] | None:
    """Read the paths of a version 2 or 3 index whose entries are all plain, fast.

    Plain: no extended flags, and every path shorter than the length field's limit, so
    each path is where its flags say, followed by a NUL (with the order of the paths, the
    check that tells SHA-1 from SHA-256 layouts). None at the first entry that is not
    plain, or when the paths do not check out: :func:`_entries` reads the index entry by
    entry then.
    """
    end = len(data) - hash_size
    names: list[bytes] = []
    append = names.append
    flags_of = _UINT16.unpack_from
    head = _STAT_SIZE + hash_size
    flags_at = _HEADER.size + head
    try:
        for _ in range(count):
            (flags,) = flags_of(data, flags_at)
            name_len = flags & _NAME_MASK
            if flags & _EXTENDED_FLAG or name_len == _NAME_MASK:
                return None
            name_at = flags_at + 2
            name_end = name_at + name_len
            if data[name_end]:
                return None
            append(data[name_at:name_end])
            # Entries are NUL-padded to a multiple of eight bytes.
            flags_at += (head + 2 + name_len + 8) & ~7
    except (struct.error, IndexError):
        return None
    pos = flags_at - head
    # Checked once for all: no path holds a NUL (its first one ends it), and the paths
    # come in git's order, as a wrong layout's would not.
    if pos > end or b"\0" in b"".join(names) or names != sorted(names):
        return None
    return names, pos


def _entries(data: bytes, hash_size: int) -> tuple[list[bytes], int]:
    """Read the entry paths of an index, and the offset where its extensions begin.

    Raises:
        _Corrupt: When any entry is inconsistent with ``hash_size`` (or simply malformed).

    """
    signature, version, count = _HEADER.unpack_from(data, 0)
    if signature != _SIGNATURE or version not in (2, 3, 4):
        raise _Corrupt("not an index")
    if version != 4:
        plain = _plain_entries(data, hash_size, count)
        if plain is not None:
            return plain
    end = len(data) - hash_size
    names: list[bytes] = []
    previous = b""
    pos = _HEADER.size
    try:
        for _ in range(count):
            entry = pos
            flags_at = entry + _STAT_SIZE + hash_size
            (flags,) = _UINT16.unpack_from(data, flags_at)
            name_at = flags_at + 2
            if flags & _EXTENDED_FLAG:
                if version < 3:
                    raise _Corrupt("extended flags before version 3")
                name_at += 2
            name_len = flags & _NAME_MASK
            if version == 4:
                strip, name_at = _varint(data, name_at)
                if strip > len(previous):
                    raise _Corrupt("prefix strip longer than previous path")
                nul = data.index(b"\0", name_at)
                name = previous[: len(previous) - strip] + data[name_at:nul]
                pos = nul + 1
            else:
                nul = data.index(b"\0", name_at)
                name = data[name_at:nul]
                # Entries are NUL-padded to a multiple of eight bytes.
                pos = entry + ((name_at - entry + len(name) + 8) & ~7)
            # The length field is the cross-check that tells SHA-1 from SHA-256 layouts.
            if name_len != _NAME_MASK and name_len != len(name):
                raise _Corrupt("path length does not match its flags")
            if pos > end:
                raise _Corrupt("entry runs past the end")
            previous = name
            (mode,) = _UINT32.unpack_from(data, entry + _MODE_OFFSET)
            if mode == _SPARSE_DIR_MODE and not name.endswith(b"/"):
                raise _Corrupt("sparse directory entry without a trailing slash")
            names.append(name)
    except (struct.error, ValueError, IndexError) as exc:
        raise _Corrupt(str(exc)) from exc
    return names, pos


def _shared_index_hash(data: bytes, pos: int, hash_size: int) -> bytes | None:
    """Find the ``link`` extension of a split index and return the shared index's hash."""
    end = len(data) - hash_size
    while pos + 8 <= end:
        signature = data[pos : pos + 4]
        (size,) = _UINT32.unpack_from(data, pos + 4)
        if signature == b"link" and size >= hash_size:
            return data[pos + 8 : pos + 8 + hash_size]
        pos += 8 + size
    return None


def _read_index(path: str, git_dir: str, *, follow_link: bool = True) -> list[bytes] | None:
    """Return the entry paths of the index at ``path``, or None when it is unreadable."""
    data = read_regular(path, follow=True)
    if data is None or len(data) < _HEADER.size:
        return None
    for hash_size in _HASH_SIZES:
        try:
            names, ext_at = _entries(data, hash_size)
        except _Corrupt:
            continue
        shared = _shared_index_hash(data, ext_at, hash_size) if follow_link else None
        if shared is not None and shared.strip(b"\0"):
            # Entries replacing shared ones carry empty paths; the paths live in the shared
            # index. Its deletion bitmap is not applied: keeping a path git has just removed
            # only means a file is never ignored, the safe side for a snapshot.
            shared_path = os.path.join(git_dir, "sharedindex." + shared.hex())
            base = _read_index(shared_path, git_dir, follow_link=False)
            if base is None:
                return None
            names.extend(base)
        return names
    return None


#: The index this process read last: its file's stat, and what it holds. A process that
#: scans again and again (the watching service) reads an index once per change of it.
_LAST: tuple[tuple[str, int, int, int, int], GitIndex | None] | None = None


class GitIndex:
    """The paths recorded in a repository's index, for "is this tracked?" questions.

    Paths are kept as the index holds them, bytes in git's order; questions are asked with
    paths relative to the worktree root, '/'-separated, as ``os.fsdecode`` makes them.
    """

    __slots__ = ("_paths", "_sparse_dirs")

    def __init__(self, paths: Iterable[bytes], sparse_dirs: Iterable[bytes] = ()) -> None:
        """Build an index view from the paths an index holds.

        Args:
            paths: Tracked file paths (an index's are sorted already, which sorting finds
                at once; a path in several merge stages may come more than once).
            sparse_dirs: Directories a sparse index records as a whole, without trailing
                slash; every path below them counts as tracked.

        """
        self._paths: list[bytes] = sorted(paths)
        self._sparse_dirs: list[bytes] = sorted({d.rstrip(b"/") + b"/" for d in sparse_dirs})

    @classmethod
    def load(cls, root: str) -> GitIndex | None:
        """Read the index of the git worktree at ``root``.

        Args:
            root: The workspace root.

        Returns:
            The tracked paths, or None when ``root/.git`` is neither a git directory nor a
            ``gitdir:`` file naming one, when there is no index file, or when the index cannot
            be parsed.

        """
        global _LAST
        git_dir = resolve_git_dir(root)
        if git_dir is None:
            return None
        path = os.path.join(git_dir, "index")
        try:
            st = os.stat(path)
        except OSError:
            return None
        # git replaces its index whole (a new file renamed over it), never in place: a
        # file with the same stat is the same index. Stat first, then read: what is kept
        # is never older than the stat it is kept under.
        sig = (path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        last = _LAST
        if last is not None and last[0] == sig:
            return last[1]
        read = _read_index(path, git_dir)
        index = None
        if read is not None:
            # Most indexes hold neither empty paths (a split index's replaced entries) nor
            # sparse folders ("dir/"): one search of their joined paths tells.
            if b"/\n" in b"\n".join(read) + b"\n":
                sparse = [raw for raw in read if raw.endswith(b"/")]
                files = [raw for raw in read if raw and not raw.endswith(b"/")]
            else:
                sparse = []
                files = [raw for raw in read if raw] if b"" in read else read
            index = cls(files, sparse)
        _LAST = (sig, index)
        return index

    def _in_sparse_dir(self, rel_path: bytes) -> bool:
        # Sparse directories never nest, so only the greatest one not after rel_path can
        # be its ancestor.
        i = bisect_right(self._sparse_dirs, rel_path)
        return i > 0 and rel_path.startswith(self._sparse_dirs[i - 1])

    def is_tracked(self, rel_path: str) -> bool:
        """Tell whether git tracks the file ``rel_path``.

        Args:
            rel_path: Path relative to the root, '/'-separated, no leading slash.

        Returns:
            True when the index has an entry for the path (in any merge stage), or the path
            lies inside a directory a sparse index collapsed into one entry.

        """
        raw = os.fsencode(rel_path)
        paths = self._paths
        i = bisect_left(paths, raw)
        if i < len(paths) and paths[i] == raw:
            return True
        return bool(self._sparse_dirs) and self._in_sparse_dir(raw)

    def has_tracked_under(self, dir_rel: str) -> bool:
        """Tell whether git tracks anything inside the directory ``dir_rel``.

        Args:
            dir_rel: Directory relative to the root; '' is the root itself.

        Returns:
            True when some tracked path starts with ``dir_rel + '/'`` (for the root: when
            anything is tracked at all).

        """
        if not dir_rel:
            return bool(self._paths) or bool(self._sparse_dirs)
        prefix = os.fsencode(dir_rel) + b"/"
        paths = self._paths
        i = bisect_left(paths, prefix)
        if i < len(paths) and paths[i].startswith(prefix):
            return True
        if not self._sparse_dirs:
            return False
        sparse = self._sparse_dirs
        i = bisect_left(sparse, prefix)
        if i < len(sparse) and sparse[i].startswith(prefix):
            return True
        return self._in_sparse_dir(prefix)


__all__ = ["GitIndex", "common_git_dir", "resolve_git_dir"]
