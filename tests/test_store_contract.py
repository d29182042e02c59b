"""Store seam: one contract, run against every store (the folder store and PostgreSQL).

Each test opens a store through ``open_store`` and uses only the seam (``Store``,
``Objects``, ``Meta``); a second opening of the same store stands for another process or
another server.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from takeback.errors import StoreCorruptError, StoreError, StoreMissingError
from takeback.model import SessionInfo, SnapshotInfo, StepInfo
from takeback.store import ChangeRow, Store, open_store

from ._postgres import PgServer, pg_server

__all__ = ["pg_server"]

Opener = Callable[..., Store]

_databases = itertools.count(1)


@pytest.fixture(scope="module")
def contract_db(pg_server: PgServer) -> str:
    """One database for the module: each test's workspace has its own key in it.

    Named anew each time: a worker of pytest-xdist that runs this module's tests among
    others' can make the module's fixtures more than once, on the same server.
    """
    return pg_server.create_db(f"contract{os.getpid()}_{next(_databases)}")


# On a database in the quick tier too: the PostgreSQL store's tests there.
@pytest.fixture(
    params=["folder", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.quick])]
)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Return a function that opens (a new handle on) this test's store."""
    root = str(tmp_path / "ws")
    os.makedirs(root, exist_ok=True)
    if request.param == "folder":
        spec = str(tmp_path / "store")
    else:
        spec = request.getfixturevalue("contract_db")
    opened: list[Store] = []

    def open_(create: bool = True, machine: int = 0) -> Store:
        local = str(tmp_path / f"local{machine}")
        s = open_store(spec, root, local=local, create=create)
        opened.append(s)
        return s

    yield open_
    for s in opened:
        try:
            s.close()
        except StoreError:
            pass


def snap(sid: str, tree: str, session: str | None = None, message: str = "") -> SnapshotInfo:
    return SnapshotInfo(
        id=sid,
        tree=tree,
        created_at=1000.0 + int(sid[:4], 16),
        kind="manual",
        session=session,
        turn=None,
        step=None,
        message=message,
        files=3,
        skipped=("big.bin",),
        skipped_count=1,
        duration_ms=5,
        unreadable=(("locked", "permission denied"),),
        unreadable_count=1,
    )


def test_a_missing_store_is_missing_until_made(opener: Opener) -> None:
    with pytest.raises(StoreMissingError):
        opener(create=False)
    opener(create=True)
    opener(create=False)


def test_objects_are_named_by_their_hash_written_once_and_checked(opener: Opener) -> None:
    a, b = opener(), opener(machine=1)
    data = b"hello\n" * 1000
    oid = a.objects.put("blob", data)
    assert oid == hashlib.sha256(data).hexdigest()
    assert a.objects.has(oid)
    assert not b.objects.has(oid)  # not committed yet: another process cannot see it
    a.objects.flush()
    assert b.objects.has(oid)
    assert b.objects.get(oid) == data
    # Another process writing the same object meets the existing row: fine.
    assert b.objects.put("blob", data) == oid
    b.objects.flush()
    assert a.objects.get(oid) == data
    with pytest.raises(StoreCorruptError, match="missing"):
        a.objects.get("0" * 64)


def test_deltas_read_back_through_their_base_and_repair_keeps_them(opener: Opener) -> None:
    s = opener()
    v1 = bytes(range(256)) * 40
    v2 = v1[:5000] + b"changed" + v1[5000:]
    o1 = s.objects.put("blob", v1)
    o2 = s.objects.put("blob", v2, base=o1)
    s.objects.flush()
    other = opener()
    assert other.objects.get(o2) == v2
    assert other.objects.repair("blob", v1)
    assert opener().objects.get(o2) == v2


def test_trees_decode(opener: Opener) -> None:
    from takeback.model import FILE, Entry, Tree, encode_tree

    s = opener()
    blob = s.objects.put("blob", b"x")
    tree: Tree = {"a.txt": Entry(FILE, 0o644, blob, 1)}
    tid = s.objects.put("tree", encode_tree(tree))
    s.objects.flush()
    assert opener().objects.get_tree(tid) == tree


def test_tree_changes_are_the_entries_that_differ_and_a_damaged_tree_is_named(
    opener: Opener,
) -> None:
    from takeback.model import DIR, FILE, Entry, Tree, encode_tree

    s = opener()
    x, y = s.objects.put("blob", b"x" * 300), s.objects.put("blob", b"y" * 300)
    sub = s.objects.put("tree", encode_tree({"f": Entry(FILE, 0o644, x, 300)}))
    old: Tree = {
        "same.txt": Entry(FILE, 0o644, x, 300),
        "edited.txt": Entry(FILE, 0o644, x, 300),
        "gone.txt": Entry(FILE, 0o644, y, 300),
        "dir": Entry(DIR, 0o755, sub, 0),
    }
    new: Tree = {**old, "edited.txt": Entry(FILE, 0o644, y, 300), "made.txt": old["gone.txt"]}
    del new["gone.txt"]
    a_id = s.objects.put("tree", encode_tree(old))
    b_id = s.objects.put("tree", encode_tree(new), None, a_id)  # a delta on the old
    s.objects.flush()
    for store in (s, opener()):  # in memory, and read back by another handle
        a, b = store.objects.tree_changes(a_id, b_id)
        assert a == {"edited.txt": old["edited.txt"], "gone.txt": old["gone.txt"]}
        assert b == {"edited.txt": new["edited.txt"], "made.txt": new["made.txt"]}
        assert store.objects.tree_changes(None, b_id) == ({}, new)
        assert store.objects.tree_changes(a_id, None) == (old, {})
    # Decoded already on both sides: the same answer from the decoded trees.
    t = opener()
    t.objects.get_tree(a_id), t.objects.get_tree(b_id)
    assert t.objects.tree_changes(a_id, b_id) == s.objects.tree_changes(a_id, b_id)
    # Stored bytes that hash right but are no tree: an error naming that tree.
    bad = s.objects.put("tree", b"not a tree")
    s.objects.flush()
    with pytest.raises(StoreCorruptError, match=bad[:12]):
        opener().objects.tree_changes(a_id, bad)
    with pytest.raises(StoreCorruptError, match=bad[:12]):
        opener().objects.tree_changes(bad, a_id)


def test_an_object_known_stored_is_its_bytes_from_memory_or_read(opener: Opener) -> None:
    from takeback.model import FILE, Entry, encode_tree

    s = opener()
    blob = s.objects.put("blob", b"x" * 300)
    body = encode_tree({"a": Entry(FILE, 0o644, blob, 300)})
    tid = s.objects.put("tree", body)
    s.objects.flush()
    # Stored lately by this process, or read back by another handle: the same bytes.
    assert s.objects.get_stored(tid) == body
    assert opener().objects.get_stored(tid) == body
    assert opener().objects.get_stored(blob) == b"x" * 300


def test_objects_read_ahead_are_had_from_memory_by_any_handle(
    opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    from takeback.model import FILE, Entry, encode_tree
    from takeback.store import _objects

    monkeypatch.setattr(_objects, "_RECENT", {})
    monkeypatch.setattr(_objects, "_RECENT_SIZE", [0])
    s = opener()
    bodies = [
        encode_tree({f"f{i}.{n}": Entry(FILE, 0o644, "a" * 64, n) for n in range(40)})
        for i in range(3)
    ]
    ids = [s.objects.put("tree", b) for b in bodies]
    s.objects.flush()
    _objects._RECENT.clear()
    _objects._RECENT_SIZE[0] = 0
    assert opener().objects.read_ahead([*ids, "f" * 64]) == 3
    other = opener().objects
    monkeypatch.setattr(other, "get", lambda oid: pytest.fail(f"{oid} read again"))
    assert [other.get_stored(t) for t in ids] == bodies


def _tree(s: Store) -> str:
    from takeback.model import encode_tree

    tid = s.objects.put("tree", encode_tree({}))
    s.objects.flush()
    return tid


def test_snapshots_by_id_prefix_session_and_order(opener: Opener) -> None:
    s = opener()
    tree = _tree(s)
    with s.meta.tx():
        s.meta.add_snapshot(snap("aaaa" + "0" * 60, tree, message="first"))
        s.meta.add_snapshot(snap("aaab" + "1" * 60, tree, session="x"))
        s.meta.add_snapshot(snap("0bcd" + "2" * 60, tree))
    r = opener()
    got = r.meta.snapshot("aaaa" + "0" * 60)
    assert got == snap("aaaa" + "0" * 60, tree, message="first")
    assert r.meta.snapshot("f" * 64) is None
    assert sorted(r.meta.snapshot_ids_with_prefix("aaa")) == ["aaaa" + "0" * 60, "aaab" + "1" * 60]
    assert r.meta.snapshot_ids_with_prefix("ab") == []
    assert [x.id[:4] for x in r.meta.snapshots()] == ["0bcd", "aaab", "aaaa"]  # newest first
    assert [x.id[:4] for x in r.meta.snapshots(limit=1)] == ["0bcd"]
    assert [x.id[:4] for x in r.meta.snapshots(limit=2**70)] == ["0bcd", "aaab", "aaaa"]
    assert [x.id[:4] for x in r.meta.snapshots(limit=-1)] == ["0bcd", "aaab", "aaaa"]
    assert r.meta.snapshots(limit=0) == []
    assert [x.id[:4] for x in r.meta.snapshots("x")] == ["aaab"]
    latest = r.meta.latest_snapshot()
    assert latest is not None and latest.id[:4] == "0bcd"
    lx = r.meta.latest_snapshot("x")
    assert lx is not None and lx.id[:4] == "aaab"
    assert r.meta.last_recording_session() == "x"


def test_a_failed_transaction_leaves_nothing(opener: Opener) -> None:
    s = opener()
    tree = _tree(s)
    with pytest.raises(RuntimeError), s.meta.tx():
        s.meta.add_snapshot(snap("cccc" + "0" * 60, tree))
        raise RuntimeError("midway")
    assert s.meta.snapshot("cccc" + "0" * 60) is None
    assert opener().meta.snapshot("cccc" + "0" * 60) is None
    # A row naming a snapshot that is not there is refused, as one StoreError.
    with pytest.raises(StoreError), s.meta.tx():
        s.meta.add_session(SessionInfo("s", "d" * 64, 1.0))
    assert s.meta.session("s") is None


def test_a_transaction_inside_another_joins_it_and_only_the_outermost_commits(
    opener: Opener,
) -> None:
    s, other = opener(), opener(machine=1)
    tree = _tree(s)
    a, b = "a0" * 32, "b0" * 32
    with s.meta.tx():
        s.meta.add_snapshot(snap(a, tree))
        with s.meta.tx():
            s.meta.add_snapshot(snap(b, tree))
            with s.meta.tx():  # any depth
                s.meta.set_kv("dirs-t", b"cache")
        # The inner blocks committed nothing: another process sees none of it yet.
        assert other.meta.snapshot(a) is None and other.meta.snapshot(b) is None
        assert s.meta.snapshot(b) is not None  # this one reads its own writes
    assert other.meta.snapshot(a) is not None and other.meta.snapshot(b) is not None
    assert opener().meta.get_kv("dirs-t") == b"cache"  # the scan cache's write too


def test_a_failed_inner_transaction_undoes_its_own_writes_only(opener: Opener) -> None:
    s = opener()
    tree = _tree(s)
    kept, lost, named = "c0" * 32, "d0" * 32, "e0" * 32
    with s.meta.tx():
        s.meta.add_snapshot(snap(kept, tree))
        with pytest.raises(RuntimeError), s.meta.tx():
            s.meta.add_snapshot(snap(lost, tree))
            s.meta.set_kv("dirs-lost", b"x")
            raise RuntimeError("midway")
        assert s.meta.snapshot(lost) is None and s.meta.snapshot(kept) is not None
        # A write the store refuses fails its own block, as one StoreError; the
        # transaction around it goes on.
        with pytest.raises(StoreError), s.meta.tx():
            s.meta.add_session(SessionInfo("s", "f" * 64, 1.0))
        s.meta.add_snapshot(snap(named, tree))
    r = opener()
    assert r.meta.snapshot(kept) is not None and r.meta.snapshot(named) is not None
    assert r.meta.snapshot(lost) is None and r.meta.session("s") is None
    assert r.meta.get_kv("dirs-lost") is None
    # The outer block failing undoes what its inner blocks did.
    with pytest.raises(RuntimeError), s.meta.tx():
        with s.meta.tx():
            s.meta.add_snapshot(snap(lost, tree))
            s.meta.set_kv("dirs-lost", b"x")
        raise RuntimeError("after the inner block")
    assert opener().meta.snapshot(lost) is None and opener().meta.get_kv("dirs-lost") is None
    # And the store is as usable after all of it.
    with s.meta.tx():
        s.meta.add_snapshot(snap(lost, tree))
    assert opener().meta.snapshot(lost) is not None


def _with_session(s: Store, name: str = "s") -> str:
    tree = _tree(s)
    sid = hashlib.sha256(name.encode()).hexdigest()
    with s.meta.tx():
        s.meta.add_snapshot(snap(sid, tree, session=name))
        s.meta.add_session(SessionInfo(name, sid, 5.0))
    return sid


def test_sessions_and_steps(opener: Opener) -> None:
    s = opener()
    base = _with_session(s)
    with s.meta.tx():
        assert s.meta.next_step("s") == 1
        s.meta.add_step(StepInfo("s", 1, None, None, None, "ls", None, command=True))
        assert s.meta.next_step("s") == 2
        s.meta.set_step_start("s", 1, before=base, turn=None)
        s.meta.finish_step("s", 1, base, 3)
    r = opener()
    assert r.meta.session("s") == SessionInfo("s", base, 5.0)
    assert r.meta.sessions() == [SessionInfo("s", base, 5.0)]
    assert r.meta.step("s", 1) == StepInfo("s", 1, None, base, base, "ls", 3, command=True)
    assert r.meta.step("s", 2) is None
    assert r.meta.step("s", 2**70) is None
    assert r.meta.steps("s") == [StepInfo("s", 1, None, base, base, "ls", 3, command=True)]


def test_turns_touches_and_change_lists(opener: Opener) -> None:
    s = opener()
    base = _with_session(s)
    _with_session(s, "t")
    with s.meta.tx():
        s.meta.add_turn("s", 1, "fix it", base, 10.0)
        s.meta.add_turn("t", 1, "", base, 11.0)
    assert s.meta.turn_row("s", 1) == (1, "fix it", base, None, "open")
    with s.meta.tx():
        assert s.meta.add_touch("s", 1, "a.txt", "old", "call-1", at=20.0)
        assert not s.meta.add_touch("s", 1, "a.txt", "newer", "call-1", at=30.0)
        assert not s.meta.add_touch("s", 1, "a.txt", "earlier", "call-1", at=15.0)
        assert s.meta.add_touch("s", 1, "b.txt", None, "call-2", at=20.0)
        assert not s.meta.add_touch("s", 1, "b.txt", None, "call-3", at=21.0)
        # A step whose end was never seen changed b.txt too: unconfirmed, once said.
        assert not s.meta.add_touch("s", 1, "b.txt", None, None, at=22.0, unconfirmed=True)
        assert not s.meta.add_touch("s", 1, "b.txt", None, None, at=23.0)
        name = os.fsdecode(b"caf\xe9.txt")  # not UTF-8: kept as its bytes
        assert s.meta.add_touch("t", 1, name, "x", None, at=40.0)
    r = opener()
    touches = r.meta.touches("s", 1)
    assert touches["a.txt"] == ("earlier", "call-1", False)  # the earliest state, one call
    assert touches["b.txt"] == (None, None, True)  # two calls: no one call's change
    assert r.meta.claimed_by_others("s", 100.0) == {name}  # t's turn is open
    assert r.meta.claimed_by_others("t", 100.0) == {"a.txt", "b.txt"}
    rows = [
        ChangeRow("z.txt", "created", 1, 0, None, "s1", "ab" * 32, True),
        ChangeRow(
            name, "modified", 2, 3, "s0", "s1", "cd" * 32, True, approximate=True, unconfirmed=True
        ),
        ChangeRow("a.txt", "deleted", 0, 4, "s0", None, None, False),
    ]
    with s.meta.tx():
        s.meta.set_changes("s", 1, rows[1:])
        s.meta.set_changes("s", 1, rows)  # replaces
        s.meta.set_turn_state("s", 1, "done", ended=50.0)
        s.meta.set_turn_state("t", 1, "done", ended=60.0)
        s.meta.set_turn_state("s", 1, "undone")
    r = opener()
    assert r.meta.change_rows("s", 1) == sorted(rows, key=lambda c: os.fsencode(c.path))
    assert [c.path for c in r.meta.changes("s", 1)] == ["a.txt", name, "z.txt"]
    assert r.meta.changes("s", 1)[1].approximate and r.meta.changes("s", 1)[1].unconfirmed
    assert not r.meta.changes("s", 1)[0].unconfirmed
    assert r.meta.turn_rows("s") == [(1, "fix it", base, None, "undone")]
    assert r.meta.turn_end_times("s") == {1: 50.0}
    assert r.meta.last_ended_turn_session() == "t"
    assert r.meta.turn_row("s", 2) is None


def test_ops(opener: Opener) -> None:
    s = opener()
    base = _with_session(s)
    with s.meta.tx():
        first = s.meta.add_op("s", "undo", [1], base, {"wrote": {"a": "x"}}, 100.0)
        second = s.meta.add_op("s", "revert", [2, 3], None, {"wrote": {"a": None}}, 200.0)
        s.meta.set_op_state(first, "redone")
        s.meta.update_op(second, [3], {"wrote": {"b": "y"}, "to_turn": 2})
    assert second > first
    r = opener()
    ops = r.meta.ops("s")
    assert [(o.id, o.kind, o.turns, o.pre, o.state) for o in ops] == [
        (second, "revert", [3], None, "active"),
        (first, "undo", [1], base, "redone"),
    ]
    assert r.meta.ops("s", kind="undo")[0].data == {"wrote": {"a": "x"}}
    assert [o.id for o in r.meta.ops("s", state="active")] == [second]
    assert r.meta.op_times("s") == {first: 100.0, second: 200.0}
    assert r.meta.written_since(50.0) == {"a": "x", "b": "y"}
    assert r.meta.written_since(150.0) == {"b": "y"}


def test_settings_and_the_scan_cache(opener: Opener) -> None:
    s = opener()
    with s.meta.tx():
        s.meta.set_meta("retention", "30d")
        s.meta.set_kv("dirs-v1", b"cache")
        s.meta.set_kvs({"dirs-v1/000": b"a", "dirs-v1/001": b"b", "dirs-v1/002": b"c"})
        s.meta.set_kv("dirs-v0", b"old")
        s.meta.set_kv("dirs-v0/000", b"old shard")
        s.meta.set_kv("dirs-v1-x", b"between the kept key and its shards")
        s.meta.set_kv("dirs-v2", b"after them")
        s.meta.set_kv("service-mark", b"not the cache's")
        s.meta.put_dircache({"src": b"rows", "gone": b"x"})
    assert s.meta.get_meta("retention") == "30d"
    assert opener().meta.get_meta("retention") == "30d"
    assert s.meta.get_meta("nothing") is None
    assert s.meta.get_kv("dirs-v1") == b"cache"
    with s.meta.tx():
        # A shard is replaced, one deleted, one left as it was.
        s.meta.set_kvs({"dirs-v1/000": b"A", "dirs-v1/001": None})
    assert s.meta.get_kv_prefix("dirs-v1") == [
        ("dirs-v1", b"cache"),
        ("dirs-v1-x", b"between the kept key and its shards"),
        ("dirs-v1/000", b"A"),
        ("dirs-v1/002", b"c"),
    ]
    with s.meta.tx():
        assert s.meta.drop_kv_except("dirs-v1", prefix="dirs-")
        s.meta.put_dircache({"gone": None})
    assert s.meta.get_kv("dirs-v0") is None
    assert s.meta.get_kv_prefix("dirs-v0") == []
    assert s.meta.get_kv("service-mark") == b"not the cache's"
    assert [k for k, _v in s.meta.get_kv_prefix("dirs-")] == [
        "dirs-v1",
        "dirs-v1/000",
        "dirs-v1/002",
    ]
    assert s.meta.dircache_dirs() == ["src"]
    assert s.meta.get_dircache(["src", "gone"]) == {"src": b"rows"}
    s.close()
    # The next process on this machine finds the cache where this one left it.
    again = opener()
    assert again.meta.get_kv("dirs-v1") == b"cache"
    assert again.meta.get_kv_prefix("dirs-v1/") == [("dirs-v1/000", b"A"), ("dirs-v1/002", b"c")]
    assert again.meta.get_dircache(["src"]) == {"src": b"rows"}


def test_the_lock_and_the_journal_are_seen_by_another_process(opener: Opener) -> None:
    a, b = opener(), opener(machine=1)
    assert not b.restore_running()
    with a.lock(exclusive=True):
        with a.lock(exclusive=True):  # re-entrant
            pass
        assert b.restore_running()
        assert not a.restore_running()  # its own lock is no other's restore
        a.write_journal({"op": "rewind", "pre": "abc", "paths": ["x"]})
        assert b.read_journal() == {"op": "rewind", "pre": "abc", "paths": ["x"]}
    assert not b.restore_running()
    with a.lock(exclusive=False), b.lock(exclusive=False):  # shared locks share
        assert not b.restore_running()
    a.clear_journal()
    assert b.read_journal() is None
    a.clear_journal()  # twice is fine


def test_the_lock_is_re_entrant_and_a_shared_hold_never_becomes_exclusive(opener: Opener) -> None:
    a, b = opener(), opener(machine=1)
    with a.lock(exclusive=False):
        with a.lock(exclusive=False):
            pass
        with pytest.raises(RuntimeError, match="upgrade"), a.lock(exclusive=True):
            pass
        with a.lock(exclusive=False):  # still held, and still re-entrant
            assert not b.restore_running()
    with a.lock(exclusive=True), a.lock(exclusive=False):  # exclusive covers shared
        assert b.restore_running()
    with b.lock(exclusive=True):  # every hold was given back
        assert a.restore_running()


def test_events_are_logged_without_raising(opener: Opener) -> None:
    s = opener()
    s.log_event({"event": "snapshot.taken", "id": "x"})
    s.log_event({"event": "weird", "value": object.__name__})


# -- what gc, purge, fsck and du use ------------------------------------------------


def test_the_object_index_rewriting_whole_and_deleting(opener: Opener) -> None:
    s = opener()
    v1 = bytes(range(256)) * 40
    v2 = v1[:5000] + b"changed" + v1[5000:]
    o1 = s.objects.put("blob", v1)
    o2 = s.objects.put("blob", v2, base=o1)
    small = s.objects.put("blob", b"small")
    index = s.objects.index()  # pending objects are committed first
    assert index.keys() == {o1, o2, small}
    assert (index[o1].base, index[o1].depth, index[o2].base, index[o2].depth) == (None, 0, o1, 1)
    assert index[o2].kind == "blob" and 0 < index[o2].stored < index[o1].stored
    # The bases of a few named objects, as another process reads them (absent ones left out).
    assert opener().objects.bases([o2, o1, "0" * 64]) == {o2: o1, o1: None}
    assert s.objects.rewrite_whole([o2, "0" * 64]) == ["0" * 64]  # one it cannot read
    other = opener()
    assert other.objects.index()[o2].base is None
    other.objects.delete([o1, small])
    assert not opener().objects.has(o1) and opener().objects.index().keys() == {o2}
    assert opener().objects.get(o2) == v2
    assert s.size_on_disk() > 0 and sum(s.size_by_part().values()) > 0
    assert s.check_files() == []
    s.reclaim()


def test_rows_stored_after_a_mark_are_listed_whatever_names_them(opener: Opener) -> None:
    s, other = opener(), opener(machine=1)
    v1 = bytes(range(256)) * 40
    o1 = s.objects.put("blob", v1)
    old = s.objects.put("blob", b"old and doomed")
    s.objects.flush()
    mark = other.objects.stored_mark()
    assert other.objects.stored_after(mark) == []
    # Stored by another handle after the mark: listed with its delta base, and pending
    # objects of the handle asked are committed first.
    o2 = s.objects.put("blob", v1[:5000] + b"changed" + v1[5000:], base=o1)
    s.objects.flush()
    o3 = other.objects.put("blob", b"pending here")
    assert sorted(other.objects.stored_after(mark)) == sorted([(o2, o1), (o3, None)])
    # Deleting the newest rows never lets a later row be numbered at or below a mark
    # read after the deletion.
    later = other.objects.stored_mark()
    other.objects.delete([o3, o2, old])
    after = other.objects.stored_mark()
    assert after <= later
    o4 = s.objects.put("blob", b"stored after the deletion")
    s.objects.flush()
    assert other.objects.stored_after(after) == [(o4, None)]


def test_one_gc_at_a_time(opener: Opener) -> None:
    """A second holder of the gc lock waits for the first; nothing else waits for it."""
    import threading

    a, b, c = opener(), opener(machine=1), opener(machine=2)
    order: list[str] = []
    with a.gc_lock():
        waiter = threading.Thread(target=lambda: _hold_gc_lock(b, order))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and order == []  # b waits
        with c.lock(exclusive=True):  # the store's own lock is not the gc lock
            pass
        order.append("a done")
    waiter.join(10)
    assert order == ["a done", "b held"]


def _hold_gc_lock(store: Store, order: list[str]) -> None:
    with store.gc_lock():
        order.append("b held")


def test_the_whole_history_and_dropping_part_of_it(opener: Opener) -> None:
    s = opener()
    base = _with_session(s)
    tree = _tree(s)
    old, new = "a1" * 32, "b2" * 32
    with s.meta.tx():
        s.meta.add_snapshot(snap(old, tree, session="s"))
        s.meta.add_snapshot(snap(new, tree, session="s"))
        s.meta.add_turn("s", 1, "one", old, 10.0)
        s.meta.add_turn("s", 2, "two", new, 20.0)
        s.meta.add_touch("s", 1, "a.txt", "state-a", None, at=11.0)
        s.meta.set_changes("s", 2, [ChangeRow("b.txt", "created", 1, 0, None, "st", None, True)])
        s.meta.add_step(StepInfo("s", 1, 1, old, new, "make", 0, command=True))
        op = s.meta.add_op("s", "undo", [2], new, {"wrote": {"b.txt": None}}, 30.0)
    r = opener()
    assert [x[0] for x in r.meta.snapshot_rows()] == [base, old, new]
    assert r.meta.snapshot_rows()[1] == (old, tree, snap(old, tree).created_at, "manual", "s")
    assert r.meta.all_turns() == [
        ("s", 1, old, None, "open", 10.0),
        ("s", 2, new, None, "open", 20.0),
    ]
    assert [(st.session, st.n, st.before) for st in r.meta.all_steps()] == [("s", 1, old)]
    ((got, session, at),) = r.meta.all_ops()
    assert (got.id, got.kind, session, at) == (op, "undo", "s", 30.0)
    assert sorted(r.meta.recorded_states(), key=str) == sorted(
        [("s", 1, "state-a"), ("s", 2, None), ("s", 2, "st")], key=str
    )
    r.meta.drop_history_tx(
        turns=[("s", 1)], steps=[("s", 1)], snapshots=[old], last_gc="99.0", objects_go=True
    )
    after = opener()
    assert [x[0] for x in after.meta.snapshot_rows()] == [base, new]
    assert [t[1] for t in after.meta.all_turns()] == [2]
    assert after.meta.all_steps() == [] and after.meta.touches("s", 1) == {}
    assert after.meta.get_meta("gc.last") == "99.0"
    after.meta.drop_history_tx(ops=[op], sessions=["s"], snapshots=[base, new])
    assert opener().meta.sessions() == [] and opener().meta.snapshot_rows() == []
    assert opener().meta.all_ops() == [] and opener().meta.recorded_states() == []


def test_a_setting_is_swapped_by_one_writer(opener: Opener) -> None:
    a, b = opener(), opener(machine=1)
    assert a.meta.swap_meta("gc.last", None, "1.0")
    assert not b.meta.swap_meta("gc.last", None, "2.0")  # set meanwhile
    assert b.meta.swap_meta("gc.last", "1.0", "3.0")
    assert not a.meta.swap_meta("gc.last", "1.0", "4.0")  # the other won
    assert opener().meta.get_meta("gc.last") == "3.0"


def test_one_sequence_orders_snapshots_turns_and_ops_whatever_the_clock(opener: Opener) -> None:
    s = opener()
    base = _with_session(s)
    before = s.meta.history_seq()
    # The clock goes back between each row: the order is the store's, not the clock's.
    with s.meta.tx():
        s.meta.add_turn("s", 1, "one", base, 900.0)
        s.meta.set_turn_state("s", 1, "done", ended=910.0)
        s.meta.add_session(SessionInfo("t", base, 100.0))
        s.meta.add_turn("t", 1, "two", base, 100.0)
        s.meta.set_turn_state("t", 1, "done", ended=110.0)
    with s.meta.tx():
        s.meta.add_snapshot(snap("c" * 64, "", "s", "later"))
        op = s.meta.add_op("s", "undo", [1], base, {}, 50.0)
    r = opener()
    seqs = r.meta.seqs()
    one, two = seqs.turns[("s", 1)], seqs.turns[("t", 1)]
    assert one[1] is not None and two[1] is not None
    assert before < one[0] < one[1] < two[0] < two[1] < seqs.snapshots["c" * 64] < seqs.ops[op]
    assert seqs.snapshots[base] < one[0]
    assert r.meta.last_ended_turn_session() == "t"  # ended last, though "earlier"
    assert r.meta.turn_end_seqs("t") == {1: two[1]}
    assert r.meta.op_seqs("s") == {op: seqs.ops[op]}
    assert r.meta.history_seq() == seqs.ops[op]
    with s.meta.tx():
        assert s.meta.next_seq() > seqs.ops[op]
    assert r.meta.history_seq() == seqs.ops[op]  # a number handed out is not a change
