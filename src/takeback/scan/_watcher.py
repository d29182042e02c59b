"""Scan layer: what a watching service knows: the folders changed since each mark.

A :class:`Watcher` holds an inotify instance with a watch on every folder of the
workspace (all but ``.git`` folders and the store, ignored ones included: a folder an
ignore rule leaves out today may be in scope tomorrow, and a watch too many costs only
memory). Each event names the folder whose listing or entry stats it changed; the folder
is stamped with the current *generation*. :meth:`Watcher.mark` drains the queue, hands out
the current generation as a token and starts the next one; the folders changed since a
token are those stamped later than it.

Why a drained queue is exact: the kernel queues an inotify event inside the file-system
call itself (``fsnotify`` runs before the call returns to the caller), so a change whose
call completed before the question was asked is already in the queue when the service
reads it. Reading until the queue is empty (``FIONREAD`` says 0 bytes) therefore
accounts for every change that completed before the question.

What a token cannot vouch for is said as a reason, and the caller takes a full scan:
the queue overflowed, the watch limit was reached, an ignore rule changed (a
``.gitignore`` or ``.takebackignore`` anywhere, ``info/exclude``, the ``.git`` entry at
the root, or the content of such a file reached through a symlink), or the token is
older than what is kept. A folder created and filled before its watch was added is
listed right after the watch is added, and it and every folder below it count as
changed.

Every cause of incomplete watches is looked for, and turns into a full scan with every
watch made anew (:meth:`Watcher.rebuild`), never into a guess:

- the root replaced (removed and made again, moved away, exchanged): its device and
  inode are compared with the watched one's at every question;
- a file system mounted or unmounted inside the workspace (a mount gives no inotify
  event): the mount table, ``/proc/self/mountinfo``, is polled at every question;
- a watch dropped while its folder is still in scope (``IN_IGNORED``), and the two moves
  of an exchange of folders (``RENAME_EXCHANGE``): every folder a batch of events named
  as moved, created or dropped is watched again at the end of the batch, when it is a
  folder then, whatever order its events came in.

Hard links are the scan's to handle: a write through one name of a file is reported
for that name's folder only, so every folder that holds a file with several links is
listed by every scan (see ``_cache.LINKED_PREFIX``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import select
from collections.abc import Iterable
from dataclasses import dataclass, field

from inotify_simple import INotify
from inotify_simple import flags as F

from ._gitindex import common_git_dir, resolve_git_dir

#: What a folder's watch reports: anything that changes its listing or an entry's stat.
WATCH_MASK = (
    F.CREATE
    | F.DELETE
    | F.MODIFY
    | F.ATTRIB
    | F.CLOSE_WRITE
    | F.MOVED_FROM
    | F.MOVED_TO
    | F.DELETE_SELF
    | F.MOVE_SELF
    | F.DONT_FOLLOW
    | F.ONLYDIR
)
#: The git folder and its ``info`` folder: only names matter there (index, exclude).
GIT_MASK = F.CREATE | F.DELETE | F.MODIFY | F.CLOSE_WRITE | F.MOVED_TO | F.MOVED_FROM | F.ONLYDIR
#: How many marks back a token stays good; older ones get a full scan.
KEEP_MARKS = 256
#: Above this many changed folders, an answer says "full scan" instead of naming them.
MAX_DIRS = 100_000
IGNORE_FILES = frozenset({".gitignore", ".takebackignore"})


@dataclass
class Answer:
    """What changed since a token: the folders, or why a full scan is needed.

    Attributes:
        token: the generation handed out by this mark (the next question's token).
        dirs: folders ('/'-separated, '' for the root) changed since the asked token;
            None when a full scan is needed.
        reason: why a full scan is needed ('' when ``dirs`` is given).
        index: git's index changed since the token (folders that consulted it are to
            be decided again).
        subtrees: folders without a watch, for want of watches: listed, with all below
            them, by every scan (a full scan of that part alone).
    """

    token: int
    dirs: list[str] | None
    reason: str = ""
    index: bool = False
    #: folders no watch covers (the watch limit was met): each is to be listed with
    #: every folder below it, by every scan
    subtrees: list[str] = field(default_factory=list)


@dataclass
class Stats:
    """What a watcher holds, for ``service status``."""

    watches: int
    generation: int
    changed: int
    degraded: str | None
    overflows: int
    events: int
    extra: dict[str, object] = field(default_factory=dict)


class Watcher:
    """The inotify watches of one workspace and the folders changed per generation.

    Args:
        root: the workspace root (absolute, real).
        exclude: absolute paths never watched (the store, when inside the root).
    """

    def __init__(self, root: str, *, exclude: Iterable[str] = ()) -> None:
        self.root = root
        self._exclude = {
            os.path.relpath(p, root)
            for p in exclude
            if p == root or p.startswith(root.rstrip("/") + "/")
        }
        self.ino = INotify(nonblocking=True)
        #: the root's (device, inode) when its watch was added (None: not watched)
        self._root_id: tuple[int, int] | None = None
        #: why the watches must be made anew at the next question ('' when not)
        self._rebuild_why = ""
        self.rebuilds = 0
        self._mounts = _Mounts(root)
        #: ignore files that are symlinks (their target may change with no event here):
        #: path -> digest of the content last seen
        self._linked_ignores: dict[str, bytes] = {}
        #: folders a batch of events named as moved, made or dropped: watched again after
        self._recheck: set[str] = set()
        #: folders without a watch for want of watches (each with all below it)
        self.unwatched: set[str] = set()
        self._no_room = False
        #: watches the kernel dropped since the unwatched folders were last tried again
        self._freed = 0
        self._wd_path: dict[int, str] = {}
        self._path_wd: dict[str, int] = {}
        self._git_wds: dict[int, str] = {}
        self.gen = 1
        self.floor = 1
        self.floor_reason = "the service had not started yet"
        self.dirty: dict[str, int] = {}
        self.index_gen = 0
        self.degraded: str | None = None
        self.overflows = 0
        self.events = 0

    # -- setting up ----------------------------------------------------------------------

    def start(self) -> None:
        """Watch every folder of the tree and git's folder (before any token is given)."""
        self._mounts.changed()
        self._watch_git()
        self._watch_tree("")
        self.dirty.clear()

    def close(self) -> None:
        """Drop every watch (closing the inotify instance) and the mount table."""
        self.ino.close()
        self._mounts.close()

    def rebuild(self, reason: str) -> None:
        """Make every watch anew on a new inotify instance; every token needs a full scan.

        What the old instance still had queued is dropped with it: the full scan that
        every older token now needs covers it.
        """
        self.rebuilds += 1
        self.ino.close()
        self.ino = INotify(nonblocking=True)
        self._wd_path.clear()
        self._path_wd.clear()
        self._git_wds.clear()
        self._root_id = None
        self._rebuild_why = ""
        self._recheck.clear()
        self._linked_ignores.clear()
        self.unwatched.clear()
        self.invalidate(reason)
        self._watch_git()
        self._watch_tree("")

    def _root_now(self) -> tuple[int, int] | None:
        try:
            st = os.lstat(self.root)
        except OSError:
            return None
        return (st.st_dev, st.st_ino) if st.st_mode & 0o170000 == 0o040000 else None

    def fileno(self) -> int:
        """Return the inotify descriptor (to wait on it)."""
        return int(self.ino.fileno())

    def _abs(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def _add(self, path: str, mask: int) -> int | None:
        """Add a watch; None when it cannot be (``_no_room`` says whether for want of one)."""
        self._no_room = False
        try:
            return int(self.ino.add_watch(path, mask))
        except OSError as e:
            if e.errno == errno.ENOSPC:
                # The watch limit (fs.inotify.max_user_watches): the folder and all below
                # it are left to the scan, which lists them every time.
                self._no_room = True
                return None
            if e.errno == errno.EMFILE:
                self.degraded = "the inotify instance limit was reached"
                return None
            return None  # gone, not a folder, or unreadable: its parent's events name it

    def _watch_tree(self, top: str) -> None:
        """Watch ``top`` and every folder below it, each counted as changed.

        Each folder is listed after its watch is added: what was made in it before the
        watch is found by the listing, what comes after by the watch.
        """
        stack = [top]
        while stack and self.degraded is None:
            rel = stack.pop()
            wd = self._add(self._abs(rel), WATCH_MASK)
            if wd is None:
                if self._no_room and rel not in self._exclude:
                    self.unwatched.add(rel)
                    self._mark(rel)
                continue
            self.unwatched.discard(rel)
            if rel == "":
                self._root_id = self._root_now()
            old = self._wd_path.get(wd)
            if old is not None and old != rel:
                self._path_wd.pop(old, None)
            self._wd_path[wd] = rel
            self._path_wd[rel] = wd
            self._mark(rel)
            prefix = rel + "/" if rel else ""
            try:
                with os.scandir(self._abs(rel)) as it:
                    for d in it:
                        if d.name == ".git":
                            continue
                        if d.name in IGNORE_FILES and d.is_symlink():
                            self._note_linked_ignore(prefix + d.name)
                        try:
                            if not d.is_dir(follow_symlinks=False):
                                continue
                        except OSError:
                            continue
                        child = prefix + d.name
                        if child not in self._exclude:
                            stack.append(child)
            except OSError:
                continue

    def _watch_git(self) -> None:
        for old in list(self._git_wds):
            try:
                self.ino.rm_watch(old)
            except OSError:
                pass
        self._git_wds.clear()
        gitdir = resolve_git_dir(self.root)
        if gitdir is None:
            return
        info = os.path.join(common_git_dir(gitdir), "info")
        for path, what in ((gitdir, "gitdir"), (info, "info")):
            wd = self._add(path, GIT_MASK)
            if wd is not None:
                self._git_wds[wd] = what
            elif self._no_room:
                # Without it, a change of the index or of info/exclude goes unseen.
                self.degraded = (
                    "the inotify watch limit was reached (fs.inotify.max_user_watches) "
                    "before git's folder could be watched"
                )
        exclude = os.path.join(info, "exclude")
        if os.path.islink(exclude):
            self._note_linked_ignore(exclude)

    def _note_linked_ignore(self, path: str) -> None:
        """Keep the content of an ignore file that is a symlink, to compare at questions."""
        self._linked_ignores[path] = _content_digest(self._abs(path))

    def _linked_ignore_changed(self) -> str:
        """Return an ignore file reached through a link whose content changed ('' if none)."""
        for path, seen in self._linked_ignores.items():
            now = _content_digest(self._abs(path))
            if now != seen:
                self._linked_ignores[path] = now
                return path
        return ""

    def _unwatch_under(self, top: str) -> None:
        prefix = top + "/"
        self.unwatched = {u for u in self.unwatched if u != top and not u.startswith(prefix)}
        for rel in [p for p in self._path_wd if p == top or p.startswith(prefix)]:
            wd = self._path_wd.pop(rel)
            self._wd_path.pop(wd, None)
            try:
                self.ino.rm_watch(wd)
            except OSError:
                pass

    # -- events --------------------------------------------------------------------------

    def _mark(self, rel: str) -> None:
        self.dirty[rel] = self.gen

    def invalidate(self, reason: str) -> None:
        """Make every token handed out so far need a full scan, for ``reason``."""
        self.floor = self.gen
        self.floor_reason = reason
        self.dirty.clear()

    def drain(self) -> int:
        """Read and account for every queued event; return how many there were."""
        n = 0
        while True:
            events = self.ino.read(timeout=0)
            if not events:
                return n
            n += len(events)
            self.process(events)

    def process(self, events: Iterable[tuple[int, int, int, str]]) -> None:
        """Account for inotify events (wd, mask, cookie, name).

        The folders the events name as moved, made or dropped are watched again at the
        end, once every event of the batch is accounted for: the two moves of an
        exchange drop both folders' watches before either is watched again.
        """
        self._process(events)
        recheck, self._recheck = self._recheck, set()
        for rel in sorted(recheck):
            if self.degraded is not None:
                break
            parent = rel.rpartition("/")[0]
            if rel and parent not in self._path_wd:
                continue  # its parent is not watched (moved out, or excluded)
            try:
                st = os.lstat(self._abs(rel))
            except OSError:
                continue
            if st.st_mode & 0o170000 == 0o040000:
                self._watch_tree(rel)

    def _process(self, events: Iterable[tuple[int, int, int, str]]) -> None:
        for wd, mask, _cookie, name in events:
            self.events += 1
            if mask & F.Q_OVERFLOW:
                self.overflow()
                continue
            what = self._git_wds.get(wd)
            if what is not None:
                self._git_event(wd, mask, name, what)
                continue
            rel = self._wd_path.get(wd)
            if rel is None:
                continue
            if mask & F.IGNORED:
                self._freed += 1
                del self._wd_path[wd]
                if self._path_wd.get(rel) == wd:
                    # Dropped by the kernel (its folder removed, or its file system
                    # unmounted), not by us: whatever is at that path now is watched anew.
                    del self._path_wd[rel]
                    self._mark(rel)
                    if rel == "":
                        self._rebuild_why = "the workspace folder itself was removed"
                    else:
                        self._recheck.add(rel)
                continue
            if mask & F.UNMOUNT:
                self._rebuild_why = "a file system inside the workspace was unmounted"
                continue
            if not name:
                if rel == "" and mask & (F.DELETE_SELF | F.MOVE_SELF):
                    self._rebuild_why = "the workspace folder itself was moved or removed"
                self._mark(rel)
                continue
            self._mark(rel)
            child = rel + "/" + name if rel else name
            if name in IGNORE_FILES:
                self.invalidate(f"ignore rules changed ({child})")
                if os.path.islink(self._abs(child)):
                    self._note_linked_ignore(child)
                else:
                    self._linked_ignores.pop(child, None)
            if name == ".git":
                if rel == "":
                    self.invalidate("the workspace's .git changed")
                    self._watch_git()
                continue
            if not mask & F.ISDIR or child in self._exclude:
                continue
            if mask & F.MOVED_FROM:
                # Its watches would go on reporting it under this path: drop them (a
                # removed folder's watches end by themselves, with IN_IGNORED). What is
                # at this path after the batch (the other side of an exchange) is
                # watched again then.
                self._unwatch_under(child)
                self._recheck.add(child)
            if mask & (F.CREATE | F.MOVED_TO) or (mask & F.ATTRIB and child not in self._path_wd):
                self._recheck.add(child)

    def _git_event(self, wd: int, mask: int, name: str, what: str) -> None:
        if mask & F.IGNORED:
            self._git_wds.pop(wd, None)
            self.invalidate("git's folder changed")
            return
        if what == "gitdir" and name == "info":
            self.invalidate("git's info/exclude changed")
            self._watch_git()
        elif what == "gitdir" and (name == "index" or name.startswith("sharedindex.")):
            self.index_gen = self.gen
        elif what == "info" and name == "exclude":
            self.invalidate("git's info/exclude changed")
            self._watch_git()

    def overflow(self) -> None:
        """The queue overflowed: events were lost; watch again what may lack a watch."""
        self.overflows += 1
        self.invalidate("the inotify event queue overflowed")
        self._watch_git()
        self._watch_tree("")

    def blind(self, rel: str) -> None:
        """Drop a folder's watch without a trace: a fault that audits must catch (tests)."""
        wd = self._path_wd.pop(rel, None)
        if wd is not None:
            self._wd_path.pop(wd, None)
            try:
                self.ino.rm_watch(wd)
            except OSError:
                pass

    def check(self) -> None:
        """Look for what no event reports; make the watches anew when one is found.

        The root replaced (its device and inode), a mount or unmount inside the
        workspace, a watch the kernel dropped from the root: each means watches that
        are missing or report the wrong folder.
        """
        if self._mounts.changed():
            self._rebuild_why = self._rebuild_why or (
                "a file system was mounted or unmounted inside the workspace"
            )
        if not self._rebuild_why and self._root_now() != self._root_id:
            self._rebuild_why = "the workspace folder itself was replaced"
        if self._rebuild_why and self._root_now() is not None:
            self.rebuild(self._rebuild_why)

    # -- questions -----------------------------------------------------------------------

    def mark(self, token: int | None) -> Answer:
        """Drain the queue, then answer what changed since ``token`` and hand out a new one.

        Args:
            token: a token an earlier mark of this watcher handed out (None: none).
        """
        self.drain()
        self.check()
        if self.unwatched and self._freed:
            # Watches were given back since: try the folders that had none again (each
            # counts as changed, as any folder whose watch is new).
            self._freed = 0
            for rel in sorted(self.unwatched):
                if rel in self.unwatched:
                    self.unwatched.discard(rel)
                    self._watch_tree(rel)
        linked = self._linked_ignore_changed()
        if linked:
            self.invalidate(f"ignore rules changed ({linked}, through its link)")
        new = self.gen
        self.gen += 1
        if new - KEEP_MARKS > self.floor + 64:  # now and then: it costs a pass
            self.floor = new - KEEP_MARKS
            self.floor_reason = "the last snapshot's mark is too old"
            self.dirty = {d: g for d, g in self.dirty.items() if g > self.floor}
        if self.degraded is not None:
            return Answer(new, None, self.degraded)
        if self._root_id is None:
            return Answer(new, None, "the workspace folder is not there to watch")
        if token is None:
            return Answer(new, None, "the last snapshot was not taken with this service")
        if token >= new or token < 1:
            return Answer(new, None, "the last snapshot's mark is not this service's")
        if token < self.floor:
            return Answer(new, None, self.floor_reason)
        dirs = [d for d, g in self.dirty.items() if g > token]
        if len(dirs) > MAX_DIRS:
            return Answer(new, None, f"more than {MAX_DIRS} folders changed")
        return Answer(new, sorted(dirs), "", self.index_gen > token, sorted(self.unwatched))

    def stats(self) -> Stats:
        """Return the counts ``service status`` shows."""
        return Stats(
            watches=len(self._wd_path) + len(self._git_wds),
            generation=self.gen,
            changed=len(self.dirty),
            degraded=self.degraded,
            overflows=self.overflows,
            events=self.events,
            extra={"rebuilds": self.rebuilds, "unwatched": len(self.unwatched)},
        )


def _content_digest(path: str) -> bytes:
    """Digest of a small file's content, through links (b"-" when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return hashlib.blake2b(f.read(1 << 20), digest_size=16).digest()
    except OSError:
        return b"-"


class _Mounts:
    """The mount points inside a workspace, and a cheap way to know when they change.

    ``/proc/self/mountinfo`` reports a change of the mount table to ``poll`` (as
    ``POLLPRI``); only then is it read again and compared.
    """

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "/"
        self._file = None
        self._poll: select.poll | None = None
        self._seen: frozenset[str] | None = None
        try:
            self._file = open("/proc/self/mountinfo", "rb")
            self._poll = select.poll()
            self._poll.register(self._file.fileno(), select.POLLPRI | select.POLLERR)
        except OSError:
            self._file = None

    def _inside(self) -> frozenset[str]:
        assert self._file is not None
        self._file.seek(0)
        raw = self._file.read()
        prefix = self.root + "/" if self.root != "/" else "/"
        out = set()
        for line in raw.split(b"\n"):
            fields = line.split(b" ")
            if len(fields) < 5:
                continue
            point = os.fsdecode(_unescape(fields[4]))
            if point.startswith(prefix) or point == self.root:
                out.add(point)
        return frozenset(out)

    def changed(self) -> bool:
        """Whether the mount points inside the workspace changed since the last call."""
        if self._file is None or self._poll is None:
            return False
        if self._seen is not None and not self._poll.poll(0):
            return False
        now = self._inside()
        was, self._seen = self._seen, now
        return was is not None and was != now

    def close(self) -> None:
        """Close the mount table."""
        if self._file is not None:
            self._file.close()
            self._file = None


def _unescape(field: bytes) -> bytes:
    """Undo mountinfo's octal escapes (a space is written as a backslash and 040)."""
    if b"\\" not in field:
        return field
    out = bytearray()
    i = 0
    while i < len(field):
        if field[i] == 0x5C and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(int(field[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return bytes(out)
