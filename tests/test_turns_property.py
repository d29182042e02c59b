"""A property test of turns: random turns, random edits by a person, random take-backs.

A state machine drives the public API the way a harness and a person would: turns of
file-tool writes (with and without an editor's ``text``), deletes, chmods and commands;
edits by a person at any moment between them; rewinds to the state before a turn; and
undo (of the last turn, of turn N, of one file), redo, revert and unrevert, with and
without ``force``. A model written from the spec predicts each file's bytes and mode, each
change list, and which operations refuse with a conflict. After every step the folder must
be exactly what the model says; an operation the model says must refuse has to raise
``ConflictError`` naming exactly the conflicting files and write nothing.

An operation that finds every path already as it would leave it (a rewind, a person or
another take-back put them there) has nothing to write: it says why (``reason``), takes
no snapshot and records no operation, and the stack walks on as if it were done (undo
marks its turn taken back; redo and unrevert mark theirs done); a revert moves no state.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import takeback

pytestmark = pytest.mark.slow

BOM = b"\xef\xbb\xbf"
PATHS = ["a.txt", "b.txt", "d/c.txt", "d/e/f.bin"]
CONTENTS = [b"one\n", b"two\n", b"one\ntwo\nthree\n", b"\0binary\x01", b"", BOM + b"bom\n"]
TEXTS = ["buffer\n", "\ufeffbuffer\n", "one\n"]
MODES = [0o644, 0o755]

#: A file as the model sees it: (bytes, permission bits), or None when absent.
File = tuple[bytes, int] | None
#: The folders a command can make (their files' parents); a folder is FOLDER or None.
FOLDERS = ["d", "d/e"]
FOLDER: File = (b"<folder>", -1)

paths = st.sampled_from(PATHS)
contents = st.sampled_from(CONTENTS)
modes = st.sampled_from(MODES)
forces = st.booleans()


@dataclass
class MTurn:
    n: int
    state: str = "open"
    changes: dict[str, tuple[File, File]] = field(default_factory=dict)
    #: the files when it began (what ``turn:N`` names)
    before: dict[str, File] = field(default_factory=dict)


@dataclass
class MOp:
    kind: str
    turns: list[int]
    file: str | None = None
    pre: dict[str, File] = field(default_factory=dict)
    state: str = "active"
    #: the paths an undo wrote: redo brings back those, not the files already as before
    wrote: frozenset[str] = frozenset()
    #: a revert's turn: the state it stands at
    to_turn: int = 0


def put(root: Path, rel: str, f: File) -> None:
    """Make the disk hold ``f`` at ``rel`` (as a person or a tool would)."""
    p = root / rel
    if f is None:
        if p.exists():
            p.unlink()
        return
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(f[0])
    p.chmod(f[1])


def on_disk(root: Path) -> dict[str, File]:
    out: dict[str, File] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            st_ = os.lstat(full)
            out[os.path.relpath(full, root)] = (Path(full).read_bytes(), stat.S_IMODE(st_.st_mode))
    return out


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime_ns) of every file: even a rewrite of the same bytes changes it."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st_ = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st_.st_ino, st_.st_mtime_ns)
    return out


counter = count()


class TurnsMachine(RuleBasedStateMachine):
    base: Path

    def __init__(self) -> None:
        super().__init__()
        self.root = self.base / f"ex{next(counter)}"
        self.root.mkdir()
        self.store_path = self.base / f"store{next(counter)}"
        self.ws = takeback.Workspace(self.root, store=self.store_path)
        self.session = self.ws.session("prop")
        self.session.start()
        self.files: dict[str, File] = {}
        self.turns: list[MTurn] = []
        self.ops: list[MOp] = []
        self.turn: takeback.Turn | None = None
        self.touched: dict[str, File] = {}
        self.calls = count()

    def teardown(self) -> None:
        self.ws.close()

    # -- the model's own bookkeeping ---------------------------------------------------

    def now(self, rel: str) -> File:
        """A path as it is: a file as the model has it; a folder as the disk has it.

        Folders are observed, not predicted: a restore removes one only when it is empty,
        and which empty folders are left behind is beside the point of this model.
        """
        if rel in FOLDERS:
            return FOLDER if (self.root / rel).is_dir() else None
        return self.files.get(rel)

    def set_file(self, rel: str, f: File) -> None:
        put(self.root, rel, f)
        if f is None:
            self.files.pop(rel, None)
        else:
            self.files[rel] = f

    def model_end(self) -> dict[str, tuple[File, File]]:
        """End the open turn in the model: files back where they began drop out."""
        t = self.turns[-1]
        assert t.state == "open"
        t.changes = {p: (b, self.now(p)) for p, b in self.touched.items() if b != self.now(p)}
        t.state = "done"
        self.turn = None
        self.touched = {}
        return t.changes

    def end_if_open(self) -> None:
        if self.turn is not None:
            self.model_end()

    def expect_apply(
        self, moves: list[tuple[str, File, File]], force: bool
    ) -> tuple[list[str], list[tuple[str, File]]]:
        conflicts: list[str] = []
        todo: list[tuple[str, File]] = []
        for p, expect, write in moves:
            now = self.now(p)
            if now == write:
                continue
            if now != expect:
                conflicts.append(p)
                if not force:
                    continue
            todo.append((p, write))
        return conflicts, todo

    def run_op(
        self,
        call: Callable[[], takeback.TurnOpResult],
        moves: list[tuple[str, File, File]],
        force: bool,
    ) -> takeback.TurnOpResult | None:
        """Run a real operation the model predicts; check refusals and results.

        Returns None when it refused; a result with ``nothing`` when every path was
        already as it would leave them (nothing written, no snapshot, a reason given).
        """
        conflicts, todo = self.expect_apply(moves, force)
        before = on_disk(self.root), stamps(self.root)
        if conflicts and not force:
            with pytest.raises(takeback.ConflictError) as info:
                call()
            assert sorted(info.value.conflicts) == sorted(conflicts)
            assert (on_disk(self.root), stamps(self.root)) == before  # nothing written
            return None
        log = len(self.ws.log())
        result = call()
        if not todo:
            assert result.nothing and result.reason
            assert result.pre is None and result.restored == [] and result.conflicts == []
            assert (on_disk(self.root), stamps(self.root)) == before  # nothing written
            assert len(self.ws.log()) == log  # no snapshot taken
            return result
        assert not result.nothing
        files_todo = [(p, w) for p, w in todo if p not in FOLDERS]
        assert sorted(p for p in result.restored if not p.endswith("/")) == sorted(
            p for p, _w in files_todo
        )
        # A folder is listed when it was made, or removed (not when kept for what is in it).
        for p in result.restored:
            if p.endswith("/"):
                want = dict(todo)[p[:-1]]
                assert (self.root / p[:-1]).is_dir() == (want is not None)
        assert sorted(result.conflicts) == (sorted(conflicts) if force else [])
        # Nothing is lost: the snapshot taken before holds every file as it was.
        assert result.pre is not None
        for p, _w in files_todo:
            f = self.files.get(p)
            if f is None:
                with pytest.raises(takeback.PathError):
                    self.ws.show(result.pre, p)
            else:
                assert self.ws.show(result.pre, p) == f[0]
        for p, w in files_todo:
            if w is None:
                self.files.pop(p, None)
            else:
                self.files[p] = w
        return result

    # -- turns -------------------------------------------------------------------------

    @rule(label=st.sampled_from(["fix", "refactor", ""]))
    def begin_turn(self, label: str) -> None:
        self.end_if_open()
        self.turn = self.session.turn(label)
        for op in self.ops:
            if op.state == "active":
                op.state = "final"
        self.turns.append(MTurn(len(self.turns) + 1, before=dict(self.files)))
        assert self.turn.n == len(self.turns)
        self.touched = {}

    @precondition(lambda self: self.turn is not None)
    @rule(path=paths, data=contents)
    def tool_write(self, path: str, data: bytes) -> None:
        assert self.turn is not None
        old = self.files.get(path)
        with self.turn.step(tool_call_ids=[f"call_{next(self.calls)}"]) as step:
            kept = step.touch(path)
            assert kept == (path not in self.touched)
            self.touched.setdefault(path, old)
            self.set_file(path, (data, old[1] if old else 0o644))

    @precondition(lambda self: self.turn is not None)
    @rule(path=paths, text=st.sampled_from(TEXTS), data=contents)
    def editor_write(self, path: str, text: str, data: bytes) -> None:
        """A file tool of an editor whose buffer (``text``) differs from the disk."""
        assert self.turn is not None
        old = self.files.get(path)
        with self.turn.step() as step:
            step.touch(path, text=text)
            buf = text.encode()
            disk_bom = old is not None and old[0].startswith(BOM)
            if disk_bom and not buf.startswith(BOM):
                buf = BOM + buf
            elif not disk_bom and buf.startswith(BOM) and old is not None:
                buf = buf[len(BOM) :]
            self.touched.setdefault(path, (buf, old[1] if old else 0o644))
            self.set_file(path, (data, old[1] if old else 0o644))

    @precondition(lambda self: self.turn is not None)
    @rule(path=paths)
    def tool_delete(self, path: str) -> None:
        assert self.turn is not None
        with self.turn.step() as step:
            step.touch(path)
            self.touched.setdefault(path, self.files.get(path))
            self.set_file(path, None)

    @precondition(lambda self: self.turn is not None and bool(self.files))
    @rule(data=st.data(), mode=modes)
    def tool_chmod(self, data: st.DataObject, mode: int) -> None:
        self.tool_chmod_path(data.draw(st.sampled_from(sorted(self.files))), mode)

    def tool_chmod_path(self, path: str, mode: int) -> None:
        assert self.turn is not None
        f = self.files[path]
        assert f is not None
        with self.turn.step() as step:
            step.touch(self.root / path)
            self.touched.setdefault(path, f)
            self.set_file(path, (f[0], mode))

    @precondition(lambda self: self.turn is not None)
    @rule(writes=st.lists(st.tuples(paths, st.one_of(st.none(), contents)), min_size=1, max_size=4))
    def command(self, writes: list[tuple[str, bytes | None]]) -> None:
        """A command that rewrites or deletes several files (found by its snapshots)."""
        assert self.turn is not None
        before = {p: self.now(p) for p in PATHS + FOLDERS}
        with self.turn.command("a command", tool_call_id=f"call_{next(self.calls)}"):
            for path, data in writes:
                old = self.files.get(path)
                self.set_file(path, None if data is None else (data, old[1] if old else 0o644))
        # The folders it made are changes of the turn too.
        for path in PATHS + FOLDERS:
            if before[path] != self.now(path):
                self.touched.setdefault(path, before[path])

    @rule(
        actions=st.lists(
            st.tuples(st.sampled_from(["write", "delete", "chmod"]), paths, contents, modes),
            min_size=1,
            max_size=4,
        ),
        writes=st.lists(st.tuples(paths, st.one_of(st.none(), contents)), max_size=3),
    )
    def whole_turn(
        self, actions: list[tuple[str, str, bytes, int]], writes: list[tuple[str, bytes | None]]
    ) -> None:
        """A whole reply at once: file tools, maybe a command, and the end."""
        self.begin_turn("whole")
        for what, path, data, mode in actions:
            if what == "write":
                self.tool_write(path, data)
            elif what == "delete":
                self.tool_delete(path)
            elif path in self.files:
                self.tool_chmod_path(path, mode)
        if writes:
            self.command(writes)
        self.end_turn()

    @precondition(lambda self: self.turn is not None)
    @rule()
    def end_turn(self) -> None:
        assert self.turn is not None
        turn = self.turn
        expected = self.model_end()
        got = {c.path: c for c in turn.end()}
        assert sorted(got) == sorted(expected)
        for p, (b, a) in expected.items():
            status = "created" if b is None else "deleted" if a is None else "modified"
            assert got[p].status == status
            assert got[p].kind == ("folder" if p in FOLDERS else "file")
            digest = hashlib.sha256(a[0]).hexdigest() if a and p not in FOLDERS else None
            assert got[p].sha256 == digest
            assert got[p].undoable

    # -- a person ----------------------------------------------------------------------

    @rule(path=paths, data=st.one_of(st.none(), contents), mode=modes)
    def person_edit(self, path: str, data: bytes | None, mode: int) -> None:
        self.set_file(path, None if data is None else (data, mode))

    @precondition(lambda self: any(set(t.changes) - set(FOLDERS) for t in self.turns))
    @rule(data=st.data(), new=st.one_of(st.none(), contents), mode=modes)
    def person_edits_a_changed_file(
        self, data: st.DataObject, new: bytes | None, mode: int
    ) -> None:
        """The edits that make conflicts: to a file some turn changed."""
        changed = sorted({p for t in self.turns for p in t.changes if p not in FOLDERS})
        self.set_file(data.draw(st.sampled_from(changed)), None if new is None else (new, mode))

    @rule()
    def restart(self) -> None:
        """The process ends and another one carries on: all that counts is in the store."""
        self.ws.close()
        self.ws = takeback.Workspace(self.root, store=self.store_path)
        self.session = self.ws.session("prop")
        if self.turn is not None:
            self.turn = self.session.current_turn()
            assert self.turn is not None and self.turn.n == len(self.turns)

    # -- rewinding ---------------------------------------------------------------------

    @precondition(lambda self: self.turn is None and bool(self.turns))
    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        """A rewind to the state before a turn: no take-back, the turns' states stay."""
        k = data.draw(st.integers(1, len(self.turns)))
        self.ws.rewind(f"turn:{k}", session="prop")
        # The model's files only: the invariant checks that the rewind wrote them.
        self.files = {p: f for p, f in self.turns[k - 1].before.items() if f is not None}

    # -- taking back -------------------------------------------------------------------

    @rule(
        force=forces,
        which=st.sampled_from(["last", "turn", "file"]),
        k=st.integers(1, 8),
        path=paths,
    )
    def undo(self, force: bool, which: str, k: int, path: str) -> None:
        self.end_if_open()
        turn = k if which == "turn" else None
        file = path if which == "file" else None

        def call() -> takeback.TurnOpResult:
            return self.session.undo(turn=turn, file=file, force=force)

        if turn is None:
            # The last turn that changed something (that file): an empty reply is not it.
            done = [
                t
                for t in self.turns
                if t.state == "done" and (file in t.changes if file is not None else t.changes)
            ]
            if not done:
                if file is not None:
                    with pytest.raises(takeback.UsageError):
                        call()
                else:
                    assert call().nothing
                return
            t = done[-1]
        else:
            found = [t for t in self.turns if t.n == turn]
            if not found or found[0].state != "done":
                with pytest.raises(takeback.UsageError):
                    call()
                return
            t = found[0]
        changes = t.changes
        if file is not None:
            if file not in changes:
                with pytest.raises(takeback.UsageError):
                    call()
                return
            changes = {file: changes[file]}
        moves = [(p, a, b) for p, (b, a) in sorted(changes.items())]
        result = self.run_op(call, moves, force)
        if result is not None:
            assert result.turns == [t.n]
            if file is None:
                t.state = "undone"  # nothing to write too: the next undo goes on
            if not result.nothing:
                self.ops.append(
                    MOp(
                        "undo",
                        [t.n],
                        file,
                        wrote=frozenset(p.rstrip("/") for p in result.restored),
                    )
                )

    @rule(force=forces)
    def redo(self, force: bool) -> None:
        active = [op for op in self.ops if op.kind == "undo" and op.state == "active"]
        call: Callable[[], takeback.TurnOpResult] = lambda: self.session.redo(force=force)  # noqa: E731
        if not active:
            assert call().nothing
            return
        op = active[-1]
        t = self.turns[op.turns[0] - 1]
        changes = t.changes if op.file is None else {op.file: t.changes[op.file]}
        changes = {p: c for p, c in changes.items() if p in op.wrote}
        moves = [(p, b, a) for p, (b, a) in sorted(changes.items())]
        result = self.run_op(call, moves, force)
        if result is not None:
            assert result.turns == [t.n]
            op.state = "redone"
            if op.file is None:
                t.state = "done"

    @rule(force=forces, k=st.integers(0, 7))
    def revert(self, force: bool, k: int) -> None:
        self.end_if_open()

        def call() -> takeback.TurnOpResult:
            return self.session.revert(to_turn=k, force=force)

        if k > len(self.turns):
            with pytest.raises(takeback.UsageError):
                call()
            return
        standing = [op for op in self.ops if op.kind == "revert" and op.state == "active"]
        if standing:
            self.move_revert(standing[-1], k, force, call)
            return
        turns = [t for t in self.turns if t.n > k and t.state == "done"]
        if not turns:
            assert call().nothing
            return
        first: dict[str, File] = {}
        last: dict[str, File] = {}
        for t in turns:
            for p, (b, a) in t.changes.items():
                first.setdefault(p, b)
                last[p] = a
        moves = [(p, last[p], first[p]) for p in sorted(first)]
        pre: dict[str, File] = {**self.files, **{d: self.now(d) for d in FOLDERS}}
        result = self.run_op(call, moves, force)
        if result is not None and result.nothing:
            assert result.turns == [t.n for t in turns]  # and no state moves
        elif result is not None:
            assert result.turns == [t.n for t in turns]
            for t in turns:
                t.state = "reverted"
            self.ops.append(MOp("revert", [t.n for t in turns], pre=pre, to_turn=k))

    def move_revert(
        self, op: MOp, k: int, force: bool, call: Callable[[], takeback.TurnOpResult]
    ) -> None:
        """A revert while one stands: exactly the state turn k left, every later one back."""
        if k == op.to_turn:
            assert call().nothing
            return
        held = set(op.turns)
        live = [
            t for t in self.turns if t.state == "done" or (t.state == "reverted" and t.n in held)
        ]
        low = min(k, op.to_turn)
        moves = []
        for p in sorted({p for t in live if t.n > low for p in t.changes}):
            touching = [(t.n, *t.changes[p]) for t in live if p in t.changes]
            later = [x for x in touching if x[0] > k]
            want = later[0][1] if later else [x for x in touching if x[0] <= k][-1][2]
            by_revert = [x for x in touching if x[0] in held]
            expect = by_revert[0][1] if by_revert else touching[-1][2]
            moves.append((p, expect, want))
        result = self.run_op(call, moves, force)
        if result is not None:
            after = [t.n for t in live if t.n > k]
            assert result.turns == sorted(held.symmetric_difference(after))
            for t in live:
                t.state = "reverted" if t.n > k else "done"
            op.turns, op.to_turn = after, k
            if not after:
                op.state = "unreverted"

    @rule(force=forces)
    def unrevert(self, force: bool) -> None:
        active = [op for op in self.ops if op.kind == "revert" and op.state == "active"]
        call: Callable[[], takeback.TurnOpResult] = lambda: self.session.unrevert(force=force)  # noqa: E731
        if not active:
            assert call().nothing
            return
        op = active[-1]
        first: dict[str, File] = {}
        for n in op.turns:
            for p, (b, _a) in self.turns[n - 1].changes.items():
                first.setdefault(p, b)
        moves = [(p, first[p], op.pre.get(p)) for p in sorted(first)]
        result = self.run_op(call, moves, force)
        if result is not None:
            op.state = "unreverted"
            for n in op.turns:
                self.turns[n - 1].state = "done"

    @rule(
        batch=st.lists(
            st.tuples(
                st.sampled_from(["undo", "undo-turn", "undo-file", "redo", "revert", "unrevert"]),
                forces,
                st.integers(0, 6),
                paths,
            ),
            min_size=1,
            max_size=5,
        )
    )
    def take_backs(self, batch: list[tuple[str, bool, int, str]]) -> None:
        """Several take-backs in a row (walking back and forth through the turns)."""
        for what, force, k, path in batch:
            if what.startswith("undo"):
                which = {"undo": "last", "undo-turn": "turn", "undo-file": "file"}[what]
                self.undo(force, which, max(k, 1), path)
            elif what == "redo":
                self.redo(force)
            elif what == "revert":
                self.revert(force, k)
            else:
                self.unrevert(force)

    # -- what must always hold ---------------------------------------------------------

    @invariant()
    def folder_is_what_the_model_says(self) -> None:
        assert on_disk(self.root) == {p: f for p, f in self.files.items() if f is not None}

    @invariant()
    def turn_states_match(self) -> None:
        if not self.turns:
            return
        assert [t.state for t in self.session.turns()] == [t.state for t in self.turns]


def test_turns_state_machine(tmp_path: Path) -> None:
    TurnsMachine.base = tmp_path
    run_state_machine_as_test(
        TurnsMachine,
        # No example database: a test writes nothing outside its tmp_path.
        settings=settings(
            max_examples=40,
            stateful_step_count=40,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
