"""Ops layer: turns, their change lists, and undo, redo, revert and unrevert.

A turn's change list is built from what is known of each file it affected: the state a
file tool's ``touch`` kept before the first write, or the state before a command that
changed it (taken from the snapshots around the command). Edits nobody attributed to the
turn (a person's, in another file) are never part of it, so undo leaves them alone.

Every undo, redo, revert and unrevert decides and writes under the store's exclusive lock
(two of them at once cannot both take back the same turn), checks every file first, writes
nothing on a conflict, takes a snapshot before writing, and is recorded in the ``ops``
table, in the same transaction as the turn states it changes.

Undo and revert while a turn is still open (a design choice): the open turn is ended
first, its change list made as at any end, and it is then the last turn, the one a plain
undo takes back. With hooks, an interrupted reply (the agent was stopped and its Stop hook
never ran) leaves its turn open, and the person who types ``takeback undo`` means that
reply. Undoing the last *ended* turn instead would skip the newest changes (and usually
conflict with them); refusing would only make the person run ``turn end`` first, to the
same effect. A harness that goes on writing in that turn afterwards is not recorded in it:
a touch of a turn that is no longer open is ignored (the snapshots still hold the writes).
Redo and unrevert never need to end a turn: opening it already made them final.

The op stack: each undo and revert is an ``active`` op until redo (or unrevert) takes the
newest active one, or a new turn makes every active op ``final``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._fs import SafeRoot, check_relpath, open_regular, read_regular
from ..errors import ConflictError, PathError, RestoreError, UsageError
from ..model import (
    DIR,
    FILE,
    LARGE,
    LINK,
    UNREADABLE,
    Change,
    Entry,
    SnapshotInfo,
    decode_state,
    encode_state,
    entry_state,
)
from ..store import Store
from ._patch import line_counts
from ._restore import disk_matches, lstat_or_none
from ._snapshot import Options, take
from ._treediff import diff_trees, lookup

if TYPE_CHECKING:
    from ..store._meta import MetaStore


@dataclass
class TurnOpResult:
    """What an undo, redo, revert or unrevert did.

    Attributes:
        kind: ``undo``, ``redo``, ``revert`` or ``unrevert``.
        turns: the turns it took back or brought back.
        pre: the snapshot taken before it wrote anything (``rewind --to`` it to go back).
        restored: the paths it wrote or removed.
        not_restored: paths whose state to write was never kept (over the size limit).
        conflicts: paths changed since the record that ``force`` overwrote.
        left: paths left as they are, and why: something out of scope (an ignored file)
            or never kept (over the size limit) is in the way; ``force`` does not write
            over these, since no snapshot could bring them back.
        nothing: true when there was nothing to do (nothing was written, no snapshot).
    """

    kind: str
    turns: list[int]
    pre: str | None
    restored: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    nothing: bool = False
    left: dict[str, str] = field(default_factory=dict)


# -- reading one path ----------------------------------------------------------------


def read_state(store: Store, opts: Options, rel: str, *, text: str | None = None
               ) -> Entry | None:
    """Return the current state of one path as an entry, storing its bytes.

    A file over the size limit is not stored, but its SHA-256 is kept in the entry's
    ``oid`` (scans leave it empty): a turn that rewrote a large file in place, same size
    and mode, is still seen to have changed it.

    Args:
        store: the open store (the bytes are put in its objects, not yet flushed).
        opts: the workspace's options (the size limit).
        rel: the path, relative to the root.
        text: replaces the bytes on disk (an editor's unsaved buffer); a UTF-8 byte-order
            mark is kept exactly as the file on disk has it (or has not).

    Returns:
        The entry, or None when nothing (or something that is not a file, link or
        folder) is there; a file that may not be read is an ``UNREADABLE`` entry.
    """
    path = os.path.join(store.root, rel)
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    if text is not None:
        disk = b""
        if st is not None and stat.S_ISREG(st.st_mode):
            disk = read_regular(path, limit=3) or b""
        data = text.encode("utf-8", "surrogateescape")
        bom = b"\xef\xbb\xbf"
        if disk.startswith(bom) and not data.startswith(bom):
            data = bom + data
        elif not disk.startswith(bom) and data.startswith(bom) and st is not None:
            data = data[len(bom):]
        mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else 0o644
        if len(data) > opts.max_file_bytes:
            return Entry(LARGE, mode, hashlib.sha256(data).hexdigest(), len(data))
        return Entry(FILE, mode, store.objects.put("blob", data), len(data))
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        target = os.fsencode(os.readlink(path))
        return Entry(LINK, 0o777, store.objects.put("blob", target), len(target))
    if stat.S_ISDIR(st.st_mode):
        return Entry(DIR, stat.S_IMODE(st.st_mode), "", 0)
    if not stat.S_ISREG(st.st_mode):
        return None
    mode = stat.S_IMODE(st.st_mode)
    try:
        got = open_regular(path)
    except PermissionError:
        return Entry(UNREADABLE, mode, "", st.st_size)
    if got is None:
        return None  # no longer a file (a FIFO is never waited on)
    with os.fdopen(got[0], "rb") as f:
        if st.st_size > opts.max_file_bytes:
            h = hashlib.sha256()
            size = 0
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
            return Entry(LARGE, mode, h.hexdigest(), size)
        data = f.read()
    if len(data) > opts.max_file_bytes:
        # It grew between the stat and the read.
        return Entry(LARGE, mode, hashlib.sha256(data).hexdigest(), len(data))
    return Entry(FILE, mode, store.objects.put("blob", data), len(data))


# -- turns ---------------------------------------------------------------------------


def open_turn(store: Store, session: str) -> int | None:
    """Return the number of the session's open turn, if any."""
    for n, _label, _b, _a, state in reversed(store.meta.turn_rows(session)):
        if state == "open":
            return int(n)
    return None


def begin_turn(store: Store, session: str, label: str, before: str | None) -> int:
    """Open a new turn; redo and unrevert stop being possible (a new turn makes them final).

    Returns:
        The new turn's number.
    """
    meta = store.meta
    with meta.tx():
        rows = meta.turn_rows(session)
        n = (int(rows[-1][0]) + 1) if rows else 1
        meta.add_turn(session, n, label, before, time.time())
        for op_id, _kind, _turns, _pre, _data, _state in meta.ops(session, state="active"):
            meta.set_op_state(op_id, "final")
    return n


def touch(store: Store, opts: Options, session: str, turn: int, rel: str, *,
          text: str | None = None, tool_call_id: str | None = None) -> bool:
    """Keep a file's state before a file tool writes it (the first touch in a turn wins).

    A later touch of the same path keeps nothing, but when it comes from another tool
    call the change is no longer one call's (its ``tool_call_id`` is forgotten).

    Returns:
        Whether this touch kept the state (false: already kept, a folder, or the turn
        is no longer open).
    """
    meta = store.meta
    row = meta.turn_row(session, turn)
    if row is None or row[4] != "open":
        return False
    kept = meta.touches(session, turn).get(rel)
    if kept is not None:
        with meta.tx():
            meta.add_touch(session, turn, rel, kept[0], tool_call_id)
        return False
    entry = read_state(store, opts, rel, text=text)
    if entry is not None and entry.kind == DIR:
        return False
    store.objects.flush()
    with meta.tx():
        return meta.add_touch(session, turn, rel, encode_state(entry), tool_call_id)


def join_command(store: Store, session: str, turn: int, before_tree: str, after_tree: str,
                 tool_call_id: str | None, *, before_at: float | None = None
                 ) -> list[tuple[str, Entry | None, Entry | None]]:
    """Add the files a command changed to the turn, with their state before the command.

    ``before_at`` is when that state was seen (the snapshot before the command): a file
    already kept from a later moment (a command that began after this one but finished
    first, a touch made while this one ran) takes this earlier state instead.

    Returns:
        (path, before, after) of every file, link or large file that differs (folders
        are left out: a change list is of files).
    """
    # A path whose kind changed comes twice from diff_trees (the old entry going, the new
    # one coming): one change, from the first's old to the last's new.
    merged: dict[str, tuple[Entry | None, Entry | None]] = {}
    for p, a, b in diff_trees(store.objects.get_tree, before_tree, after_tree):
        merged[p] = (merged[p][0] if p in merged else a, b)
    deltas = [(p, a, b) for p, (a, b) in merged.items() if not (_no_file(a) and _no_file(b))]
    with store.meta.tx():
        for path, old, _new in deltas:
            # A folder is kept as one (its mode), not as its tree: its files are changes
            # of their own.
            o = Entry(DIR, old.mode, "", 0) if old is not None and old.kind == DIR else old
            store.meta.add_touch(session, turn, path, encode_state(o), tool_call_id,
                                 at=before_at)
    return deltas


def _no_file(e: Entry | None) -> bool:
    return e is None or e.kind == DIR


def end_turn(store: Store, opts: Options, session: str, turn: int) -> list[Change]:
    """Close a turn: read every file it affected again and keep those that differ.

    Returns:
        The turn's change list.
    """
    meta = store.meta
    rows = []
    for path, (before_text, _tool) in sorted(meta.touches(session, turn).items()):
        before = decode_state(before_text)
        try:
            after = read_state(store, opts, path)
        except OSError:
            after = None
        if _same(before, after) or (_no_file(before) and _no_file(after)):
            continue
        # A file that became a folder is deleted (and the other way round, created); the
        # folder stays in the record so that undo and redo expect it and put it back.
        gone = _no_file(after)
        status = "created" if _no_file(before) else "deleted" if gone else "modified"
        a = _content(store, before)
        b = _content(store, after)
        added, removed = line_counts(a, b)
        undoable = before is None or before.kind not in (LARGE, UNREADABLE)
        rows.append((path, status, added, removed, encode_state(before), encode_state(after),
                     None if after is None or gone else after.oid, int(undoable)))
    store.objects.flush()
    with meta.tx():
        meta.set_changes(session, turn, rows)
        meta.set_turn_state(session, turn, "done", ended=time.time())
    return meta.changes(session, turn)


def _content(store: Store, e: Entry | None) -> bytes | None:
    if e is None or e.kind not in (FILE, LINK):
        return None  # a large file's oid is its hash, not a stored object
    return store.objects.get(e.oid)


# -- undo, redo, revert --------------------------------------------------------------

#: (path, state expected now, state to write)
_Move = tuple[str, Entry | None, Entry | None]


def _same(a: Entry | None, b: Entry | None) -> bool:
    """Whether two states of a path are the same (what every check of a turn compares)."""
    if a is not None and b is not None and a.kind == DIR and b.kind == DIR:
        return True  # a folder's contents are changes of their own
    if a is not None and b is not None and a.kind == LARGE and b.kind == LARGE:
        # A large file's hash is known only where takeback read the file itself (a
        # touch, a turn's end), not from a scan: compare it where both sides have it.
        return a.mode == b.mode and a.size == b.size and (
            not a.oid or not b.oid or a.oid == b.oid)
    return entry_state(a) == entry_state(b)


def _pre_snapshot(store: Store, opts: Options, session: str, kind: str,
                  turns: list[int]) -> SnapshotInfo:
    """Take the snapshot before an operation (under the caller's exclusive lock)."""
    return take(store, opts, kind=f"pre-{kind}", session=session,
                message=f"before {kind} of turn(s) {', '.join(map(str, turns))}")


def _apply_moves(store: Store, opts: Options, session: str, kind: str, turns: list[int],
                 moves: list[_Move], *, force: bool, describe: Callable[[str], str],
                 before_tree: str | None, data: dict[str, object],
                 on_done: Callable[[MetaStore], None]) -> TurnOpResult:
    """Check, snapshot, write and record one undo-like operation (under the lock).

    Args:
        store: the open store (the caller holds its exclusive lock).
        opts: the workspace's options.
        session: the session's name.
        kind: ``undo``, ``redo``, ``revert`` or ``unrevert``.
        turns: the turns it concerns, for the record.
        moves: (path, state it must be in now, state to write) for each path.
        force: write over paths that are not in the state expected.
        describe: the line that names a conflict on a path.
        before_tree: the tree before the first turn taken back: folders that were not
            in it are removed when taking back a file leaves them empty (None: keep).
        data: what the op row keeps, beside the paths written.
        on_done: updates turn and op states, in the transaction that records the op.

    Raises:
        ConflictError: a file is not as the record says, and ``force`` is false.
        RestoreError: some writes failed; the op is recorded with what was written.
    """
    pre = _pre_snapshot(store, opts, session, kind, turns)
    get_tree = store.objects.get_tree
    root = SafeRoot(store.root)
    conflicts: list[str] = []
    todo: list[_Move] = []
    not_restored: list[str] = []
    left: dict[str, str] = {}
    for path, expect, write in moves:
        now = lookup(get_tree, pre.tree, path)
        if _same(now, write):
            continue  # already as the operation would leave it
        if now is None and lstat_or_none(root, path) is not None:
            left[path] = "out of scope (ignored) and in the way"
            continue
        if write is not None and write.kind in (LARGE, UNREADABLE):
            # Never kept, so never written: nothing of it can be overwritten either.
            not_restored.append(path)
            continue
        if now is not None and now.kind == UNREADABLE:
            # What is there now could not be read: writing over it or removing it could
            # lose what no snapshot holds, whatever ``force`` says.
            left[path] = "unreadable, never read"
            continue
        if now is not None and now.kind == LARGE and not _same(now, expect):
            # A file over the size limit that the record does not know (not the turn's
            # own output) was never kept: writing over it would lose it for good.
            left[path] = "over the size limit, never kept"
            continue
        if not _same(now, expect):
            conflicts.append(path)
            if not force:
                continue
        todo.append((path, now, write))
    if conflicts and not force:
        lines = [describe(p) for p in conflicts]
        raise ConflictError(
            "\n".join(lines) + "\nnothing was written; use --force to overwrite",
            conflicts=conflicts,
        )
    restored: list[str] = []
    failed: list[str] = []
    # Every object is read (and checked) before the first write: a damaged store
    # refuses the operation instead of leaving it half done.
    blobs = {w.oid: store.objects.get(w.oid) for _p, _n, w in todo
             if w is not None and w.kind in (FILE, LINK)}
    store.write_journal({"op": kind, "pre": pre.id, "turns": turns,
                         "paths": [p for p, _n, _w in todo], "started_at": time.time()})
    # Removals first, deepest first, so that a folder the turn made of a file is empty
    # when the file comes back; then writes, parents first (a folder before its files).
    todo.sort(key=lambda m: (0, -m[0].count("/")) if m[2] is None else (1, m[0].count("/")))
    made: list[str] = []
    for path, now, write in todo:
        try:
            if not disk_matches(store, root, path, now):
                # Written after the snapshot this was checked against: never overwrite it.
                left[path] = "changed during the " + kind
                failed.append(path)
                continue
            if write is None:
                if now is not None and now.kind == DIR:
                    if not root.remove_dir(path):
                        failed.append(path)
                        continue
                else:
                    root.remove(path)
                _prune_dirs(root, path, before_tree, get_tree)
            elif write.kind == DIR:
                if now is not None and now.kind != DIR:
                    root.remove(path)
                root.make_dir(path, write.mode)
            else:
                if now is not None and now.kind == DIR and not root.remove_dir(path):
                    failed.append(path)  # files someone put in it since
                    continue
                made.extend(_missing_parents(root, path))
                if write.kind == LINK:
                    root.write_symlink(path, blobs[write.oid])
                else:
                    root.write_file(path, blobs[write.oid], write.mode)
            restored.append(path)
        except (OSError, PathError):
            failed.append(path)
    # Folders made to hold a file coming back get the mode they had (deepest first, so a
    # read-only one is closed after what goes in it).
    if before_tree is not None:
        for d in sorted(set(made), key=lambda d: d.count("/"), reverse=True):
            e = lookup(get_tree, before_tree, d)
            if e is not None and e.kind == DIR:
                try:
                    root.chmod_dir(d, e.mode)
                except (OSError, PathError):
                    failed.append(d + "/")
    store.clear_journal()
    restored.sort()
    with store.meta.tx():
        store.meta.add_op(session, kind, turns, pre.id, {**data, "paths": restored},
                          time.time())
        if not failed:
            on_done(store.meta)
    if failed:
        raise RestoreError(f"{kind} failed part way: {len(failed)} file(s) not written",
                           restored=restored, failed=failed, undo_id=pre.id)
    return TurnOpResult(kind, turns, pre.id, restored, not_restored,
                        conflicts if force else [], left=left)


def _missing_parents(root: SafeRoot, path: str) -> list[str]:
    """Return the folders above ``path`` that do not exist (a write will make them)."""
    parts = path.split("/")[:-1]
    missing = []
    for i in range(len(parts)):
        d = "/".join(parts[: i + 1])
        if lstat_or_none(root, d) is None:
            missing.append(d)
    return missing


def _prune_dirs(root: SafeRoot, path: str, before_tree: str | None,
                get_tree: Callable[[str], dict[str, Entry]]) -> None:
    """Remove the empty folders above ``path`` that did not exist before the turn."""
    if before_tree is None:
        return
    parts = path.split("/")[:-1]
    while parts:
        d = "/".join(parts)
        if lookup(get_tree, before_tree, d) is not None:
            return
        if not root.remove_dir(d):
            return
        parts.pop()


def _turn_changes(store: Store, session: str, n: int
                  ) -> list[tuple[str, Entry | None, Entry | None, bool]]:
    return [
        (r[0], decode_state(r[4]), decode_state(r[5]), bool(r[7]))
        for r in store.meta.change_rows(session, n)
    ]


def _ended_turns(store: Store, session: str) -> list[tuple[int, str, str | None, str]]:
    return [(int(r[0]), r[1], r[2], r[4]) for r in store.meta.turn_rows(session)]


def _close_open_turn(store: Store, opts: Options, session: str) -> None:
    n = open_turn(store, session)
    if n is not None:
        finish_open_steps(store, opts, session, n)
        end_turn(store, opts, session, n)


def finish_open_steps(store: Store, opts: Options, session: str, turn: int) -> list[int]:
    """Finish the turn's command steps that never got their after-snapshot.

    A command the agent's user interrupted leaves its step open (no hook runs after it);
    its changes belong to the turn all the same, or undo would miss them.

    Returns:
        The numbers of the steps finished.
    """
    open_steps = [st for st in store.meta.steps(session)
                  if st.command and st.turn == turn and st.before is not None
                  and st.after is None and st.exit_code is None]
    done = []
    for st in open_steps:
        before = store.meta.snapshot(st.before)  # type: ignore[arg-type]
        if before is None:
            continue
        after = take(store, opts, kind="step-after", session=session, turn=turn, step=st.n,
                     message=st.label)
        with store.meta.tx():
            store.meta.finish_step(session, st.n, after.id, None)
        join_command(store, session, turn, before.tree, after.tree, None,
                     before_at=before.created_at)
        done.append(st.n)
    return done


def undo(store: Store, opts: Options, session: str, *, turn: int | None = None,
         file: str | None = None, force: bool = False, close_open: bool = True
         ) -> TurnOpResult:
    """Take back a turn (the last one not yet undone, or ``turn``), or one file of it.

    An open turn is ended first (see the module's docstring).

    Args:
        store: the open store.
        opts: the workspace's options.
        session: the session's name.
        turn: the turn to take back (default: the last one still done).
        file: take back only this path (relative to the root) of the turn.
        force: overwrite files changed since the turn.
        close_open: end an open turn first (false: leave it, and take back an ended one).

    Raises:
        ConflictError: a file changed after the turn (and ``force`` is false).
        UsageError: no such turn, or the turn did not change ``file``.
    """
    if file is not None:
        check_relpath(file)
    if close_open:
        _close_open_turn(store, opts, session)
    with store.lock(exclusive=True):
        turns = _ended_turns(store, session)
        if turn is None:
            done = [t for t in turns if t[3] == "done"]
            if not done:
                if file is not None:
                    raise UsageError(f"no turn to take {file} back from")
                return TurnOpResult("undo", [], None, nothing=True)
            n, _label, before, _state = done[-1]
        else:
            match = [t for t in turns if t[0] == turn]
            if not match:
                raise UsageError(f"no turn {turn} in session {session!r}")
            n, _label, before, state = match[0]
            if state != "done" and file is None:
                raise UsageError(f"turn {turn} is {state}, not something undo can take back")
        changes = _turn_changes(store, session, n)
        if file is not None:
            changes = [c for c in changes if c[0] == file]
            if not changes:
                raise UsageError(f"turn {n} did not change {file}")
        moves: list[_Move] = [(p, after, bef) for p, bef, after, _u in changes]

        def on_done(meta: MetaStore) -> None:
            if file is None:
                meta.set_turn_state(session, n, "undone")

        return _apply_moves(
            store, opts, session, "undo", [n], moves, force=force,
            describe=lambda p: f"{p} changed after turn {n}",
            before_tree=_tree_of(store, before), data={"file": file}, on_done=on_done,
        )


def redo(store: Store, opts: Options, session: str, *, force: bool = False) -> TurnOpResult:
    """Bring back what the last undo still to be redone took back.

    Raises:
        ConflictError: a file changed since the undo (and ``force`` is false).
    """
    with store.lock(exclusive=True):
        ops = store.meta.ops(session, kind="undo", state="active")
        if not ops:
            return TurnOpResult("redo", [], None, nothing=True)
        op_id, _kind, turns, _pre, data, _state = ops[0]
        n = turns[0]
        changes = _turn_changes(store, session, n)
        file = data.get("file")
        if file is not None:
            changes = [c for c in changes if c[0] == file]
        # Only what that undo took back: files an earlier `undo --file` restored, or that
        # were already as before, were not written by it and are not brought back now.
        took = data.get("paths")
        if isinstance(took, list):
            changes = [c for c in changes if c[0] in set(took)]
        moves: list[_Move] = [(p, bef, after) for p, bef, after, _u in changes]

        def on_done(meta: MetaStore) -> None:
            meta.set_op_state(op_id, "redone")
            if file is None:
                meta.set_turn_state(session, n, "done")

        return _apply_moves(
            store, opts, session, "redo", [n], moves, force=force,
            describe=lambda p: f"{p} changed after the undo of turn {n}",
            before_tree=None, data={"undo_op": op_id, "file": file}, on_done=on_done,
        )


def revert(store: Store, opts: Options, session: str, *, to_turn: int,
           force: bool = False) -> TurnOpResult:
    """Take back every turn after ``to_turn`` at once.

    Each file goes back to its state before the first of those turns changed it. An open
    turn is ended first.

    Raises:
        ConflictError: a file changed after the turn that last changed it.
        UsageError: ``to_turn`` is not 0 or a turn of the session.
    """
    _close_open_turn(store, opts, session)
    with store.lock(exclusive=True):
        all_turns = _ended_turns(store, session)
        last = all_turns[-1][0] if all_turns else 0
        if to_turn < 0 or to_turn > last:
            raise UsageError(f"no turn {to_turn} in session {session!r} "
                             f"(it has turns 1 to {last})" if last else
                             f"session {session!r} has no turn to revert to")
        turns = [t for t in all_turns if t[0] > to_turn and t[3] == "done"]
        if not turns:
            return TurnOpResult("revert", [], None, nothing=True)
        first: dict[str, Entry | None] = {}
        last_after: dict[str, Entry | None] = {}
        who: dict[str, int] = {}
        for n, _label, _before, _state in turns:
            for p, bef, after, _u in _turn_changes(store, session, n):
                first.setdefault(p, bef)
                last_after[p] = after
                who[p] = n
        moves: list[_Move] = [(p, last_after[p], first[p]) for p in sorted(first)]
        nums = [t[0] for t in turns]

        def on_done(meta: MetaStore) -> None:
            for n in nums:
                meta.set_turn_state(session, n, "reverted")

        return _apply_moves(
            store, opts, session, "revert", nums, moves, force=force,
            describe=lambda p: f"{p} changed after turn {who[p]}",
            before_tree=_tree_of(store, turns[0][2]), data={"to_turn": to_turn},
            on_done=on_done,
        )


def unrevert(store: Store, opts: Options, session: str, *, force: bool = False) -> TurnOpResult:
    """Put back what the last revert took back, as the files were when it began.

    Raises:
        ConflictError: a file changed since the revert.
    """
    with store.lock(exclusive=True):
        ops = store.meta.ops(session, kind="revert", state="active")
        if not ops:
            return TurnOpResult("unrevert", [], None, nothing=True)
        op_id, _kind, turns, pre, _data, _state = ops[0]
        pre_tree = _tree_of(store, pre)
        if pre_tree is None:
            raise UsageError(f"the snapshot taken before the revert ({pre}) is missing")
        first: dict[str, Entry | None] = {}
        for n in turns:
            for p, bef, _after, _u in _turn_changes(store, session, n):
                first.setdefault(p, bef)
        get_tree = store.objects.get_tree
        moves: list[_Move] = [(p, first[p], lookup(get_tree, pre_tree, p))
                              for p in sorted(first)]

        def on_done(meta: MetaStore) -> None:
            meta.set_op_state(op_id, "unreverted")
            for n in turns:
                meta.set_turn_state(session, n, "done")

        return _apply_moves(
            store, opts, session, "unrevert", turns, moves, force=force,
            describe=lambda p: f"{p} changed after the revert",
            before_tree=None, data={"revert_op": op_id}, on_done=on_done,
        )


def _tree_of(store: Store, snapshot_id: str | None) -> str | None:
    if snapshot_id is None:
        return None
    snap = store.meta.snapshot(snapshot_id)
    return None if snap is None else snap.tree
