"""gc, purge, fsck, du and config: through the real command, on real SQLite stores."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import takeback

from ._gc import build_history
from .conftest import CLI, SRC, files_state, write


@pytest.fixture
def ws(ws_dir: Path, store_dir: Path) -> Iterator[takeback.Workspace]:
    w = takeback.Workspace(ws_dir, store=store_dir)
    yield w
    w.close()


def turns_of(ws_dir: Path, store_dir: Path, session: str = "agent") -> list[int]:
    """The numbers of a session's turns in the store (whichever store ``store_dir`` names)."""
    with takeback.Workspace(ws_dir, store=store_dir) as w:
        return [t.n for t in w.open_store().meta.turn_rows(session)]


def tb_env(tb: CLI) -> dict[str, str]:
    """The environment a process of the test's own runs the store with."""
    return {**os.environ, "TAKEBACK_STORE": str(tb.store), "PYTHONPATH": SRC}


def gc_done_events(ws_dir: Path, store_dir: Path) -> list[dict[str, Any]]:
    """The ``gc.done`` events the store logged (a folder's file, or a database's rows)."""
    with takeback.Workspace(ws_dir, store=store_dir) as w:
        store = w.open_store()
        events = getattr(store, "events", None)
        if events is not None:
            return [e for _id, e in events() if e.get("event") == "gc.done"]
    log = store_dir / "events.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(x) for x in lines if '"gc.done"' in x]


def test_gc_keeps_the_newest_turns_and_every_kept_ref_restores(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path, tb: CLI
) -> None:
    rec = build_history(ws, ws_dir, turns=8)
    ws.close()
    before = tb("du", "--json")
    dry = json.loads(
        tb("gc", "--dry-run", "--keep-turns", "3", "--keep-days", "0", "--json").stdout
    )
    assert dry["dry_run"] and dry["removed"]["turns"] == 5 and dry["removed"]["objects"] > 0
    assert turns_of(ws_dir, store_dir) == list(range(1, 9))  # a dry run removes nothing
    out = tb("gc", "--keep-turns", "3", "--keep-days", "0")
    assert out.stdout.startswith("Removed 5 turns,")
    assert turns_of(ws_dir, store_dir) == [6, 7, 8]
    assert (
        json.loads(tb("du", "--json").stdout)["stored_bytes"]
        < json.loads(before.stdout)["stored_bytes"]
    )
    assert tb("fsck", "--read-data").returncode == 0
    kept = rec.check()
    assert len(kept) < len(rec.expected)
    # The session's baseline and the kept turns' refs still resolve and restore.
    tb("--session", "agent", "rewind", "--to", "turn:6")
    snap = ws.resolve("turn:6", session="agent").snapshot.id
    assert files_state(ws_dir) == rec.expected[snap]
    tb("--session", "agent", "rewind", "--to", "start")
    assert tb("--session", "agent", "rewind", "--to", "turn:2", check=2).stderr.startswith(
        "takeback: error: no turn 2"
    )
    # Undo and redo of a kept turn still work.
    tb("--session", "agent", "rewind", "--to", "turn:8")
    tb("--session", "agent", "undo", "--turn", "8", "--force")
    tb("--session", "agent", "redo", "--force")
    assert tb("fsck", "--read-data").returncode == 0
    # Nothing left to remove: a second gc frees nothing.
    again = json.loads(tb("gc", "--keep-turns", "3", "--keep-days", "0", "--json").stdout)
    assert again["removed"]["turns"] == 0


def test_the_default_policy_keeps_the_last_30_days(
    ws: takeback.Workspace, ws_dir: Path, tb: CLI
) -> None:
    build_history(ws, ws_dir, turns=3)
    ws.close()
    r = json.loads(tb("gc", "--json").stdout)
    assert r["policy"] == {"keep_turns": 50, "keep_days": 30.0, "auto": True}
    assert r["removed"]["turns"] == 0 and r["removed"]["snapshots"] == 0
    # Forty days from now, the newest 50 turns (all three) are still kept: whichever keeps more.
    with takeback.Workspace(ws_dir, store=tb.store) as w:
        later = w.gc(now=time.time() + 40 * 86400)
        assert later.turns == 0
        later = w.gc(keep_turns=1, now=time.time() + 40 * 86400)
        assert later.turns == 2


@pytest.mark.quick
def test_config_shows_and_sets_the_policy(ws: takeback.Workspace, ws_dir: Path, tb: CLI) -> None:
    write(ws_dir, "a.txt", "a")
    tb("snapshot")
    assert tb("config").stdout.splitlines()[:3] == ["keep-turns 50", "keep-days 30", "auto-gc on"]
    tb("config", "--keep-turns", "7", "--keep-days", "2.5", "--auto-gc", "off")
    doc = json.loads(tb("config", "--json").stdout)
    assert (doc["keep_turns"], doc["keep_days"], doc["auto"]) == (7, 2.5, False)
    err = tb("config", "--keep-turns", "0", check=2).stderr
    assert "--keep-turns must be at least 1" in err
    assert tb("gc", "--keep-days", "-1", check=2).stderr.startswith("takeback: error:")
    assert json.loads(tb("config", "--json").stdout)["keep_turns"] == 7


def test_purge_removes_a_session_and_what_only_it_reached(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path, tb: CLI
) -> None:
    rec = build_history(ws, ws_dir, turns=3)
    write(ws_dir, "other.txt", "only the other session saw this\n")
    other = ws.session("other")
    with other.turn("t") as turn:
        turn.touch("other.txt")
        write(ws_dir, "other.txt", "changed by other\n")
    ws.close()
    assert tb("purge", "--session", "nobody").stdout == "Nothing to purge.\n"
    out = tb("purge", "--session", "agent")
    assert out.stdout.startswith("Removed 1 session,")
    assert turns_of(ws_dir, store_dir, "agent") == []
    assert turns_of(ws_dir, store_dir, "other") == [1]
    assert tb("fsck", "--read-data").returncode == 0
    assert {s["session"] for s in json.loads(tb("du", "--json").stdout)["sessions"]} == {"other"}
    rec.check()
    tb("--session", "other", "undo")
    assert (ws_dir / "other.txt").read_text() == "only the other session saw this\n"
    tb("purge", "--all")
    assert json.loads(tb("log", "--json").stdout) == []
    assert tb("fsck", "--read-data").returncode == 0
    assert tb("purge", "--all").stdout == "Nothing to purge.\n"
    assert tb("purge", check=2).stderr.startswith("takeback: error: purge takes")
    tb("snapshot")  # the store is still a store
    assert tb("fsck", "--read-data").returncode == 0


def test_du_says_what_each_session_takes_and_what_gc_would_free(
    ws: takeback.Workspace, ws_dir: Path, tb: CLI
) -> None:
    build_history(ws, ws_dir, turns=4)
    ws.close()
    tb("config", "--keep-turns", "1", "--keep-days", "0")
    doc = json.loads(tb("du", "--json").stdout)
    assert doc["disk_bytes"] > 0 and doc["objects"] > 0
    (agent,) = doc["sessions"]
    assert agent["session"] == "agent" and agent["turns"] == 4
    assert 0 < agent["only_bytes"] <= agent["reached_bytes"] <= doc["stored_bytes"]
    assert doc["gc"]["turns"] == 3 and doc["gc"]["freed_bytes"] > 0
    text = tb("du").stdout
    assert "gc would free" in text and "agent" in text
    tb("gc")
    assert json.loads(tb("du", "--json").stdout)["gc"]["freed_bytes"] == 0


def _damage(store_dir: Path, sql: str, *args: object) -> None:
    with sqlite3.connect(store_dir / "objects.db") as c:
        c.execute(f"ATTACH DATABASE '{store_dir / 'meta.db'}' AS meta")
        c.execute(sql, args)


def _blob_and_tree(store_dir: Path) -> tuple[str, str]:
    with sqlite3.connect(store_dir / "objects.db") as c:
        blob = c.execute("SELECT oid FROM objects WHERE kind='blob' AND base IS NULL").fetchone()
        tree = c.execute("SELECT oid FROM objects WHERE kind='tree'").fetchone()
    return str(blob[0]), str(tree[0])


@pytest.mark.parametrize("damage", ["object", "tree", "hash", "metadata", "journal"])
def test_fsck_finds_each_kind_of_damage(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path, tb: CLI, damage: str
) -> None:
    build_history(ws, ws_dir, turns=2)
    ws.close()
    assert tb("fsck", "--read-data").stdout.startswith("The store is sound")
    blob, tree = _blob_and_tree(store_dir)
    if damage == "object":
        _damage(store_dir, "DELETE FROM objects WHERE oid=?", blob)
        want = f"object {blob[:12]}"
    elif damage == "tree":
        _damage(store_dir, "DELETE FROM objects WHERE oid=?", tree)
        want = f"tree {tree[:12]} is missing"
    elif damage == "hash":
        import zstandard

        _damage(
            store_dir,
            "UPDATE objects SET data=? WHERE oid=?",
            zstandard.ZstdCompressor().compress(b"not what its name says"),
            blob,
        )
        assert tb("fsck").returncode == 0  # only reading the data finds it
        want = f"object {blob[:12]}: store object {blob[:12]} fails its hash check"
    elif damage == "metadata":
        with sqlite3.connect(store_dir / "meta.db") as c:
            (before,) = c.execute("SELECT before FROM turns WHERE n=2").fetchone()
            c.execute("DELETE FROM snapshots WHERE id=?", (before,))
        want = f"turn 2 of session 'agent': snapshot {before[:12]} is missing"
    else:
        (store_dir / "journal.json").write_text(json.dumps({"op": "rewind", "pre": None}))
        want = "journal left behind: an interrupted rewind"
    r = tb("fsck", "--read-data", check=2)
    assert any(line.startswith(want) or want in line for line in r.stdout.splitlines()), r.stdout
    assert "problem(s)" in r.stdout.splitlines()[-1]
    doc = json.loads(tb("fsck", "--read-data", "--json", check=2).stdout)
    assert doc["clean"] is False and doc["problems"]


def test_the_scan_cache_keeps_what_the_next_snapshot_reuses(
    ws: takeback.Workspace, ws_dir: Path, tb: CLI
) -> None:
    """A scan that took no snapshot (status) leaves its objects named by the cache only.

    gc must keep them: the next snapshot reuses them (unchanged stats) without writing.
    """
    write(ws_dir, "a.txt", "one\n")
    tb("snapshot")
    time.sleep(1.2)  # out of the racy window, so the cache trusts the file's stat
    write(ws_dir, "a.txt", "two, seen by status only\n")
    time.sleep(1.2)
    tb("status")
    tb("gc", "--keep-turns", "1", "--keep-days", "0")
    snap = json.loads(tb("snapshot", "--json").stdout)["id"]
    assert tb("fsck", "--read-data").returncode == 0
    assert tb("show", f"{snap}:a.txt").stdout == "two, seen by status only\n"


def _wait_for_no_gc(store_dir: Path) -> None:
    """Wait until no background gc of this store runs (a test leaves no process behind)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running = []
        for pid in os.listdir("/proc"):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            # The store's folder, or a database URL that names it as its key.
            if b"--auto" in cmd and any(os.fsencode(store_dir) in arg for arg in cmd):
                running.append(pid)
        if not running:
            return
        time.sleep(0.05)
    raise AssertionError("the background gc did not end")


@pytest.mark.parametrize("after", ["command", "hook"])
def test_gc_runs_by_itself_once_a_day_in_the_background(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path, tb: CLI, after: str
) -> None:
    build_history(ws, ws_dir, turns=4)
    ws.close()
    tb("config", "--keep-turns", "1", "--keep-days", "0")
    tb("snapshot")  # a new store's last gc is its creation: not due
    assert turns_of(ws_dir, store_dir) == [1, 2, 3, 4]
    yesterday = time.time() - 86400 - 60
    with takeback.Workspace(ws_dir, store=store_dir) as w:
        meta = w.open_store().meta
        with meta.tx():
            meta.set_meta("gc.last", repr(yesterday))
    started = time.monotonic()
    if after == "command":
        tb("log")  # any command's work, then gc starts in the background
    else:
        payload = {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "agent",
            "prompt": "go on",
            "cwd": str(ws_dir),
        }
        assert tb("hook", "claude-code", input=json.dumps(payload).encode()).stdout == ""
    took = time.monotonic() - started
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done = gc_done_events(ws_dir, store_dir)
        if done:
            break
        time.sleep(0.1)
    assert done, "gc did not run"
    _wait_for_no_gc(store_dir)
    assert took < 10
    if after == "command":
        assert done[0]["removed"]["turns"] == 3
        assert turns_of(ws_dir, store_dir) == [4]
    else:
        # The hook's prompt opened turn 5 before gc ran: an open turn is kept and does
        # not count among the newest, so turn 4, the one that ended last, stays too.
        assert done[0]["removed"]["turns"] == 3
        assert turns_of(ws_dir, store_dir) == [4, 5]
    # Claimed for the day: the next commands start no other gc.
    tb("log")
    time.sleep(0.5)
    assert len(gc_done_events(ws_dir, store_dir)) == 1
    assert tb("fsck", "--read-data").returncode == 0


def test_gc_and_snapshots_at_once_from_two_processes(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path, tb: CLI
) -> None:
    rec = build_history(ws, ws_dir, turns=6)
    ws.close()
    full_env = {**tb_env(tb), "TAKEBACK_GC_PAUSE": "0.3"}
    gc = subprocess.Popen(
        [sys.executable, "-m", "takeback", "gc", "--keep-turns", "2", "--keep-days", "0"],
        cwd=ws_dir,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ids = []
    try:
        for i in range(4):
            write(ws_dir, f"new/{i}.txt", f"written while gc ran {i}\n")
            ids.append(json.loads(tb("--session", "agent", "snapshot", "--json").stdout)["id"])
    finally:
        out, err = gc.communicate(timeout=60)
    assert gc.returncode == 0, err
    assert out.startswith("Removed")
    assert tb("fsck", "--read-data").returncode == 0
    for i, sid in enumerate(ids):
        assert tb("show", f"{sid}:new/{i}.txt").stdout == f"written while gc ran {i}\n"
    with takeback.Workspace(ws_dir, store=store_dir) as w:
        rec.check(w)


def _four_turns_of_versions(ws: takeback.Workspace, ws_dir: Path) -> Callable[[int], bytes]:
    """Record four turns, each a command writing the next version of b.txt; return them.

    The versions share all lines but one, so each is stored as a delta of the one
    before (a command's changes are found by the snapshot after it, which stores the
    new version as a delta of the one its scan saw before).
    """
    lines = [f"line {i} " + "x" * 60 for i in range(80)]

    def version(k: int) -> bytes:
        body = list(lines)
        body[k * 5] = f"version {k}"
        return "\n".join(body).encode()

    write(ws_dir, "keep.txt", "kept\n")
    session = ws.session("agent")
    session.start()
    for k in range(1, 5):
        with session.turn(f"turn {k}") as turn, turn.command(f"edit {k}"):
            (ws_dir / "b.txt").write_bytes(version(k))
    return version


def test_a_snapshot_between_the_mark_and_the_sweep_keeps_content_the_mark_found_unreached(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path, tb: CLI
) -> None:
    """gc marks, then another process snapshots, then gc sweeps: what it stored stays.

    The snapshot puts a file back to a version only dropped turns reached: its blob is
    stored already, so the snapshot names it without writing it again (and it is a
    delta of a version that goes too). gc, which found it unreached, must find it
    reached again before it deletes anything, with the base it needs.
    """
    from takeback.ops._keep import plan
    from takeback.ops._policy import Policy

    version = _four_turns_of_versions(ws, ws_dir)
    old = version(2)
    blob = hashlib.sha256(old).hexdigest()
    store = ws.open_store()
    # The premise: version 2 and its base, version 1, are both doomed by the mark.
    doomed = plan(store, Policy(keep_turns=1, keep_days=0.0)).objects
    base = store.objects.index()[blob].base
    assert blob in doomed and base is not None and base in doomed
    taken: list[str] = []

    def pause(name: str) -> None:
        if name != "history":
            return
        (ws_dir / "b.txt").write_bytes(old)
        try:
            out = subprocess.run(
                [sys.executable, "-m", "takeback", "--session", "agent", "snapshot", "--json"],
                cwd=ws_dir,
                env=tb_env(tb),
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            )
        except subprocess.TimeoutExpired:
            pytest.fail("the snapshot waited 20 s for gc's lock between its mark and sweep")
        taken.append(json.loads(out.stdout)["id"])

    result = ws.gc(keep_turns=1, keep_days=0, pause=pause)
    assert taken and result.turns == 3
    assert 0 < result.longest_lock_ms <= result.locked_ms
    check = ws.fsck(read_data=True)
    assert check.clean, check.problems
    (ws_dir / "b.txt").write_bytes(b"changed after\n")
    ws.rewind(taken[0])
    assert (ws_dir / "b.txt").read_bytes() == old
    assert ws.open_store().objects.get(blob) == old
    assert ws.fsck(read_data=True).clean
    assert tb("show", f"{taken[0]}:b.txt").stdout == old.decode()


def test_a_second_gc_waits_for_the_first_and_says_so(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path, tb: CLI
) -> None:
    rec = build_history(ws, ws_dir, turns=6)
    ws.close()
    first = subprocess.Popen(
        [sys.executable, "-m", "takeback", "gc", "--keep-turns", "2", "--keep-days", "0"],
        cwd=ws_dir,
        env={**tb_env(tb), "TAKEBACK_GC_PAUSE": "0.5"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stderr is not None
        assert "takeback: gc: " in first.stderr.readline()  # it holds the gc lock now
        second = tb("gc", "--keep-turns", "2", "--keep-days", "0")
    finally:
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert out.startswith("Removed")
    assert second.stderr == (
        "takeback: another gc of this store is running: waiting for it to end\n"
    )
    assert second.stdout.startswith("Nothing to remove.")  # the first took it all
    assert tb("fsck", "--read-data").returncode == 0
    with takeback.Workspace(ws_dir, store=store_dir) as w:
        rec.check(w)


def test_an_object_a_dead_scan_stored_during_gc_keeps_its_base(
    ws: takeback.Workspace, ws_dir: Path, store_dir: Path, tb: CLI
) -> None:
    """A scan killed after it stored its objects leaves them named by nothing: gc must
    still keep their bases, or a later snapshot of the same bytes names a broken delta.

    While gc sweeps, a person puts b.txt back to a version only dropped turns reached
    (`takeback status` saves a scan cache naming it), edits it (a scan stores the edit
    as a delta of that version, then dies before it saves its cache), and puts the kept
    version back (a cache naming that one replaces the first, before gc reads either).
    Nothing gc reads names the edit or its base; the base is doomed. Then the edit is
    made again and snapshotted: its blob is stored already, so the snapshot names it.
    """
    from takeback.ops._keep import plan
    from takeback.ops._policy import Policy
    from takeback.ops._snapshot import _scan

    version = _four_turns_of_versions(ws, ws_dir)
    old, edit = version(2), version(9)
    old_id, edit_id = hashlib.sha256(old).hexdigest(), hashlib.sha256(edit).hexdigest()
    assert old_id in plan(ws.open_store(), Policy(keep_turns=1, keep_days=0.0)).objects

    def status() -> None:
        subprocess.run(
            [sys.executable, "-m", "takeback", "status"],
            cwd=ws_dir,
            env=tb_env(tb),
            capture_output=True,
            timeout=20,
            check=True,
        )

    def pause(name: str) -> None:
        if name != "history":
            return
        (ws_dir / "b.txt").write_bytes(old)
        status()
        time.sleep(0.05)  # past the file system's timestamp granularity
        (ws_dir / "b.txt").write_bytes(edit)
        with takeback.Workspace(ws_dir, store=store_dir) as other:
            rec = other._recording()
            with rec.store.lock(exclusive=False):
                _scan(rec.store, rec.options)  # its objects committed; then it died
            row = rec.store.objects.index()[edit_id]
            assert row.base == old_id  # the premise: the edit is a delta of the old version
        (ws_dir / "b.txt").write_bytes(version(4))
        status()

    ws.gc(keep_turns=1, keep_days=0, pause=pause)
    (ws_dir / "b.txt").write_bytes(edit)
    taken = json.loads(tb("snapshot", "--json").stdout)["id"]
    assert ws.open_store().objects.get(edit_id) == edit
    check = ws.fsck(read_data=True)
    assert check.clean, check.problems
    (ws_dir / "b.txt").write_bytes(b"changed after\n")
    tb("rewind", "--to", taken)
    assert (ws_dir / "b.txt").read_bytes() == edit


def test_a_store_that_does_not_say_when_it_was_made_starts_the_clock(
    ws_dir: Path, store_dir: Path, tb: CLI
) -> None:
    write(ws_dir, "a.txt", "a")
    tb("snapshot")
    marker = store_dir / "store.json"
    info = json.loads(marker.read_text())
    del info["created_at"]
    marker.write_text(json.dumps(info))
    tb("log")
    with sqlite3.connect(store_dir / "meta.db") as c:
        (last,) = c.execute("SELECT value FROM meta WHERE key='gc.last'").fetchone()
    assert abs(float(last) - time.time()) < 60
    time.sleep(0.3)
    assert '"gc.done"' not in (store_dir / "events.jsonl").read_text()
