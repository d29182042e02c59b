"""Base layer: where things live, known without loading the library.

A workspace's default store folder, and the watching service's files inside a store.
The command line's relay (``cli/_relay.py``) and the service's client
(``_service_client.py``) find the service from these alone, so a snapshot or a hook call
that the service takes costs a process start and little more.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: see takeback/__init__.py
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: The service's folder in a store (0700): its socket, pid file, log and claims.
SERVICE_DIR = "service"
SOCKET_NAME = "sock"
PID_NAME = "pid"
#: The folder of claim files: one per call handed to the service (see ``_service_client.py``).
CLAIMS_DIR = "claims"
#: Unix socket paths longer than this are reached through ``/proc/self/fd``.
SUN_PATH_MAX = 100


def default_store_path(root: str, data_dir: str) -> str:
    """Return the store folder for a workspace: one per real root path, under ``data_dir``."""
    digest = _sha256(os.fsencode(root)).hexdigest()[:16]
    base = os.path.basename(root.rstrip("/")) or "root"
    return os.path.join(data_dir, "workspaces", f"{base}-{digest}")


def recorded_root(start: str, data_dir: str) -> str | None:
    """Return the nearest folder at or above ``start`` that has a default store.

    As git finds its top folder; ``start`` is a real path. None: there is none (a new
    workspace).
    """
    cur = start
    while True:
        if os.path.exists(os.path.join(default_store_path(cur, data_dir), "store.json")):
            return cur
        parent = os.path.dirname(cur)
        if parent == cur:
            return None
        cur = parent


def via_short_path(path: str, use: Callable[[str], None]) -> None:
    """Call ``use`` (a socket's ``connect`` or ``bind``) with a Unix socket's path.

    A path longer than a socket address may be is given as ``/proc/self/fd/N/name``,
    through a handle on its folder held for the call.
    """
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        use(path)
        return
    folder, name = os.path.split(path)
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    try:
        use(f"/proc/self/fd/{fd}/{name}")
    finally:
        os.close(fd)


def foreign_folder(path: str) -> str:
    """Return why ``path`` is not a folder of this user's alone ('' when it is, or is absent).

    A store or service folder that another user owns, or that others may write, could
    hold links to anything: a process of root's following them would write or delete
    where that user chose (as ssh refuses a ``~/.ssh`` others can write).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"
    if st.st_mode & 0o170000 != 0o040000:
        return f"{path} is not a folder"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{path} may be written by others (mode {st.st_mode & 0o7777:o}; chmod go-w {path})"
    return ""


def peer_uid(sock: Any) -> int:
    """Return the user id of the process at the other end of a connected Unix socket."""
    import _socket
    import sys

    # struct ucred: pid, uid, gid, each 32 bits in the machine's byte order
    raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(raw[4:8], sys.byteorder)


def service_dir(store_path: str) -> str:
    """Return the store's folder for the service (socket, pid file)."""
    return os.path.join(store_path, SERVICE_DIR)


def _sha256(data: bytes) -> Any:
    """SHA-256 of ``data``, from CPython's own module when there is one.

    ``hashlib`` loads OpenSSL, which costs a new process about 2 ms; the relay computes
    one digest, and the built-in module gives the same one.
    """
    try:
        from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            from hashlib import sha256
    return sha256(data)
