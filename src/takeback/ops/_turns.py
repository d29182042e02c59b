"""Ops layer: turns and their change lists.

A turn's change list is built from what is known of each path it affected: the state a
file tool's ``touch`` kept before the first write, or the state before a command that
changed it (taken from the snapshots around the command). Edits nobody attributed to the
turn (a person's, in another file) are never part of it, so undo leaves them alone.
Folders a command made or removed are in it too (an empty folder is a change of its own),
but not a folder that holds only what is out of scope (a tool's ignored cache): that is
the command's ignored output, which no take-back removes.

What the turn's start did not hold in scope it did not create: a path absent from the
snapshot before a command, and left out by that snapshot's own ignore rules, is not
recorded as created when the command brings it into scope (by editing ``.gitignore`` or
``git add -f``): it may have been there all along, a person's ignored file.

Every path is read without following a symlink on the way: a folder swapped for a link to
somewhere else makes the paths below it absent, never read through the link.

Taking turns back lives in :mod:`._takeback`.
"""

from __future__ import annotations

import hashlib
import stat
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext

from .._fs import SafeRoot
from ..errors import PathError
from ..model import (
    DIR,
    FILE,
    LARGE,
    LINK,
    UNREADABLE,
    Change,
    ChangeStatus,
    Entry,
    change_kind,
    decode_state,
    encode_state,
)
from ..store import ChangeRow, Store
from ._snapshot import Options, Recording, take
from ._treediff import diff_trees


@contextmanager
def shared_lock(store: Store) -> Iterator[None]:
    """Hold the store's shared lock while objects and the rows naming them are written.

    gc takes the lock exclusive: what it marks and removes can then never fall between
    an object written (or found already there) and the row that will name it. A store
    opened read-only takes no lock (its writes fail on their own), and a lock that cannot
    be taken (its file broken) does not stop the caller: what it writes then fails or
    succeeds on its own, as a snapshot that fails never stops the agent.
    """
    with ExitStack() as stack:
        if not store.readonly:
            try:
                stack.enter_context(store.lock(exclusive=False))
            except OSError:
                pass
        yield


# -- reading one path ----------------------------------------------------------------


def read_state(store: Store, opts: Options, rel: str, *, text: str | None = None) -> Entry | None:
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
        folder) is there.
    """
    root = SafeRoot(store.root)
    try:
        got = root.read_entry(rel, limit=opts.max_file_bytes)
    except PermissionError:
        seen = root.lstat(rel)
        if seen is None:
            return None
        # Something is there that may not be read: kept as such, never as absent.
        return Entry(UNREADABLE, stat.S_IMODE(seen.st_mode), "", seen.st_size)
    st, body = got if got is not None else (None, None)
    if text is not None:
        disk = b""
        if st is not None and stat.S_ISREG(st.st_mode):
            try:
                with open(root.open_file(rel), "rb") as f:
                    disk = f.read(3)
            except (OSError, PathError):
                disk = b""
        data = text.encode("utf-8", "surrogateescape")
        bom = b"\xef\xbb\xbf"
        if disk.startswith(bom) and not data.startswith(bom):
            data = bom + data
        elif not disk.startswith(bom) and data.startswith(bom) and st is not None:
            data = data[len(bom) :]
        mode = stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else 0o644
        if len(data) > opts.max_file_bytes:
            return Entry(LARGE, mode, hashlib.sha256(data).hexdigest(), len(data))
        return Entry(FILE, mode, store.objects.put("blob", data), len(data))
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        assert body is not None
        return Entry(LINK, 0o777, store.objects.put("blob", body), len(body))
    if stat.S_ISDIR(st.st_mode):
        return Entry(DIR, stat.S_IMODE(st.st_mode), "", 0)
    if not stat.S_ISREG(st.st_mode):
        return None
    mode = stat.S_IMODE(st.st_mode)
    if body is None:
        # Over the size limit: hashed, not kept.
        h = hashlib.sha256()
        size = 0
        with open(root.open_file(rel), "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
        return Entry(LARGE, mode, h.hexdigest(), size)
    return Entry(FILE, mode, store.objects.put("blob", body), len(body))


# -- turns ---------------------------------------------------------------------------


def open_turn(store: Store, session: str) -> int | None:
    """Return the number of the session's open turn, if any."""
    for row in reversed(store.meta.turn_rows(session)):
        if row.state == "open":
            return row.n
    return None


def begin_turn(
    store: Store, session: str, label: str, before: str | None, *, reuse_open: bool = False
) -> int:
    """Open a new turn; redo and unrevert stop being possible (a new turn makes them final).

    Args:
        store: the open store.
        session: the session's name.
        label: the turn's label.
        before: the snapshot taken before the turn.
        reuse_open: when a turn of the session is open (opened by another process since
            the caller looked and found none), return it instead of opening a second one.
            The check and the opening are one write transaction, so parallel callers
            (hooks of tool calls run at once) open one turn between them.

    Returns:
        The new turn's number (or the open one's, with ``reuse_open``).
    """
    meta = store.meta
    with meta.tx():
        rows = meta.turn_rows(session)
        if reuse_open:
            for row in reversed(rows):
                if row.state == "open":
                    return row.n
        n = rows[-1].n + 1 if rows else 1
        meta.add_turn(session, n, label, before, time.time())
        for op in meta.ops(session, state="active"):
            meta.set_op_state(op.id, "final")
    return n


def touch(
    rec: Recording,
    session: str,
    turn: int,
    rel: str,
    *,
    text: str | None = None,
    tool_call_id: str | None = None,
) -> bool:
    """Keep a file's state before a file tool writes it (the first touch in a turn wins).

    A later touch of the same path keeps nothing, but when it comes from another tool
    call the change is no longer one call's (its ``tool_call_id`` is forgotten).

    Returns:
        Whether this touch kept the state (false: already kept, a folder, or the turn
        is no longer open).
    """
    store, opts = rec.store, rec.options
    meta = store.meta
    row = meta.turn_row(session, turn)
    if row is None or row.state != "open":
        return False
    kept = meta.touches(session, turn).get(rel)
    if kept is not None:
        with meta.tx():
            meta.add_touch(session, turn, rel, kept.state, tool_call_id)
        return False
    # The blob and the row that names it are written under one hold of the lock: gc,
    # which takes it exclusive, never sees the one without the other.
    with shared_lock(store):
        entry = read_state(store, opts, rel, text=text)
        if entry is not None and entry.kind == DIR:
            return False
        store.objects.flush()
        with meta.tx():
            return meta.add_touch(session, turn, rel, encode_state(entry), tool_call_id)


def join_command(
    rec: Recording,
    session: str,
    turn: int,
    before_tree: str,
    after_tree: str,
    tool_call_id: str | None,
    *,
    before_at: float | None = None,
    unconfirmed: bool = False,
    commit: bool = True,
) -> list[tuple[str, Entry | None, Entry | None]]:
    """Add the paths a command changed to the turn, with their state before the command.

    ``commit``: in a transaction of its own (False: the caller's, already open, which
    commits them with its own rows).

    ``before_at`` is when that state was seen (the snapshot before the command): a path
    already kept from a later moment (a command that began after this one but finished
    first, a touch made while this one ran) takes this earlier state instead. A path the
    command only brought into scope (see the module's docstring) is left out.

    A path another session claimed while the command ran (its file tool touched it, in
    a turn of its own, since ``before_at``, or its turn that touched it is still open),
    or that an undo, redo or revert wrote while it ran and that still holds what it
    wrote, is left out too: with two conversations in one workspace, the other's write is not this
    command's change, and undo of this turn must not take it back.

    ``unconfirmed``: the command's end was never seen (a denied or failed call, finished
    later): what changed meanwhile may be anyone's, so its paths are marked so.

    Returns:
        (path, before, after) of every path that differs and joined the turn.
    """
    from ._engine import same  # loaded here: a hook call that changed nothing skips it

    store, opts = rec.store, rec.options
    # A path whose kind changed comes twice from diff_trees (the old entry going, the new
    # one coming): one change, from the first's old to the last's new.
    merged: dict[str, tuple[Entry | None, Entry | None]] = {}
    for p, a, b in diff_trees(store.objects.tree_changes, before_tree, after_tree):
        merged[p] = (merged[p][0] if p in merged else a, b)
    scope = None
    deltas = []
    claimed = store.meta.claimed_by_others(session, before_at) if before_at is not None else set()
    # What a take-back wrote while the command ran (a person's undo of another reply) is
    # the take-back's, not the command's, while the path still holds what it wrote.
    restored = store.meta.written_since(before_at) if before_at is not None else {}
    for p, (a, b) in merged.items():
        if same(a, b):
            continue  # a folder's mode: its files are the changes
        if p in claimed:
            continue
        if p in restored and same(decode_state(restored[p]), b):
            continue
        if a is None and b is not None and b.kind == DIR and _holds_only_out_of_scope(store, p, b):
            continue
        if a is None:
            from ._rewind import target_scope

            scope = scope or target_scope(store, opts, before_tree)
            if scope.ignored(p, is_dir=b is not None and b.kind == DIR, index=False):
                continue
        deltas.append((p, a, b))
    with store.meta.tx() if commit else nullcontext():
        for path, old, _new in deltas:
            # A folder is kept as one (its mode), not as its tree: its files are changes
            # of their own.
            o = Entry(DIR, old.mode, "", 0) if old is not None and old.kind == DIR else old
            store.meta.add_touch(
                session,
                turn,
                path,
                encode_state(o),
                tool_call_id,
                at=before_at,
                unconfirmed=unconfirmed,
            )
    return deltas


def _holds_only_out_of_scope(store: Store, path: str, folder: Entry) -> bool:
    """Whether a folder a command made holds nothing in scope, yet is not empty on disk.

    Such a folder is the command's ignored output (``.pytest_cache/``, whose own
    ``.gitignore`` leaves out all it holds): no take-back may remove what it holds, so it
    is not the turn's change, and no plan lists it.
    """
    if folder.oid and store.objects.get_tree(folder.oid):
        return False
    try:
        return bool(SafeRoot(store.root).listdir(path))
    except (OSError, PathError):
        return False


def measure_turn(rec: Recording, session: str, turn: int) -> list[Change]:
    """Return what a turn's change list would be if it ended now, without ending it."""
    store, opts = rec.store, rec.options
    return [_change(r) for r in _change_rows(store, opts, session, turn)]


def end_turn(rec: Recording, session: str, turn: int) -> list[Change]:
    """Close a turn: read every path it affected again and keep those that differ.

    Returns:
        The turn's change list.
    """
    store, opts = rec.store, rec.options
    meta = store.meta
    with shared_lock(store):
        rows = _change_rows(store, opts, session, turn)
        store.objects.flush()
        with meta.tx():
            meta.set_changes(session, turn, rows)
            meta.set_turn_state(session, turn, "done", ended=time.time())
    return meta.changes(session, turn)


def _change_rows(store: Store, opts: Options, session: str, turn: int) -> list[ChangeRow]:
    """The change list's rows: each touched path read again, kept where it differs."""
    from ._engine import same
    from ._patch import line_stat

    rows = []
    for path, kept in sorted(store.meta.touches(session, turn).items()):
        before = decode_state(kept.state)
        try:
            after = read_state(store, opts, path)
        except (OSError, PathError):
            after = None
        if same(before, after):
            continue
        # A file that became a folder is deleted (and the other way round, created); the
        # folder stays in the record so that undo and redo expect it and put it back.
        gone = after is None or (after.kind == DIR and before is not None)
        status: ChangeStatus = (
            "created"
            if before is None or (before.kind == DIR and after is not None)
            else "deleted"
            if gone
            else "modified"
        )
        counts = line_stat(_content(store, before), _content(store, after))
        undoable = before is None or before.kind not in (LARGE, UNREADABLE)
        rows.append(
            ChangeRow(
                path=path,
                status=status,
                added=counts.added,
                removed=counts.removed,
                before=encode_state(before),
                after=encode_state(after),
                sha256=None if after is None or after.kind == DIR else after.oid,
                undoable=undoable,
                approximate=counts.approximate,
                unconfirmed=kept.unconfirmed,
            )
        )
    return rows


def _change(r: ChangeRow) -> Change:
    return Change(
        r.path,
        r.status,
        r.added,
        r.removed,
        r.sha256,
        r.undoable,
        change_kind(r.status, r.before, r.after),
        r.approximate,
        r.unconfirmed,
    )


def _content(store: Store, e: Entry | None) -> bytes | None:
    if e is None or e.kind not in (FILE, LINK):
        return None  # a large file's oid is its hash, not a stored object
    return store.objects.get(e.oid)


def finish_open_steps(rec: Recording, session: str, turn: int) -> list[int]:
    """Finish the turn's command steps that never got their after-snapshot.

    A command the agent's user interrupted leaves its step open (no hook runs after it);
    its changes belong to the turn all the same, or undo would miss them.

    Returns:
        The numbers of the steps finished.
    """
    store = rec.store
    open_steps = [
        st
        for st in store.meta.steps(session)
        if st.command
        and st.turn == turn
        and st.before is not None
        and st.after is None
        and st.exit_code is None
    ]
    done = []
    for st in open_steps:
        before = store.meta.snapshot(st.before)  # type: ignore[arg-type]
        if before is None:
            continue
        with shared_lock(store):
            after = take(
                rec, kind="step-after", session=session, turn=turn, step=st.n, message=st.label
            )
            with store.meta.tx():
                store.meta.finish_step(session, st.n, after.id, None)
            # Its end was never seen: what changed since it began may be anyone's.
            join_command(
                rec,
                session,
                turn,
                before.tree,
                after.tree,
                None,
                before_at=before.created_at,
                unconfirmed=True,
            )
        done.append(st.n)
    return done
