"""Ops layer: the one restore engine, through which every write to the workspace goes.

Rewind, undo, one-file undo, redo, revert and unrevert differ only in how they build their
*moves*: for each path, the state the pre-operation snapshot saw there (``now``), the state
the operation's record says it should be in (``expect``), and the state to put there
(``write``; None removes it). The engine alone checks, journals, writes and reports, so the
rules that keep data safe live here once:

- Never write through a symlink or outside the root: every write goes through
  :class:`~takeback._fs.SafeRoot`.
- Never destroy content that no snapshot keeps. Something where the snapshot saw nothing
  (an ignored file) is in the way and left; a file over the size limit is left unless it
  is, by its SHA-256, exactly what the record says; a path the target's own ignore rules
  leave out is never removed (it was not part of that state, so the operation did not
  create it), unless the record says the operation's source created it and the disk
  holds, by hash, exactly what the record says (the store keeps those bytes). Such a
  file is removed even where the rules now ignore it (a turn that made ``gen/out.txt``
  and then ignored ``gen/``); if it changed since, it is left and named.
- Compare by content hash, never by size or time: before a path is checked against its
  record, and again just before it is written (a write that landed meanwhile is kept).
- Before a path's content is overwritten or removed, prove that the store gives it back:
  the object the pre-operation snapshot names is read and checked; a damaged one is stored
  again from the disk, or the operation is refused before anything is written.
- The journal is written before the first change and closed after the last; it names what
  a person needs to finish the operation or take it back. Temporary files carry the
  journal's tag, so whoever finishes an interrupted operation removes them.
- Folders: removed deepest first and only when empty; made parents first and private
  until filled; their final permission bits come last, deepest first. A read-only folder
  that must receive writes is opened for them and closed again after.
- What a snapshot could not read (no permission, a path too long) is never removed,
  written over or changed, nor is anything below it, whatever ``force`` says: the pre-
  operation snapshot does not hold it. Where the target could not read a path, what is
  there now stays (not restored).
- A folder to remove that holds something the operation does not remove (files out of
  scope: a tool's ignored cache inside it) stays, and the check says so (``left``): the
  plan and the operation name it alike, and it is never counted as removed.
- A bounded amount of file data is held in memory (the rest is read again when written).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._fs import TMP_PREFIX, SafeRoot
from ..errors import ConflictError, PathError, RestoreError, StoreCorruptError, StoreError
from ..model import DIR, FILE, LARGE, LINK, UNREADABLE, Entry, entry_state
from ..scan import TreeScope
from ..store import Store
from ._treediff import lookup, under

_HOLD_BYTES = 256 << 20

#: Why a path was left as it is (the ``left`` reasons, one wording each).
IN_THE_WAY = "out of scope (ignored) and in the way"
NEVER_KEPT = "over the size limit, never kept"
NOT_OF_TARGET = "out of scope at the target (ignored then), so never part of it"
UNREAD = "unreadable, never read"
HOLDS_OUT_OF_SCOPE = "a folder that holds files out of scope (ignored), so it stays"


@dataclass(frozen=True, slots=True)
class Move:
    """One path of an operation.

    Attributes:
        path: relative to the root.
        now: the entry the pre-operation snapshot holds (None: nothing in scope there).
        expect: the entry the operation's record says is there; ``now`` differing from
            it is a conflict (rewind passes ``now``: it has no record to differ from).
        write: the entry to put there (None: remove it).
        created: the record says the operation's source created the path (a turn's
            change list: nothing there before it), so ``expect`` is its own output.
    """

    path: str
    now: Entry | None
    expect: Entry | None
    write: Entry | None
    created: bool = False


@dataclass
class Checked:
    """The moves sorted into what will be written and what will not, and why."""

    todo: list[Move] = field(default_factory=list)
    #: paths already as the operation would leave them
    already: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)


@dataclass
class Applied:
    """What the engine wrote, and what it did not."""

    restored: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)
    kept_dirs: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)


def same(a: Entry | None, b: Entry | None) -> bool:
    """Whether two states of a path are the same, as every check of the engine compares.

    Two folders are the same whatever their modes (their contents are moves of their own).
    A file over the size limit is the same as another only when both SHA-256 are known
    and equal (a scan does not hash such files; the engine hashes the disk where it must).
    """
    if a is not None and b is not None and a.kind == DIR and b.kind == DIR:
        return True
    if a is not None and b is not None and a.kind == LARGE and b.kind == LARGE:
        return bool(a.oid) and a.oid == b.oid and a.mode == b.mode
    return entry_state(a) == entry_state(b)


def moves_from(
    store: Store,
    pre_tree: str,
    pairs: Iterable[tuple[str, Entry | None, Entry | None]],
    *,
    created: Callable[[str], bool] | None = None,
) -> list[Move]:
    """Return moves for (path, expect, write) triples, with ``now`` read from ``pre_tree``.

    ``created`` says of a path whether the record says the source created it.
    """
    get_tree = store.objects.get_tree
    return [
        Move(
            p,
            lookup(get_tree, pre_tree, p),
            e,
            w,
            created=created is not None and w is None and e is not None and created(p),
        )
        for p, e, w in pairs
    ]


def _kind(e: Entry) -> str:
    return "d" if e.kind == DIR else "l" if e.kind == LINK else "f"


def _hash_file(root: SafeRoot, path: str) -> str | None:
    """The SHA-256 of a regular file on disk, read in chunks (None: not a regular file)."""
    try:
        fd = root.open_file(path)
    except (OSError, PathError):
        return None
    with os.fdopen(fd, "rb") as f:
        h = hashlib.sha256()
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
        return h.hexdigest()


def _with_disk_hash(root: SafeRoot, path: str, e: Entry | None) -> Entry | None:
    """A large file's entry with the SHA-256 of what is on disk (scans leave it empty)."""
    if e is None or e.kind != LARGE or e.oid:
        return e
    digest = _hash_file(root, path)
    return e._replace(oid=digest) if digest else e


def lstat_or_none(root: SafeRoot, path: str) -> os.stat_result | None:
    """Return the entry's own stat, or None when it is absent or unreachable safely."""
    try:
        return root.lstat(path)
    except PathError:
        return None


def disk_matches(root: SafeRoot, path: str, expected: Entry | None) -> bool:
    """Return whether the workspace holds ``expected`` at ``path`` (None: nothing there).

    Files and links are compared by content hash, not by stat, so a write that landed
    after the snapshot the caller planned from is always seen. A large file is compared
    by its SHA-256 when the entry has one, else by size and mode.

    Raises:
        PathError: reaching the path would go through a symlink or a non-folder.
        OSError: the path cannot be read.
    """
    st = root.lstat(path)
    if expected is None:
        return st is None
    if st is None:
        return False
    if expected.kind == DIR:
        return stat.S_ISDIR(st.st_mode)
    if expected.kind == LINK:
        return stat.S_ISLNK(st.st_mode) and (
            hashlib.sha256(root.read(path)).hexdigest() == expected.oid
        )
    if not stat.S_ISREG(st.st_mode) or st.st_size != expected.size:
        return False
    if expected.kind == LARGE:
        return _hash_file(root, path) == expected.oid if expected.oid else True
    return _hash_file(root, path) == expected.oid


def check(
    store: Store,
    moves: Sequence[Move],
    *,
    force: bool = False,
    target_scope: TreeScope | None = None,
) -> Checked:
    """Sort moves into what will be written and what is left, reading the disk only.

    Args:
        store: the open store (its root is the workspace).
        moves: the operation's moves.
        force: a conflict is written over (it is still listed) instead of refusing.
        target_scope: the target state's own ignore rules; a path they leave out is never
            removed (None: no such rule, every removal is of something in scope).

    Returns:
        The sorted moves; ``conflicts`` non-empty means the operation must refuse unless
        ``force``.
    """
    root = SafeRoot(store.root)
    out = Checked()
    closed_now = [m.path for m in moves if m.now is not None and m.now.kind == UNREADABLE]
    closed_then = [
        m.path
        for m in moves
        if m.write is not None and m.write.kind == UNREADABLE and m.path not in closed_now
    ]
    for m in moves:
        if closed_now and under(m.path, closed_now):
            out.left[m.path] = UNREAD
            continue
        if closed_then and under(m.path, closed_then):
            out.not_restored.append(m.path)
            continue
        now = m.now
        own = False
        if m.created and now is None and m.expect is not None:
            # Out of the pre-operation snapshot's scope (ignored since), yet the source's
            # own output: removed when the disk holds exactly that, else left and named.
            try:
                there = lstat_or_none(root, m.path) is not None
                own = there and disk_matches(root, m.path, m.expect)
            except (OSError, PathError):
                there = own = False
            if own:
                now = m.expect
            elif there:
                out.left[m.path] = IN_THE_WAY
                continue
        if (
            now is not None
            and now.kind == LARGE
            and (
                (m.expect is not None and m.expect.kind == LARGE and m.expect.oid)
                or (m.write is not None and m.write.kind == LARGE and m.write.oid)
            )
        ):
            now = _with_disk_hash(root, m.path, now)
        if same(now, m.write) and not (
            now is not None and m.write is not None and now.kind == DIR and now.mode != m.write.mode
        ):
            out.already.append(m.path)
            continue
        if (
            m.write is None
            and not own
            and target_scope is not None
            and target_scope.ignored(
                m.path, is_dir=now is not None and now.kind == DIR, index=False
            )
        ):
            # Absent from the target because its rules left it out: it may have been
            # there all along, so the operation's source did not create it.
            out.left[m.path] = NOT_OF_TARGET
            continue
        if now is None:
            try:
                there = lstat_or_none(root, m.path) is not None
            except OSError:
                out.left[m.path] = UNREAD  # in a folder that cannot be entered
                continue
            if there:
                out.left[m.path] = IN_THE_WAY
                continue
        if m.write is not None and m.write.kind == LARGE:
            out.not_restored.append(m.path)  # never kept, so never written
            continue
        if now is not None and now.kind == LARGE and not same(now, m.expect):
            # Not the record's own output, and no snapshot could bring it back: a
            # conflict when the record says otherwise (a person's edit), and left as it
            # is when forced or when the source has no record of it (a rewind).
            if not force and entry_state(m.now) != entry_state(m.expect):
                out.conflicts.append(m.path)
            else:
                out.left[m.path] = NEVER_KEPT
            continue
        if not same(now, m.expect):
            out.conflicts.append(m.path)
            if not force:
                continue
        out.todo.append(Move(m.path, now, m.expect, m.write, m.created))
    _keep_full_folders(root, out)
    return out


def _keep_full_folders(root: SafeRoot, out: Checked) -> None:
    """Leave each folder removal whose folder holds what the operation does not remove.

    Deepest first, so that a folder kept keeps the folders above it. What the folder
    holds is read from the disk: an ignored file is in no move, so only the listing
    shows it.
    """
    folders = [
        m
        for m in out.todo
        if m.now is not None and m.now.kind == DIR and (m.write is None or m.write.kind != DIR)
    ]
    if not folders:
        return
    going = {
        m.path
        for m in out.todo
        if m.now is not None and (m.write is None or _kind(m.now) != _kind(m.write))
    }
    kept: set[str] = set()
    for m in sorted(folders, key=lambda m: m.path.count("/"), reverse=True):
        try:
            names = root.listdir(m.path)
        except (OSError, PathError):
            continue  # the write finds out, and says so
        if all(f"{m.path}/{name}" in going for name in names):
            continue
        going.discard(m.path)
        kept.add(m.path)
        out.left[m.path] = HOLDS_OUT_OF_SCOPE
    if kept:
        out.todo = [m for m in out.todo if m.path not in kept]


def refuse_conflicts(
    checked: Checked, describe: Callable[[str], str], *, hint: str = "force overwrites"
) -> None:
    """Raise the conflict error for a check that found conflicts (nothing is written).

    Args:
        checked: the check that found them.
        describe: the line naming a conflicting path.
        hint: what the person may do instead, in the last line's parentheses.

    Raises:
        ConflictError: always, naming each path.
    """
    lines = [describe(p) for p in checked.conflicts]
    raise ConflictError(
        "\n".join(lines) + f"\nnothing was written ({hint})", conflicts=checked.conflicts
    )


def _prove_kept(store: Store, root: SafeRoot, todo: Sequence[Move]) -> None:
    """Make sure the store gives back every content the operation will overwrite or remove.

    Raises:
        StoreCorruptError: a damaged object could not be stored again from the disk.
    """
    for m in todo:
        now = m.now
        if now is None or now.kind not in (FILE, LINK):
            continue
        try:
            store.objects.get(now.oid)
            continue
        except StoreCorruptError:
            pass
        try:
            data = root.read(m.path)
        except (OSError, PathError):
            data = b""
        if hashlib.sha256(data).hexdigest() != now.oid or not store.objects.repair("blob", data):
            raise StoreCorruptError(
                f"the store cannot give back {m.path} (object {now.oid[:12]} is damaged) "
                "and the file no longer matches it; nothing was written",
                path=store.path,
                expected=now.oid,
            )


def remove_stale_temps(store: Store, journal: dict[str, Any] | None) -> None:
    """Remove the temporary files an interrupted operation left in the workspace."""
    if not journal or not isinstance(journal.get("tmp_tag"), str):
        return
    prefix = TMP_PREFIX + journal["tmp_tag"]
    root = SafeRoot(store.root)
    folders = {p.rpartition("/")[0] for p in journal.get("planned") or () if isinstance(p, str)}
    for folder in sorted(folders):
        try:
            names = root.listdir(folder)
        except (OSError, PathError):
            continue
        for name in names:
            if name.startswith(prefix):
                try:
                    root.remove(f"{folder}/{name}" if folder else name)
                except (OSError, PathError):
                    pass


def apply(
    store: Store,
    checked: Checked,
    *,
    journal: dict[str, Any],
    pre: str | None,
    folder_modes: str | None = None,
    prune_to: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    claim: Callable[[list[tuple[str, Entry | None]]], None] | None = None,
) -> Applied:
    """Write checked moves into the workspace (the caller holds the exclusive lock).

    Args:
        store: the open store.
        checked: what :func:`check` found (conflicts in it are written over: the caller
            refuses first unless forced).
        journal: what the journal names beside the engine's own fields (the operation,
            its target, what finishes or takes it back).
        pre: the pre-operation snapshot (``rewind --to`` it takes the operation back).
        folder_modes: a tree whose folders give their modes to folders made on the way
            to a file (None: they keep the default).
        prune_to: a tree: a folder left empty by a removal and absent from it is removed
            too (None: folders are removed only as moves of their own).
        on_progress: called with (done, total) after each move.
        claim: called with (path, state now) of every move before the first write (a
            turn the writes join records them there).

    Raises:
        StoreCorruptError: the store cannot give back something the operation would
            overwrite, or cannot give what it must write; nothing was written.
        RestoreError: some writes failed part way; what was and was not done is attached.
    """
    tag = secrets.token_hex(4)
    root = SafeRoot(store.root, tmp_tag=tag)
    todo = checked.todo
    result = Applied(
        not_restored=list(checked.not_restored),
        left=dict(checked.left),
        conflicts=list(checked.conflicts),
        already=list(checked.already),
        # Folders the check found holding files out of scope stay, as folders kept do.
        kept_dirs=[p for p, why in checked.left.items() if why == HOLDS_OUT_OF_SCOPE],
    )
    _prove_kept(store, root, todo)
    # Every object to write is read and checked before the first write, so a damaged store
    # refuses the operation instead of leaving it half done.
    blobs = _hold_blobs(store, todo)
    if claim is not None:
        claim([(m.path, m.now) for m in todo])
    remove_stale_temps(store, store.read_journal())
    store.write_journal(
        {
            **journal,
            "pre": pre,
            "tmp_tag": tag,
            "started_at": time.time(),
            "planned": [m.path for m in todo],
        }
    )
    w = _Writer(store, root, result, blobs, len(todo), on_progress)
    try:
        opened = _open_parents(root, todo)
        removals = [
            m
            for m in todo
            if m.now is not None and (m.write is None or _kind(m.now) != _kind(m.write))
        ]
        removed_files = w.remove_files(removals)
        blocked = w.remove_dirs(removals)
        if prune_to is not None:
            for path in removed_files:
                _prune(root, path, prune_to, store.objects.get_tree)
        dirs = [m for m in todo if m.write is not None and m.write.kind == DIR]
        w.make_dirs(dirs)
        made = w.write_files(todo, blocked)
        w.final_modes(dirs, made, opened, folder_modes)
        store.clear_journal()
    except StoreError as e:
        # The store failed (its connection lost) after the first write: not "refused
        # before writing anything". The journal, written first, stays in the store.
        raise _lost_store(e, journal, pre, result, todo) from e
    result.restored.sort()
    result.failed = sorted(set(result.failed))
    return result


def _hold_blobs(store: Store, todo: Sequence[Move]) -> dict[str, bytes]:
    """Read (and so check) every object to write; keep up to ``_HOLD_BYTES`` of them."""
    blobs: dict[str, bytes] = {}
    held = 0
    for m in todo:
        w = m.write
        if w is not None and w.kind in (FILE, LINK) and w.oid not in blobs:
            data = store.objects.get(w.oid)
            if held + len(data) <= _HOLD_BYTES:
                blobs[w.oid] = data
                held += len(data)
    return blobs


class _Writer:
    """The writes of one :func:`apply`, phase by phase, each told in ``result``."""

    def __init__(
        self,
        store: Store,
        root: SafeRoot,
        result: Applied,
        blobs: dict[str, bytes],
        total: int,
        on_progress: Callable[[int, int], None] | None,
    ) -> None:
        self.store = store
        self.root = root
        self.result = result
        self.blobs = blobs
        self.total = total
        self.done = 0
        self.on_progress = on_progress

    def tick(self) -> None:
        """One move is done (or given up)."""
        self.done += 1
        if self.on_progress is not None:
            self.on_progress(self.done, self.total)

    def attempt(self, path: str, fn: Callable[..., object], *args: object) -> bool:
        """Do one write; a failure is named in ``failed`` and the others go on."""
        try:
            fn(*args)
            return True
        except (OSError, PathError):
            self.result.failed.append(path)
            return False

    def unchanged(self, path: str, expected: Entry | None) -> bool:
        """Whether the disk still holds what the move was checked against; else leave it."""
        try:
            if disk_matches(self.root, path, expected):
                return True
        except (OSError, PathError):
            self.result.failed.append(path)  # a symlink on the way: never written through
            return False
        if expected is None:
            self.result.left[path] = IN_THE_WAY
        else:
            self.result.left[path] = "changed during the operation"
            self.result.failed.append(path)
        return False

    def remove_files(self, removals: Sequence[Move]) -> list[str]:
        """Remove what is not a folder among ``removals``; return the paths removed."""
        removed: list[str] = []
        for m in removals:
            if m.now is not None and m.now.kind != DIR:
                if self.unchanged(m.path, m.now) and self.attempt(m.path, self.root.remove, m.path):
                    removed.append(m.path)
                    if m.write is None:
                        self.result.restored.append(m.path)
                self.tick()
        return removed

    def remove_dirs(self, removals: Sequence[Move]) -> set[str]:
        """Remove the folders among ``removals``, deepest first; return those that stay."""
        blocked: set[str] = set()
        for m in sorted(
            (m for m in removals if m.now is not None and m.now.kind == DIR),
            key=lambda m: m.path.count("/"),
            reverse=True,
        ):
            gone = False
            try:
                gone = self.root.remove_dir(m.path)
            except (OSError, PathError):
                self.result.failed.append(m.path)
            if not gone:
                # Something out of scope (an ignored file) still lives there: keep the folder.
                self.result.kept_dirs.append(m.path)
                blocked.add(m.path)
            elif m.write is None:
                self.result.restored.append(m.path + "/")
            self.tick()
        return blocked

    def make_dirs(self, dirs: Sequence[Move]) -> None:
        """Make the folders to write, parents first, private until filled."""
        for m in sorted(dirs, key=lambda m: m.path.count("/")):
            if m.now is None or m.now.kind != DIR:
                st = lstat_or_none(self.root, m.path)
                if st is not None and stat.S_ISDIR(st.st_mode):
                    continue  # already there (made for a file below it)
                if self.unchanged(m.path, None):
                    self.attempt(m.path, self.root.make_dir, m.path, 0o700)
            elif m.now.mode | 0o700 != m.now.mode:
                # Open it to us while its contents are written (the final mode comes last).
                self.attempt(m.path, self.root.chmod_dir, m.path, m.now.mode | 0o700)

    def write_files(self, todo: Sequence[Move], blocked: set[str]) -> list[str]:
        """Write every file and link; return the folders made on the way to them."""
        made: list[str] = []
        for m in todo:
            w = m.write
            if w is None or w.kind == DIR:
                continue
            if m.path in blocked:
                self.result.failed.append(m.path)  # files someone put in the folder since
                self.tick()
                continue
            same_kind = m.now is not None and _kind(m.now) == _kind(w)
            if m.path in self.result.left or not self.unchanged(
                m.path, m.now if same_kind else None
            ):
                self.tick()
                continue
            missing = _missing_parents(self.root, m.path)
            if self.attempt(m.path, _write, self.store, self.root, m.path, w, self.blobs):
                self.result.restored.append(m.path)
                made.extend(missing)
            self.tick()
        return made

    def final_modes(
        self,
        dirs: Sequence[Move],
        made: Sequence[str],
        opened: dict[str, int],
        folder_modes: str | None,
    ) -> None:
        """Give folders their final modes, deepest first (a read-only one closes last)."""
        final: dict[str, int] = {}
        if folder_modes is not None:
            for d in made:
                e = lookup(self.store.objects.get_tree, folder_modes, d)
                if e is not None and e.kind == DIR:
                    final[d] = e.mode
        for d, mode in opened.items():
            if lstat_or_none(self.root, d) is not None:  # not removed since
                final.setdefault(d, mode)
        for m in dirs:
            assert m.write is not None
            final[m.path] = m.write.mode
        targets = {m.path for m in dirs}
        for d in sorted(final, key=lambda d: d.count("/"), reverse=True):
            ok = self.attempt(d + "/", self.root.chmod_dir, d, final[d])
            if ok and d in targets:
                self.result.restored.append(d + "/")
            if d in targets:
                self.tick()


def _lost_store(
    e: StoreError,
    journal: dict[str, Any],
    pre: str | None,
    result: Applied,
    todo: Sequence[Move],
) -> RestoreError:
    """Return the error of an operation whose store failed once it had begun writing."""
    op = str(journal.get("op") or "restore")
    done = {p.rstrip("/") for p in result.restored}
    left = [m.path for m in todo if m.path not in done and m.path not in result.left]
    return RestoreError(
        f"the store failed after the {op} began writing ({e.message}); "
        f"{len(done)} path(s) written, {len(left)} not; the next command offers to "
        "finish it or take it back",
        restored=sorted(result.restored),
        failed=sorted(set(result.failed) | set(left)),
        undo_id=pre or "",
        left=dict(result.left),
    )


def not_recorded(kind: str, e: StoreError, result: Applied, pre: str) -> RestoreError:
    """Return the error of an operation that wrote its files but could not record them.

    The store failed (its connection lost) after the writes: the way back is the
    pre-operation snapshot, never "refused before writing anything".
    """
    return RestoreError(
        f"{kind} wrote its files, but the store failed before recording it ({e.message})",
        restored=result.restored,
        failed=result.failed,
        undo_id=pre,
        left=dict(result.left),
    )


def raise_if_failed(result: Applied, kind: str, pre: str | None) -> None:
    """Raise the error of an operation that failed part way.

    Raises:
        RestoreError: ``result`` lists failed paths.
    """
    if result.failed:
        left = dict(result.left)
        for d in result.kept_dirs:
            left[d + "/"] = "kept: it holds files out of scope"
        raise RestoreError(
            f"{kind} failed part way: {len(result.failed)} path(s) not written",
            restored=result.restored,
            failed=result.failed,
            undo_id=pre or "",
            left=left,
        )


def _open_parents(root: SafeRoot, todo: Sequence[Move]) -> dict[str, int]:
    """Open the existing folders that will receive writes but shut us out; return their modes.

    A folder that is read-only now and at the target still needs its files put back; the
    owner may do so (as ``chmod u+w``, write, ``chmod u-w``), so the engine does too (root
    as well: without the capability to override permissions it is shut out like anyone).
    A folder of another owner cannot be opened (its writes fail).
    """
    folders: set[str] = set()
    for m in todo:
        parts = m.path.split("/")[:-1]
        for i in range(len(parts)):
            folders.add("/".join(parts[: i + 1]))
    opened: dict[str, int] = {}
    for d in sorted(folders, key=lambda d: d.count("/")):
        st = lstat_or_none(root, d)
        if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o700 != 0o700:
            try:
                root.chmod_dir(d, mode | 0o700)
            except (OSError, PathError):
                continue
            opened[d] = mode
    return opened


def _missing_parents(root: SafeRoot, path: str) -> list[str]:
    """Return the folders above ``path`` that do not exist (a write will make them)."""
    parts = path.split("/")[:-1]
    missing = []
    for i in range(len(parts)):
        d = "/".join(parts[: i + 1])
        if lstat_or_none(root, d) is None:
            missing.append(d)
    return missing


def _prune(
    root: SafeRoot, path: str, tree: str, get_tree: Callable[[str], dict[str, Entry]]
) -> None:
    """Remove the empty folders above ``path`` that ``tree`` does not have."""
    parts = path.split("/")[:-1]
    while parts:
        d = "/".join(parts)
        if lookup(get_tree, tree, d) is not None:
            return
        try:
            if not root.remove_dir(d):
                return
        except (OSError, PathError):
            return
        parts.pop()


def _write(store: Store, root: SafeRoot, path: str, target: Entry, blobs: dict[str, bytes]) -> None:
    data = blobs.get(target.oid)
    if data is None:
        data = store.objects.get(target.oid)
    if target.kind == LINK:
        root.write_symlink(path, data)
    else:
        root.write_file(path, data, target.mode)
