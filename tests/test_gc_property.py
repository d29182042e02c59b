"""A property test of gc: random histories, then gc with a random policy.

Two sessions take turns of file-tool writes and commands, and undo, redo, revert,
unrevert and rewind at random (forced, so that no conflict stops them); a person takes
snapshots in between. Then gc runs with a random policy at a random moment; between its
mark and its sweep (or between two of its steps), the folder may be put back as it was
at a random earlier snapshot and a snapshot taken, which names objects gc's mark found
unreached without storing them again; or a scan there dies after storing an edit of a
file put back so (its objects named by nothing, the edit a delta of a version gc may
drop), the folder is put back as it is now, and after gc the edit is made again and
snapshotted (the snapshot names the edit's blob, stored already). Whatever the history,
the policy and the moment:
the store passes ``fsck --read-data``; every snapshot left in it gives back exactly the
files the folder held when it was taken; a rewind to one of them (and to the snapshot
taken meanwhile) puts the folder back byte for byte; the undo of the newest turn still
works.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import takeback
from takeback.ops._snapshot import _scan

from ._gc import Recorded
from .conftest import files_state, write

pytestmark = pytest.mark.slow

PATHS = ["a.txt", "b.txt", "d/c.txt", "d/e/f.txt"]
SESSIONS = ["one", "two"]

turns = st.tuples(
    st.just("turn"),
    st.sampled_from(SESSIONS),
    st.lists(st.tuples(st.sampled_from(PATHS), st.integers(0, 5)), min_size=1, max_size=3),
    st.booleans(),
)
actions = st.lists(
    st.one_of(
        turns,
        turns,
        turns,
        st.tuples(
            st.sampled_from(["undo", "redo", "unrevert", "snapshot"]), st.sampled_from(SESSIONS)
        ),
        st.tuples(st.just("revert"), st.sampled_from(SESSIONS), st.integers(0, 4)),
        st.tuples(st.just("rewind"), st.sampled_from(SESSIONS), st.integers(0, 1000)),
    ),
    min_size=3,
    max_size=16,
)


_LINES = [hashlib.sha256(b"%d" % i).hexdigest() for i in range(48)]


def _body(k: int) -> bytes:
    """Versions of one file that share most lines (so later ones are stored as deltas)."""
    lines = list(_LINES)
    lines[k * 7] = f"version {k}"
    return "\n".join(lines[: 40 + k]).encode()


def _play(ws: takeback.Workspace, root: Path, steps: list[tuple[object, ...]]) -> None:
    written = 0
    for step in steps:
        kind, name = step[0], str(step[1])
        session = ws.session(name)
        try:
            if kind == "turn":
                edits, command = step[2], step[3]
                assert isinstance(edits, list)
                with session.turn(f"turn in {name}") as turn:
                    for path, k in edits:
                        turn.touch(path)
                        written += 1  # every write a new version, most of it the last one's
                        write(root, path, _body(k) + b"\nwrite %d\n" % written)
                    if command:
                        # Found by the snapshot after it: stored as a delta of the last
                        # version the scan saw.
                        with turn.command("rewrite f, remove b"):
                            written += 1
                            write(root, "d/e/f.txt", _body(written % 6) + b"%d\n" % written)
                            (root / "b.txt").unlink(missing_ok=True)
            elif kind == "undo":
                session.undo(force=True)
            elif kind == "redo":
                session.redo(force=True)
            elif kind == "unrevert":
                session.unrevert(force=True)
            elif kind == "revert":
                session.revert(to_turn=int(str(step[2])), force=True)
            elif kind == "snapshot":
                ws.snapshot("a person's", session=name)
            elif kind == "rewind":
                ids = [s.id for s in ws.log(name)]
                if ids:
                    ws.rewind(ids[int(str(step[2])) % len(ids)], session=name)
        except (takeback.UsageError, takeback.ConflictError):
            pass


def _put_back(root: Path, state: dict[str, tuple[str, bytes]]) -> None:
    """Write the files as a snapshot recorded them (the folders stay)."""
    for path in PATHS:
        if path in state and state[path][0] == "f":
            write(root, path, state[path][1])
        else:
            (root / path).unlink(missing_ok=True)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@example(  # deltas chained through the command's rewrites: gc cuts the chain
    steps=[("turn", "one", [("a.txt", k % 6)], True) for k in range(6)],
    keep_turns=1,
    keep_days=0.0,
    days_later=0.0,
    meanwhile=None,
    dead=False,
)
@example(  # the first version put back between the mark and the sweep: reached again
    steps=[("turn", "one", [("a.txt", k % 6)], True) for k in range(6)],
    keep_turns=1,
    keep_days=0.0,
    days_later=0.0,
    meanwhile=("history", 1),
    dead=False,
)
@example(  # a scan that died meanwhile stored an edit as a delta of a doomed version
    steps=[("turn", "one", [("a.txt", k % 6)], True) for k in range(6)],
    keep_turns=1,
    keep_days=0.0,
    days_later=0.0,
    meanwhile=("history", 2),
    dead=True,
)
@given(
    steps=actions,
    keep_turns=st.integers(1, 4),
    keep_days=st.sampled_from([0.0, 1.0, 30.0]),
    days_later=st.sampled_from([0.0, 2.0, 45.0]),
    meanwhile=st.one_of(
        st.none(),
        st.tuples(st.sampled_from(["rewrite", "history", "objects"]), st.integers(0, 1000)),
    ),
    dead=st.booleans(),
)
def test_gc_keeps_every_kept_ref_whole(
    steps: list[tuple[object, ...]],
    keep_turns: int,
    keep_days: float,
    days_later: float,
    meanwhile: tuple[str, int] | None,
    dead: bool,
) -> None:
    with tempfile.TemporaryDirectory() as d:
        root, store = Path(d) / "ws", Path(d) / "store"
        root.mkdir()
        for p in PATHS[:2]:
            write(root, p, _body(0))
        with takeback.Workspace(root, store=store) as ws:
            rec = Recorded(ws, root)
            ws.session("one").start()
            _play(ws, root, steps)
            before = {s.id for s in ws.log()}
            taken: list[str] = []
            edits: list[tuple[str, bytes]] = []

            def pause(name: str) -> None:
                # gc holds no exclusive lock here: a snapshot runs as another's would.
                if meanwhile is None or name != meanwhile[0] or taken or edits:
                    return
                order = [sid for sid in rec.expected if sid in before]
                now = files_state(root)
                back = rec.expected[order[meanwhile[1] % len(order)]]
                _put_back(root, back)
                if not dead:
                    taken.append(ws.snapshot("meanwhile", session="one").id)
                    return
                ws.status()  # a scan that saves its cache and writes no snapshot
                # An edit of a file put back: stored as a delta of the version put back.
                path = next((p for p in PATHS if p in back and back[p][0] == "f"), PATHS[0])
                was = back[path][1] if path in back else _body(0)
                edits.append((path, was + b"\nedited, then its scan died\n"))
                write(root, path, edits[0][1])
                store = ws.open_store()
                with store.lock(exclusive=False):
                    _scan(store, ws.options)  # its objects are committed; it dies here
                _put_back(root, now)
                ws.status()  # the cache that names the edit is replaced before gc reads it

            result = ws.gc(
                keep_turns=keep_turns,
                keep_days=keep_days,
                now=time.time() + days_later * 86400,
                pause=pause,
            )
            fsck = ws.fsck(read_data=True)
            assert fsck.clean, fsck.problems
            kept = rec.check()
            assert set(taken) <= set(kept)
            assert len(before) + len(taken) - len(kept) == result.snapshots
            for sid in taken:
                ws.rewind(sid)
                assert files_state(root) == rec.expected[sid]
            for path, edit in edits:
                write(root, path, edit)
                again_id = ws.snapshot("the dead scan's edit again", session="one").id
                write(root, path, b"changed after\n")
                ws.rewind(again_id)
                assert (root / path).read_bytes() == edit
                fsck = ws.fsck(read_data=True)
                assert fsck.clean, fsck.problems
            for name in SESSIONS:
                info = ws.open_store().meta.session(name)
                if info is not None:
                    assert info.baseline in kept
            if kept:
                target = kept[len(kept) // 2]
                ws.rewind(target)
                assert files_state(root) == rec.expected[target]
            for name in SESSIONS:
                try:
                    ws.session(name).undo(force=True)
                except takeback.UsageError:
                    pass
            again = ws.gc(keep_turns=keep_turns, keep_days=keep_days)
            assert again.turns == 0 or keep_days < 30
            fsck = ws.fsck(read_data=True)
            assert fsck.clean, fsck.problems
            rec.check()
