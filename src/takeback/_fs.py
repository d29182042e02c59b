"""Base layer: atomic file writes for the store, and the one safe writer for the workspace.

Everything that changes a file in the workspace goes through :class:`SafeRoot`. It walks
to the parent of a path one component at a time with ``O_NOFOLLOW`` directory handles, so a
symlink anywhere on the way (even one swapped in after the plan was made) makes the write
fail instead of landing outside the root; and it refuses ``..``, absolute paths and any
``.git`` component before touching the disk.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import PathError

#: The recursion limit that walking the deepest folders a path can name needs (PATH_MAX
#: allows about 2,000 levels; walks and tree diffs recurse once per level).
_DEEP = 10_000


def allow_deep_trees() -> None:
    """Raise (never lower) the recursion limit so walks of very deep folders succeed."""
    if sys.getrecursionlimit() < _DEEP:
        sys.setrecursionlimit(_DEEP)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO that has no writer (or a device) returns at once instead of
# waiting for one. It changes nothing for reads of a regular file, the only kind kept open.
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
TMP_PREFIX = ".takeback-tmp-"


def open_regular(
    path: str, *, follow: bool = False, dir_fd: int | None = None
) -> tuple[int, os.stat_result] | None:
    """Open a file for reading if it is a regular file, never waiting on anything else.

    A FIFO, socket or device with the name is opened without blocking, seen by ``fstat``
    for what it is and closed again: a file read by name (an ignore file, git's index)
    can be replaced by one at any moment, and reading it would wait forever.

    Args:
        path: the file (relative to ``dir_fd`` when given).
        follow: follow a symlink at ``path`` itself (otherwise opening one fails with
            ``ELOOP``).
        dir_fd: a folder handle ``path`` is relative to.

    Returns:
        The open descriptor (the caller closes it) and its ``fstat``, or None when the
        entry is not a regular file.

    Raises:
        OSError: it cannot be opened (absent, a symlink when not following, no permission).
    """
    flags = _READ_FLAGS if follow else _READ_FLAGS | os.O_NOFOLLOW
    fd = os.open(path, flags) if dir_fd is None else os.open(path, flags, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def read_regular(path: str, *, limit: int = -1, follow: bool = False) -> bytes | None:
    """Return the bytes of a regular file read by name, or None for anything else.

    None when it is absent, unreadable, not a regular file (a FIFO is never waited on),
    or, unless ``follow``, a symlink.

    Args:
        path: the file.
        limit: read at most this many bytes (-1: all).
        follow: follow a symlink at ``path`` itself.
    """
    try:
        got = open_regular(path, follow=follow)
        if got is None:
            return None
        with os.fdopen(got[0], "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def fsync_dir(path: str) -> None:
    """Flush a directory's entries (a rename inside it) to disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, mode: int = 0o600, keep_mode: bool = False) -> None:
    """Write ``data`` to ``path`` so that readers see the old bytes or the new, never a mix.

    Temporary file in the same folder, fsync, rename over the target, fsync of the folder.

    Args:
        path: the file to write (a symlink there is replaced, not followed).
        data: its new bytes.
        mode: the permission bits of the new file, less the umask.
        keep_mode: give the new file the permission bits of the file it replaces (``mode``
            when there is none), exactly, not less the umask: a file a person keeps, such
            as a settings file, is rewritten, not re-created.

    Raises:
        OSError: the file cannot be written; no temporary file is left behind.
    """
    folder = os.path.dirname(path) or "."
    if keep_mode:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            pass
    tmp = os.path.join(folder, f"{TMP_PREFIX}{os.urandom(6).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            if keep_mode:
                os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    fsync_dir(folder)


def _unlink_quietly(path: str, dir_fd: int | None = None) -> None:
    try:
        os.unlink(path, dir_fd=dir_fd)
    except OSError:
        pass


def check_relpath(rel: str) -> list[str]:
    """Split a workspace-relative path into components, refusing unsafe ones.

    Raises:
        PathError: empty, absolute, with ``.``/``..`` or empty components, or inside ``.git``.
    """
    if not rel or rel.startswith("/") or "\0" in rel:
        raise PathError(f"unsafe path: {rel!r}", path=rel)
    parts = rel.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise PathError(f"unsafe path: {rel!r}", path=rel)
        if part == ".git":
            raise PathError(f"refusing to touch a .git folder: {rel}", path=rel)
    return parts


class SafeRoot:
    """Writes, removes and inspects entries under one root without following symlinks."""

    def __init__(self, root: str, *, tmp_tag: str = "") -> None:
        self.root = root
        #: names temporary files (``.takeback-tmp-<tag>…``), so that whoever finishes an
        #: interrupted restore can find and remove the ones it left
        self.tmp_prefix = TMP_PREFIX + tmp_tag

    @contextmanager
    def parent(self, rel: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """Yield a handle on the folder holding ``rel`` and the entry's own name.

        Args:
            rel: the path, relative to the root.
            create: make missing folders on the way (like ``mkdir -p``: 0777 less the umask).

        Raises:
            PathError: the path is unsafe, or a component is a symlink or not a folder.
        """
        parts = check_relpath(rel)
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for i, part in enumerate(parts[:-1]):
                try:
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o777, dir_fd=fd)
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        where = "/".join(parts[: i + 1])
                        raise PathError(
                            f"refusing to write through a symlink or non-folder: {where}",
                            path=rel,
                        ) from e
                    raise
                os.close(fd)
                fd = nfd
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def lstat(self, rel: str) -> os.stat_result | None:
        """Return the entry's own stat (never a link's target), or None when it is absent.

        Raises:
            PathError: reaching it would go through a symlink or a non-folder.
        """
        try:
            with self.parent(rel) as (fd, name):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read(self, rel: str) -> bytes:
        """Return a regular file's bytes, or a symlink's target, without following links.

        Raises:
            OSError: anything else is there (a FIFO is not waited on), or it is unreadable.
            PathError: reaching it would go through a symlink or a non-folder.
        """
        with self.parent(rel) as (pfd, name):
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                return os.fsencode(os.readlink(name, dir_fd=pfd))
            got = open_regular(name, dir_fd=pfd)
            if got is None:
                raise OSError(errno.EINVAL, "not a regular file", rel)
            with os.fdopen(got[0], "rb") as f:
                return f.read()

    def read_entry(self, rel: str, *, limit: int) -> tuple[os.stat_result, bytes | None] | None:
        """Return an entry's own stat and, for a link or a regular file, its bytes.

        Nothing is followed: a symlink on the way (a folder swapped for a link to another
        place) makes the entry unreachable (None), like an absent one; a FIFO or device
        is never opened for reading (its bytes are None). A regular file larger than
        ``limit`` bytes is not read (its bytes are None).
        """
        try:
            with self.parent(rel) as (pfd, name):
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    return st, os.fsencode(os.readlink(name, dir_fd=pfd))
                if not stat.S_ISREG(st.st_mode):
                    return st, None
                fd = os.open(
                    name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=pfd
                )
                with os.fdopen(fd, "rb") as f:
                    st = os.fstat(f.fileno())
                    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                        return st, None
                    return st, f.read()
        except (FileNotFoundError, NotADirectoryError, PathError):
            return None

    def open_file(self, rel: str) -> int:
        """Return a read-only descriptor on a regular file, never following a link.

        Raises:
            PathError: reaching it would go through a symlink.
            OSError: it is absent, or not a regular file (``EINVAL``).
        """
        with self.parent(rel) as (pfd, name):
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=pfd
            )
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OSError(errno.EINVAL, "not a regular file", rel)
            return fd

    def listdir(self, rel: str) -> list[str]:
        """Return the names in the folder ``rel`` ('' is the root), never through a link."""
        if not rel:
            fd = os.open(self.root, _DIR_FLAGS)
        else:
            with self.parent(rel) as (pfd, name):
                fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def write_file(self, rel: str, data: bytes, mode: int) -> None:
        """Put a regular file with ``data`` and permission bits ``mode`` at ``rel``.

        A symlink or file already there is replaced atomically, never written through.
        """
        with self.parent(rel, create=True) as (pfd, name):
            tmp = f"{self.tmp_prefix}{os.urandom(6).hex()}"
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=pfd,
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode & 0o7777)
                os.close(fd)
                fd = -1
                os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
            except BaseException:
                if fd >= 0:
                    os.close(fd)
                _unlink_quietly(tmp, pfd)
                raise

    def write_symlink(self, rel: str, target: bytes) -> None:
        """Put a symlink pointing at ``target`` at ``rel`` (the target is stored, not checked)."""
        with self.parent(rel, create=True) as (pfd, name):
            tmp = f"{self.tmp_prefix}{os.urandom(6).hex()}"
            os.symlink(target, tmp, dir_fd=pfd)
            try:
                os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
            except BaseException:
                _unlink_quietly(tmp, pfd)
                raise

    def make_dir(self, rel: str, mode: int) -> None:
        """Make the folder ``rel`` (and any missing parents) and give it ``mode``."""
        with self.parent(rel, create=True) as (pfd, name):
            try:
                os.mkdir(name, 0o700, dir_fd=pfd)
            except FileExistsError:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    raise
            self._chmod_dir(pfd, name, mode)

    def chmod_dir(self, rel: str, mode: int) -> None:
        """Set the permission bits of the folder ``rel``."""
        with self.parent(rel) as (pfd, name):
            self._chmod_dir(pfd, name, mode)

    @staticmethod
    def _chmod_dir(pfd: int, name: str, mode: int) -> None:
        fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        try:
            os.fchmod(fd, mode & 0o7777)
        finally:
            os.close(fd)

    def remove(self, rel: str) -> None:
        """Remove the file or symlink at ``rel``; an absent entry is not an error."""
        try:
            with self.parent(rel) as (pfd, name):
                os.unlink(name, dir_fd=pfd)
        except (FileNotFoundError, NotADirectoryError):
            pass

    def remove_dir(self, rel: str) -> bool:
        """Remove the folder ``rel`` if it is empty; return whether it is gone."""
        try:
            with self.parent(rel) as (pfd, name):
                os.rmdir(name, dir_fd=pfd)
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return False
            raise
        return True


def to_rel(root: str, path: str, *, base: str | None = None, follow: bool = True) -> str:
    """Return ``path`` relative to ``root`` ('/'-separated), refusing paths outside it.

    A relative ``path`` is taken from ``base`` (default: the root). The last component is
    not resolved, so a symlink is named as itself; the folders above it are, unless
    ``follow`` is false and the path lies inside the root as written: then it names the
    place in the workspace it spells, even where a folder on the way is now a link (what
    a restore of that path is about).

    Raises:
        PathError: the path lies outside the root.
    """
    full = path if os.path.isabs(path) else os.path.join(base or root, path)
    full = os.path.normpath(full)
    prefix = root.rstrip("/") + "/"
    if not follow and (full == root or full.startswith(prefix)):
        return "" if full == root else full[len(prefix) :]
    head, tail = os.path.split(full)
    real = os.path.join(os.path.realpath(head), tail) if tail else os.path.realpath(head)
    if real == root:
        return ""
    if not real.startswith(prefix):
        raise PathError(f"path is outside the workspace root {root}: {path}", path=path)
    return real[len(prefix) :]


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a pipe (``os.write`` may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
