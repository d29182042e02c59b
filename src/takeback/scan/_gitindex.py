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


def _entries(data: bytes, hash_size: int) -> tuple[list[bytes], int]:
    """Read the entry paths of an index, and the offset where its extensions begin.

    Raises:
        _Corrupt: When any entry is inconsistent with ``hash_size`` (or simply malformed).

    """
    signature, version, count = _HEADER.unpack_from(data, 0)
    if signature != _SIGNATURE or version not in (2, 3, 4):
        raise _Corrupt("not an index")
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


class GitIndex:
    """The paths recorded in a repository's index, for "is this tracked?" questions.

    Paths are relative to the worktree root, '/'-separated, decoded with ``os.fsdecode``.
    """

    __slots__ = ("_paths", "_sparse_dirs")

    def __init__(self, paths: Iterable[str], sparse_dirs: Iterable[str] = ()) -> None:
        """Build an index view from decoded paths.

        Args:
            paths: Tracked file paths.
            sparse_dirs: Directories a sparse index records as a whole, without trailing
                slash; every path below them counts as tracked.

        """
        self._paths: list[str] = sorted(set(paths))
        self._sparse_dirs: list[str] = sorted({d.rstrip("/") + "/" for d in sparse_dirs})

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
        git_dir = resolve_git_dir(root)
        if git_dir is None:
            return None
        read = _read_index(os.path.join(git_dir, "index"), git_dir)
        if read is None:
            return None
        files: list[str] = []
        sparse: list[str] = []
        for raw in read:
            if not raw:
                continue
            if raw.endswith(b"/"):
                sparse.append(os.fsdecode(raw))
            else:
                files.append(os.fsdecode(raw))
        return cls(files, sparse)

    def _in_sparse_dir(self, rel_path: str) -> bool:
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
        paths = self._paths
        i = bisect_left(paths, rel_path)
        if i < len(paths) and paths[i] == rel_path:
            return True
        return bool(self._sparse_dirs) and self._in_sparse_dir(rel_path)

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
        prefix = dir_rel + "/"
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
