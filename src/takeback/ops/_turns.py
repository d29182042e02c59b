"""Ops layer: turns, their change lists, and undo, redo, revert and unrevert.

A turn's change list is built from what is known of each file it affected: the state a
file tool's ``touch`` kept before the first write, or the state before a command that
changed it (taken from the snapshots around the command). Edits nobody attributed to the
turn (a person's, in another file) are never part of it, so undo leaves them alone.

Every undo, redo, revert and unrevert checks first, writes nothing on a conflict, takes a
snapshot before writing, and is recorded in the ``ops`` table so it can be walked back.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._fs import SafeRoot, check_relpath
from ..errors import ConflictError, PathError, RestoreError, UsageError
from ..model import DIR, FILE, LARGE, LINK, Change, Entry, decode_state, encode_state, entry_state
from ..store import Store
from ._patch import line_counts
from ._snapshot import Options, take
from ._treediff import diff_trees, lookup


@dataclass
class TurnOpResult:
    """What an undo, redo, revert or unrevert did."""

    kind: str
    turns: list[int]
    pre: str | None
    restored: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    nothing: bool = False


# -- reading one path ----------------------------------------------------------------


def read_state(store: Store, opts: Options, rel: str, *, text: str | None = None
               ) -> Entry | None:
    """Return the current state of one path as an entry, storing its bytes.

    ``text`` replaces the bytes on disk (an editor's unsaved buffer); a UTF-8 byte-order
    mark is kept as the file on disk has it.
    """
    path = os.path.join(store.root, rel)
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    if text is not None:
        disk = b""
        if st is not None and stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                disk = f.read(3)
        data = text.encode("utf-8", "surrogateescape")
        bom = b"\xef\xbb\xbf"
        if disk.startswith(bom) and not data.startswith(bom):
            data = bom + data
        elif not disk.startswith(bom) and data.startswith(bom) and st is not None:
            data = data[len(bom):]
        mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else 0o644
        return _blob_entry(store, opts, data, mode)
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
    if st.st_size > opts.max_file_bytes:
        return Entry(LARGE, mode, "", st.st_size)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    return _blob_entry(store, opts, data, mode)


def _blob_entry(store: Store, opts: Options, data: bytes, mode: int) -> Entry:
    if len(data) > opts.max_file_bytes:
        return Entry(LARGE, mode, "", len(data))
    return Entry(FILE, mode, store.objects.put("blob", data), len(data))


def _sha_on_disk(store: Store, rel: str, entry: Entry | None) -> str | None:
    """SHA-256 of what is at ``rel`` (for a large file too, which is not stored)."""
    if entry is None:
        return None
    if entry.kind != LARGE:
        return entry.oid
    h = hashlib.sha256()
    with open(os.path.join(store.root, rel), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- turns ---------------------------------------------------------------------------


def open_turn(store: Store, session: str) -> int | None:
    """Return the number of the session's open turn, if any."""
    for n, _label, _b, _a, state in reversed(store.meta.turn_rows(session)):
        if state == "open":
            return int(n)
    return None


def begin_turn(store: Store, session: str, label: str, before: str | None) -> int:
    """Open a new turn; redo and unrevert stop being possible (a new turn makes them final)."""
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
    """Keep a file's state before a file tool writes it (the first touch in a turn wins)."""
    meta = store.meta
    if rel in meta.touches(session, turn):
        return False
    entry = read_state(store, opts, rel, text=text)
    if entry is not None and entry.kind == DIR:
        return False
    store.objects.flush()
    with meta.tx():
        return meta.add_touch(session, turn, rel, encode_state(entry), tool_call_id)


def join_command(store: Store, session: str, turn: int, before_tree: str, after_tree: str,
                 tool_call_id: str | None) -> list[tuple[str, Entry | None, Entry | None]]:
    """Add the files a command changed to the turn, with their state before the command."""
    deltas = [
        (p, a, b) for p, a, b in diff_trees(store.objects.get_tree, before_tree, after_tree)
        if not ((a is None or a.kind == DIR) and (b is None or b.kind == DIR))
    ]
    with store.meta.tx():
        for path, old, _new in deltas:
            o = None if old is None or old.kind == DIR else old
            store.meta.add_touch(session, turn, path, encode_state(o), tool_call_id)
    return deltas


def end_turn(store: Store, opts: Options, session: str, turn: int) -> list[Change]:
    """Close a turn: read every file it affected again and keep those that differ."""
    meta = store.meta
    rows = []
    for path, (before_text, _tool) in sorted(meta.touches(session, turn).items()):
        before = decode_state(before_text)
        try:
            after = read_state(store, opts, path)
        except OSError:
            after = None
        if after is not None and after.kind == DIR:
            after = None
        if entry_state(before) == entry_state(after) and (
            before is None or after is None or before.size == after.size
        ):
            continue
        status = "created" if before is None else "deleted" if after is None else "modified"
        a = _content(store, before)
        b = _content(store, after)
        added, removed = line_counts(a, b)
        undoable = before is None or before.kind != LARGE
        rows.append((path, status, added, removed, encode_state(before), encode_state(after),
                     _sha_on_disk(store, path, after), int(undoable)))
    store.objects.flush()
    with meta.tx():
        meta.set_changes(session, turn, rows)
        meta.set_turn_state(session, turn, "done", after=None, at=time.time())
    return meta.changes(session, turn)


def _content(store: Store, e: Entry | None) -> bytes | None:
    if e is None or not e.oid:
        return None
    return store.objects.get(e.oid)


# -- undo, redo, revert --------------------------------------------------------------

#: (path, state expected now, state to write)
_Move = tuple[str, Entry | None, Entry | None]


def _same(a: Entry | None, b: Entry | None) -> bool:
    if entry_state(a) != entry_state(b):
        return False
    return a is None or b is None or a.kind != LARGE or a.size == b.size


def _apply_moves(store: Store, opts: Options, session: str, kind: str, turns: list[int],
                 moves: list[_Move], *, force: bool, describe: Callable[[str], str],
                 before_trees: dict[str, str | None], data: dict[str, object]) -> TurnOpResult:
    """Check, snapshot, write and record one undo-like operation."""
    with store.lock(exclusive=True):
        pre = take(store, opts, kind=f"pre-{kind}", session=session,
                   message=f"before {kind} of turn(s) {', '.join(map(str, turns))}")
        get_tree = store.objects.get_tree
        conflicts: list[str] = []
        todo: list[_Move] = []
        not_restored: list[str] = []
        for path, expect, write in moves:
            now = lookup(get_tree, pre.tree, path)
            if now is not None and now.kind == DIR:
                now = Entry(DIR, now.mode, now.oid, 0)
            if _same(now, write):
                continue  # already as the operation would leave it
            if write is not None and write.kind == LARGE:
                not_restored.append(path)
                continue
            if not _same(now, expect) and not force:
                conflicts.append(path)
                continue
            todo.append((path, expect, write))
        if conflicts:
            lines = [describe(p) for p in conflicts]
            raise ConflictError(
                "\n".join(lines) + "\nnothing was written; use --force to overwrite",
                conflicts=conflicts,
            )
        root = SafeRoot(store.root)
        restored: list[str] = []
        failed: list[str] = []
        blobs = {w.oid: store.objects.get(w.oid) for _p, _e, w in todo
                 if w is not None and w.kind in (FILE, LINK)}
        store.write_journal({"op": kind, "pre": pre.id, "turns": turns,
                             "paths": [p for p, _e, _w in todo], "started_at": time.time()})
        for path, _expect, write in todo:
            try:
                if write is None:
                    root.remove(path)
                    _prune_dirs(root, path, before_trees.get(path), get_tree)
                elif write.kind == LINK:
                    root.write_symlink(path, blobs[write.oid])
                else:
                    root.write_file(path, blobs[write.oid], write.mode)
                restored.append(path)
            except (OSError, PathError):
                failed.append(path)
        store.clear_journal()
        with store.meta.tx():
            store.meta.add_op(session, kind, turns, pre.id,
                              {**data, "paths": restored}, time.time())
        if failed:
            raise RestoreError(f"{kind} failed part way: {len(failed)} file(s) not written",
                               restored=restored, failed=failed, undo_id=pre.id)
        return TurnOpResult(kind, turns, pre.id, restored, not_restored)


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
        end_turn(store, opts, session, n)


def undo(store: Store, opts: Options, session: str, *, turn: int | None = None,
         file: str | None = None, force: bool = False) -> TurnOpResult:
    """Take back a turn (the last one not yet undone, or ``turn``), or one file of it.

    Raises:
        ConflictError: a file changed after the turn (and ``force`` is false).
        UsageError: no such turn, or the turn did not change ``file``.
    """
    _close_open_turn(store, opts, session)
    turns = _ended_turns(store, session)
    if turn is None:
        done = [t for t in turns if t[3] == "done"]
        if not done:
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
        check_relpath(file)
        changes = [c for c in changes if c[0] == file]
        if not changes:
            raise UsageError(f"turn {n} did not change {file}")
    before_tree = _tree_of(store, before)
    moves: list[_Move] = [(p, after, bef) for p, bef, after, _u in changes]
    result = _apply_moves(
        store, opts, session, "undo", [n], moves, force=force,
        describe=lambda p: f"{p} changed after turn {n}",
        before_trees={p: before_tree for p, *_ in moves}, data={"file": file},
    )
    if file is None:
        with store.meta.tx():
            store.meta.set_turn_state(session, n, "undone")
    return result


def redo(store: Store, opts: Options, session: str, *, force: bool = False) -> TurnOpResult:
    """Bring back what the last undo took back.

    Raises:
        ConflictError: a file changed since the undo (and ``force`` is false).
    """
    ops = store.meta.ops(session, kind="undo", state="active")
    if not ops:
        return TurnOpResult("redo", [], None, nothing=True)
    op_id, _kind, turns, _pre, data, _state = ops[0]
    n = turns[0]
    changes = _turn_changes(store, session, n)
    file = data.get("file")
    if file is not None:
        changes = [c for c in changes if c[0] == file]
    moves: list[_Move] = [(p, bef, after) for p, bef, after, _u in changes]
    result = _apply_moves(
        store, opts, session, "redo", [n], moves, force=force,
        describe=lambda p: f"{p} changed after the undo of turn {n}",
        before_trees={}, data={"undo_op": op_id},
    )
    with store.meta.tx():
        store.meta.set_op_state(op_id, "redone")
        if file is None:
            store.meta.set_turn_state(session, n, "done")
    return result


def revert(store: Store, opts: Options, session: str, *, to_turn: int,
           force: bool = False) -> TurnOpResult:
    """Take back every turn after ``to_turn`` at once.

    Raises:
        ConflictError: a file changed after the turn that last changed it.
    """
    _close_open_turn(store, opts, session)
    turns = [t for t in _ended_turns(store, session) if t[0] > to_turn and t[3] == "done"]
    if not turns:
        return TurnOpResult("revert", [], None, nothing=True)
    first: dict[str, Entry | None] = {}
    last: dict[str, Entry | None] = {}
    who: dict[str, int] = {}
    for n, _label, _before, _state in turns:
        for p, bef, after, _u in _turn_changes(store, session, n):
            first.setdefault(p, bef)
            last[p] = after
            who[p] = n
    before_tree = _tree_of(store, turns[0][2])
    moves: list[_Move] = [(p, last[p], first[p]) for p in sorted(first)]
    nums = [t[0] for t in turns]
    result = _apply_moves(
        store, opts, session, "revert", nums, moves, force=force,
        describe=lambda p: f"{p} changed after turn {who[p]}",
        before_trees={p: before_tree for p in first}, data={"to_turn": to_turn},
    )
    with store.meta.tx():
        for n in nums:
            store.meta.set_turn_state(session, n, "reverted")
    return result


def unrevert(store: Store, opts: Options, session: str, *, force: bool = False) -> TurnOpResult:
    """Put back what the last revert took back, as the files were when it began.

    Raises:
        ConflictError: a file changed since the revert.
    """
    ops = store.meta.ops(session, kind="revert", state="active")
    if not ops:
        return TurnOpResult("unrevert", [], None, nothing=True)
    op_id, _kind, turns, pre, data, _state = ops[0]
    assert pre is not None
    pre_tree = _tree_of(store, pre)
    assert pre_tree is not None
    first: dict[str, Entry | None] = {}
    for n in turns:
        for p, bef, _after, _u in _turn_changes(store, session, n):
            first.setdefault(p, bef)
    get_tree = store.objects.get_tree
    moves: list[_Move] = [(p, first[p], lookup(get_tree, pre_tree, p)) for p in sorted(first)]
    result = _apply_moves(
        store, opts, session, "unrevert", turns, moves, force=force,
        describe=lambda p: f"{p} changed after the revert",
        before_trees={}, data={"revert_op": op_id},
    )
    with store.meta.tx():
        store.meta.set_op_state(op_id, "unreverted")
        for n in turns:
            store.meta.set_turn_state(session, n, "done")
    return result


def _tree_of(store: Store, snapshot_id: str | None) -> str | None:
    if snapshot_id is None:
        return None
    snap = store.meta.snapshot(snapshot_id)
    return None if snap is None else snap.tree


def turn_numbers(store: Store, session: str) -> Sequence[int]:
    """Return the numbers of a session's turns."""
    return [int(r[0]) for r in store.meta.turn_rows(session)]
