"""The watching service: a snapshot it feeds equals a full scan, or is a full scan that says why."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takeback._service_client import ServicePaths, ask_service
from takeback.integrations import _service
from takeback.ops import Options, scan
from takeback.store import FolderStore

from ._service import alive, full_scan, full_tree, running_service, stop_for_good
from .conftest import CLI, examples, files_state

KINDS = (
    "create",
    "same-size",
    "chmod",
    "rename-file",
    "rename-dir",
    "move-out",
    "move-in",
    "symlink-swap",
    "ignore-edit",
    "deep",
    "delete",
)
IGNORE_LINES = (b"*.log\n", b"f1\n", b"d0/\n", b"!f1\n", b"")


def _seed_tree(root: Path) -> None:
    for d in ("", "d0", "d1", "d1/s", "d2"):
        (root / d).mkdir(parents=True, exist_ok=True)
        for i in range(3):
            (root / d / f"f{i}").write_bytes(f"{d} {i}\n".encode())
    (root / "d2" / "x.log").write_text("log\n")


def _dirs(root: Path) -> list[Path]:
    out = [root]
    for dirpath, dirnames, _files in os.walk(root):
        dirnames.sort()
        out += [Path(dirpath) / n for n in dirnames]
    return out


def _files(root: Path) -> list[Path]:
    out = []
    for dirpath, _dirnames, filenames in os.walk(root):
        out += [
            Path(dirpath) / n for n in sorted(filenames) if not os.path.islink(Path(dirpath) / n)
        ]
    return sorted(out)


def _apply(root: Path, outside: Path, kind: str, seed: int, data: bytes, n: int) -> None:
    dirs, files = _dirs(root), _files(root)
    d = dirs[seed % len(dirs)]
    f = files[seed % len(files)] if files else None
    if kind == "create":
        (d / f"f{seed % 7}").write_bytes(data)
    elif kind == "same-size" and f is not None:
        before = f.stat()
        old = f.read_bytes()
        f.write_bytes(bytes((b + 1) % 256 for b in old) if old else b"")
        os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif kind == "chmod" and f is not None:
        f.chmod(stat.S_IMODE(f.stat().st_mode) ^ 0o111)
    elif kind == "rename-file" and f is not None:
        f.rename(d / f"r{n}")
    elif kind == "rename-dir" and d != root:
        target = dirs[(seed // 7) % len(dirs)]
        if target == d or d in target.parents:
            target = root
        d.rename(target / f"m{n}")
    elif kind == "move-out":
        victim: Path | None = d if d != root else f
        if victim is not None:
            victim.rename(outside / f"out{n}")
    elif kind == "move-in":
        src = outside / f"in{n}"
        (src / "sub").mkdir(parents=True)
        (src / "a").write_bytes(data)
        (src / "sub" / "b").write_bytes(data + b"!")
        src.rename(d / f"in{n}")
    elif kind == "symlink-swap":
        link = d / f"l{seed % 3}"
        tmp = d / f".swap{n}"
        os.symlink(f"target-{seed % 5}", tmp)
        os.replace(tmp, link)
    elif kind == "ignore-edit":
        (d / ".gitignore").write_bytes(IGNORE_LINES[seed % len(IGNORE_LINES)])
    elif kind == "deep":
        deep = d / f"deep{n}" / "a" / "b" / "c"
        deep.mkdir(parents=True)
        for level in (deep, deep.parent, deep.parent.parent):
            (level / "g").write_bytes(data)
    elif kind == "delete":
        if d != root and seed % 2:
            shutil.rmtree(d)
        elif f is not None:
            f.unlink()


_counter = itertools.count()


@settings(
    max_examples=examples(10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(KINDS), st.integers(0, 10**6), st.binary(max_size=12)),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_a_snapshot_the_service_feeds_equals_a_full_scan(
    tmp_path: Path, batches: list[list[tuple[str, int, bytes]]]
) -> None:
    base = tmp_path / f"ex{next(_counter)}"
    root, outside = base / "ws", base / "outside"
    _seed_tree(root)
    outside.mkdir()
    store = FolderStore.open(str(base / "store"), str(root), create=True)
    opts = Options()
    try:
        with running_service(root, base / "store"):
            assert scan(store, opts).mode == "full"  # the first scan: no mark yet
            assert scan(store, opts).mode == "service"
            n = 0
            for batch in batches:
                rules_before = any(root.rglob(".gitignore"))
                for kind, seed, data in batch:
                    n += 1
                    _apply(root, outside, kind, seed, data, n)
                got = scan(store, opts)
                full = full_scan(store)
                assert got.tree == full.tree, (batch, got.reason)
                assert (got.files, got.skipped_count, got.unreadable_count) == (
                    full.files,
                    full.skipped_count,
                    full.unreadable_count,
                )
                if rules_before or any(kind == "ignore-edit" for kind, _s, _d in batch):
                    # A full scan when an ignore file was written or removed (any
                    # operation may meet one), unless its folder was moved since and so
                    # is listed whole anyway (the service may see the edit before or after).
                    assert got.mode == "service" or "ignore rules changed" in got.reason
                else:
                    assert got.mode == "service", got.reason
            # The cache those scans saved serves a scan that checks every folder too.
            again = scan(store, opts, use_service=False)
            assert (again.tree, again.files) == (full.tree, full.files)
    finally:
        store.close()


# -- each fallback, through the command line -----------------------------------------------


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    _seed_tree(ws_dir)
    return ws_dir


def _snap(tb: CLI) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(tb("snapshot", "--json").stdout)
    return doc


def _scan(tb: CLI) -> dict[str, str]:
    scan_doc: dict[str, str] = _snap(tb)["scan"]
    return scan_doc


def _same_as_full(tb: CLI, store_dir: Path, ws: Path) -> None:
    """The latest snapshot's tree is what a scan with no cache finds now."""
    store = FolderStore.open(str(store_dir), str(ws), create=False)
    try:
        latest = store.meta.latest_snapshot()
        assert latest is not None and latest.tree == full_tree(store)
    finally:
        store.close()


@pytest.fixture
def service(tb: CLI, ws: Path, store_dir: Path) -> Iterator[int]:
    """A running service over a workspace with one snapshot taken before it started."""
    assert _scan(tb) == {"mode": "full", "reason": "no service is running"}
    with running_service(ws, store_dir, faults=True) as pid:
        yield pid


def test_no_service_then_one_started_after_the_last_snapshot(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    got = _scan(tb)
    assert got == {"mode": "full", "reason": "the last snapshot was not taken with this service"}
    (ws / "d1" / "s" / "new").write_text("n\n")
    assert _scan(tb) == {"mode": "service", "reason": "1 folder(s) changed"}
    _same_as_full(tb, store_dir, ws)
    assert _scan(tb) == {"mode": "service", "reason": "0 folder(s) changed"}
    status = json.loads(tb("status", "--json").stdout)
    assert status["scan"]["mode"] == "service" and status["changes"] == []


def test_a_service_killed_mid_way_means_full_scans_until_a_new_one_runs(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    _snap(tb)
    (ws / "d0" / "f0").write_text("changed while it died\n")
    os.kill(service, signal.SIGKILL)
    while alive(service):
        time.sleep(0.01)
    assert _scan(tb) == {
        "mode": "full",
        "reason": "the service is not running (it stopped or died)",
    }
    _same_as_full(tb, store_dir, ws)
    with running_service(ws, store_dir):
        assert _scan(tb)["reason"] == "the last snapshot was not taken with this service"
        (ws / "d0" / "f0").write_text("again\n")
        assert _scan(tb)["mode"] == "service"
        _same_as_full(tb, store_dir, ws)


def test_an_event_queue_overflow_means_a_full_scan(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    _snap(tb)
    # A real overflow: the service stopped while more events queue than the kernel keeps.
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    os.kill(service, signal.SIGSTOP)
    try:
        many = ws / "d0"  # watched already: every file made in it queues its events
        for i in range(limit // 3 + 100):  # create, modify, close: three events each
            (many / f"{i}").write_bytes(b"x")
    finally:
        os.kill(service, signal.SIGCONT)
    got = _scan(tb)
    assert got == {"mode": "full", "reason": "the inotify event queue overflowed"}
    _same_as_full(tb, store_dir, ws)
    # The service watched again what it may have missed: it feeds the next one.
    (ws / "d0" / "0").write_bytes(b"y")
    assert _scan(tb)["mode"] == "service"
    _same_as_full(tb, store_dir, ws)


def test_an_injected_overflow_and_the_watch_limit_mean_full_scans(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    _snap(tb)
    ask_service(str(store_dir), {"op": "fault", "kind": "overflow"})
    assert _scan(tb) == {"mode": "full", "reason": "the inotify event queue overflowed"}
    assert _scan(tb)["mode"] == "service"
    ask_service(str(store_dir), {"op": "fault", "kind": "watch-limit"})
    got = _scan(tb)
    assert got["mode"] == "full" and "max_user_watches" in got["reason"]
    doc = json.loads(tb("service", "status", "--json").stdout)
    assert "max_user_watches" in doc["degraded"]


def test_a_folder_filled_before_its_watch_is_listed_whole(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    _snap(tb)
    _snap(tb)
    os.kill(service, signal.SIGSTOP)  # nothing is watched while the tree grows
    try:
        deep = ws / "n" / "e" / "w"
        deep.mkdir(parents=True)
        (deep / "leaf").write_text("leaf\n")
        (ws / "n" / "top").write_text("top\n")
    finally:
        os.kill(service, signal.SIGCONT)
    got = _scan(tb)
    assert got["mode"] == "service"
    _same_as_full(tb, store_dir, ws)
    (deep / "leaf").write_text("later\n")  # under a watch added late, but added
    assert _scan(tb)["mode"] == "service"
    _same_as_full(tb, store_dir, ws)


@pytest.mark.parametrize("where", ["d1/s/.gitignore", ".takebackignore", ".git/info/exclude"])
def test_ignore_rules_that_change_mean_a_full_scan(
    tb: CLI, ws: Path, store_dir: Path, where: str
) -> None:
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    _snap(tb)
    with running_service(ws, store_dir):
        _snap(tb)
        assert _scan(tb)["mode"] == "service"
        target = ws / where
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("f1\n")
        got = _scan(tb)
        assert got["mode"] == "full" and (
            "ignore rules changed" in got["reason"] or "info/exclude" in got["reason"]
        ), got
        _same_as_full(tb, store_dir, ws)
        assert _scan(tb)["mode"] == "service"


def test_a_file_git_starts_tracking_in_an_ignored_place_is_seen(
    tb: CLI, ws: Path, store_dir: Path
) -> None:
    (ws / ".gitignore").write_text("*.log\n")
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    _snap(tb)
    with running_service(ws, store_dir):
        _snap(tb)
        subprocess.run(["git", "add", "-f", "d2/x.log"], cwd=ws, check=True)
        got = _scan(tb)
        assert got["mode"] == "service"
        _same_as_full(tb, store_dir, ws)
        latest = json.loads(tb("log", "--json").stdout)[0]["id"]
        assert tb("show", f"{latest}:d2/x.log").stdout == "log\n"


def test_a_stuck_service_is_waited_for_half_a_second_then_a_full_scan(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    _snap(tb)
    (ws / "d0" / "f2").write_text("while stuck\n")
    os.kill(service, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        got = _scan(tb)
        took = time.monotonic() - t0
    finally:
        os.kill(service, signal.SIGCONT)
    assert got == {"mode": "full", "reason": "the service did not answer within 0.5 s"}
    assert took < 10  # the scan itself plus the bound, never "until it wakes"
    _same_as_full(tb, store_dir, ws)


def test_a_stuck_service_never_holds_up_a_bash_hook(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    base = {"session_id": "s", "cwd": str(ws)}

    def hook(**p: Any) -> float:
        t0 = time.monotonic()
        proc = tb("hook", "claude-code", input=json.dumps({**base, **p}).encode())
        assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
        return time.monotonic() - t0

    hook(hook_event_name="UserPromptSubmit", prompt="go")
    call = {"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {"command": "echo"}}
    hook(hook_event_name="PreToolUse", **call)
    os.kill(service, signal.SIGSTOP)
    try:
        (ws / "d0" / "f1").write_text("by the command\n")
        took = hook(hook_event_name="PostToolUse", **call)
    finally:
        os.kill(service, signal.SIGCONT)
    assert took < 10
    hook(hook_event_name="Stop")
    changes = json.loads(tb("changes", "--session", "s", "--json").stdout)["changes"]
    assert [(c["path"], c["status"]) for c in changes] == [("d0/f1", "modified")]


def test_an_answer_that_is_not_understood_means_a_full_scan(
    tb: CLI, ws: Path, store_dir: Path
) -> None:
    _snap(tb)
    paths = ServicePaths(str(store_dir))
    os.makedirs(paths.dir, mode=0o700, exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(paths.socket)
    server.listen(4)

    def answer_garbage() -> None:
        for _ in range(1):
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"not json at all\n")

    t = threading.Thread(target=answer_garbage)
    t.start()
    try:
        got = _scan(tb)
    finally:
        t.join(5)
        server.close()
        os.unlink(paths.socket)
    assert got == {"mode": "full", "reason": "the service's answer was not understood"}


def test_idle_and_periodic_full_scans(tb: CLI, ws: Path, store_dir: Path) -> None:
    _snap(tb)
    with running_service(ws, store_dir, ["--idle-full", "2.5"]):
        _snap(tb)
        assert _scan(tb)["mode"] == "service"
        time.sleep(2.7)
        got = _scan(tb)
        assert got["mode"] == "full" and "saw no snapshot" in got["reason"]
    with running_service(ws, store_dir, ["--full-every", "2.5"]):
        _snap(tb)
        assert _scan(tb)["mode"] == "service"
        time.sleep(2.7)
        got = _scan(tb)
        assert got["mode"] == "full" and "a full scan is taken every" in got["reason"]


def test_other_options_mean_a_full_scan(tb: CLI, ws: Path, store_dir: Path) -> None:
    _snap(tb)
    with running_service(ws, store_dir):
        _snap(tb)
        doc = json.loads(tb("snapshot", "--json", "--max-file-bytes", "10").stdout)
        assert doc["scan"] == {
            "mode": "full",
            "reason": "the last scan was taken with other options",
        }


# -- the service itself ----------------------------------------------------------------------


@pytest.mark.quick
def test_start_status_stop_and_what_it_leaves(tb: CLI, ws: Path, store_dir: Path) -> None:
    before = files_state(ws)
    started = json.loads(tb("service", "start", "--json").stdout)
    pid = started["pid"]
    try:
        assert started["running"] and started["started"] and started["watches"] == 5
        again = json.loads(tb("service", "start", "--json").stdout)
        assert again["pid"] == pid and not again["started"]  # one per workspace
        paths = ServicePaths(str(store_dir))
        assert stat.S_IMODE(os.stat(paths.dir).st_mode) == 0o700
        assert stat.S_IMODE(os.lstat(paths.socket).st_mode) == 0o600
        status = json.loads(tb("service", "status", "--json").stdout)
        assert status["running"] and status["answering"] and status["pid"] == pid
        assert status["rss_bytes"] > 0 and status["degraded"] is None
        assert "watches" in tb("service", "status").stdout
    finally:
        stopped = json.loads(tb("service", "stop", "--json").stdout)
    assert stopped == {"schema": 1, "stopped": True, "pid": pid}
    assert not alive(pid)
    assert json.loads(tb("service", "status", "--json").stdout)["running"] is False
    assert files_state(ws) == before  # it wrote nothing in the workspace
    assert not os.path.exists(ServicePaths(str(store_dir)).socket)


def test_it_exits_after_a_quiet_period(tb: CLI, ws: Path, store_dir: Path) -> None:
    _snap(tb)
    with running_service(ws, store_dir, ["--quiet-exit", "1"]) as pid:
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid)
        assert _scan(tb)["mode"] == "full"


@pytest.mark.quick
def test_a_prompt_hook_starts_the_service_and_later_calls_use_it(
    tb: CLI, ws: Path, store_dir: Path
) -> None:
    base = {"session_id": "s", "cwd": str(ws)}
    env = {"TAKEBACK_SERVICE": "1"}

    def hook(**p: Any) -> None:
        tb("hook", "claude-code", input=json.dumps({**base, **p}).encode(), env=env)

    hook(hook_event_name="UserPromptSubmit", prompt="go")
    pid = None
    deadline = time.monotonic() + 20
    while pid is None and time.monotonic() < deadline:
        doc = _service.status(str(store_dir))
        pid = doc.get("pid") if doc.get("answering") else None
        time.sleep(0.05)
    assert isinstance(pid, int)
    try:
        call = {"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {"command": "x"}}
        hook(hook_event_name="PreToolUse", **call)
        (ws / "d2" / "f0").write_text("from the command\n")
        hook(hook_event_name="PostToolUse", **call)
        hook(hook_event_name="Stop")
        changes = json.loads(tb("changes", "--session", "s", "--json").stdout)["changes"]
        assert [(c["path"], c["status"]) for c in changes] == [("d2/f0", "modified")]
        doc = _service.status(str(store_dir))
        assert doc["questions"] >= 2  # the hooks' snapshots asked it
    finally:
        stop_for_good(store_dir, pid)


def test_every_change_completed_before_a_question_is_in_its_answer(tmp_path: Path) -> None:
    # The kernel queues an inotify event inside the file-system call, so a change whose
    # call returned is in the queue when the watcher drains it: no wait, no settling.
    from takeback.scan._watcher import Watcher

    root = tmp_path / "ws"
    _seed_tree(root)
    w = Watcher(str(root))
    try:
        w.start()
        token = w.mark(None).token
        folders = ["", "d0", "d1", "d1/s", "d2"]
        for i in range(300):
            folder = folders[i % len(folders)]
            target = root / folder / f"f{i % 3}"
            if i % 3 == 0:
                target.write_bytes(b"%d" % i)
            elif i % 3 == 1:
                target.chmod(0o600 if i % 2 else 0o644)
            else:
                (root / folder / f"new{i}").mkdir()
            got = w.mark(token)
            assert got.dirs is not None and folder in got.dirs, (i, got)
            token = got.token
    finally:
        w.close()


def test_the_watch_limit_met_leaves_the_unwatched_part_to_every_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ENOSPC from inotify_add_watch cannot be made real without lowering a limit every
    # process of this user shares: the call itself is made to fail, after two watches.
    # The service watches what it can; the folders it could not watch are listed, with
    # all below them, by every snapshot: exact, and no full scan of the rest.
    import errno

    from takeback._service_client import answer_here
    from takeback.scan._watcher import Watcher

    root = tmp_path / "ws"
    _seed_tree(root)
    w = Watcher(str(root))
    real = w.ino.add_watch
    calls = itertools.count()

    def add_watch(path: str, mask: int) -> int:
        if next(calls) >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return int(real(path, mask))

    monkeypatch.setattr(w.ino, "add_watch", add_watch)
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)

    def mark(req: dict[str, Any]) -> dict[str, Any]:
        gen = req.get("gen")
        token = gen if req.get("service") == "svc" and isinstance(gen, int) else None
        a = w.mark(token)
        return {
            "service": "svc",
            "gen": a.token,
            "dirs": a.dirs,
            "reason": a.reason,
            "index": a.index,
            "subtrees": a.subtrees,
        }

    answer_here(os.path.realpath(tmp_path / "store"), mark)
    try:
        w.start()
        assert w.stats().degraded is None and w.unwatched
        scan(store, Options())
        got = w.mark(w.mark(None).token)
        assert got.dirs is not None and got.subtrees
        unwatched = sorted(w.unwatched)
        for n, rel in enumerate(unwatched):
            (root / rel / f"unseen{n}").write_text("no watch saw this\n")
            (root / rel / f"deep{n}" / "x").mkdir(parents=True)
            (root / rel / f"deep{n}" / "x" / "f").write_text("nor this\n")
            result = scan(store, Options())
            assert result.mode == "service", result.reason
            assert result.tree == full_tree(store)
            (root / rel / f"deep{n}" / "x" / "f").write_text("changed below it\n")
            result = scan(store, Options())
            assert result.mode == "service" and result.tree == full_tree(store)
    finally:
        answer_here(os.path.realpath(tmp_path / "store"), None)
        store.close()
        w.close()


def test_status_and_stop_where_nothing_is_recorded(tb: CLI) -> None:
    assert json.loads(tb("service", "status", "--json").stdout)["running"] is False
    assert json.loads(tb("service", "stop", "--json").stdout) == {
        "schema": 1,
        "stopped": False,
        "pid": None,
    }
    assert "no service is running" in tb("service", "status").stdout


def test_a_service_whose_store_was_made_anew_exits(tb: CLI, ws: Path, store_dir: Path) -> None:
    # A store deleted and copied back (or made again) while its service ran left that
    # service behind for up to 30 minutes, watching, beside the one started for the new.
    import shutil

    _snap(tb)
    with running_service(ws, store_dir) as pid:
        copy = store_dir.parent / "store-copy"
        shutil.copytree(store_dir, copy, ignore=shutil.ignore_patterns("sock"))
        shutil.rmtree(store_dir)
        copy.rename(store_dir)
        deadline = time.monotonic() + 20
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid)
        assert _scan(tb)["mode"] == "full"


@pytest.mark.quick
def test_a_call_runs_without_the_collector_and_its_garbage_goes_once_answered(
    ws_dir: Path, store_dir: Path
) -> None:
    """Python's collector does not run during a call the service runs (at a million
    files it went over the folder cache's records there), and what the call left, a
    reference cycle too, is collected right after its answer, whether it failed or not."""
    import gc
    import weakref

    from takeback import _wire as wire

    class Cycle:
        me: object

    seen: dict[str, Any] = {}

    def runner(argv: Any, cwd: str, env: Any, stdin: bytes | None) -> tuple[int, str, str]:
        seen["collector"] = gc.isenabled()
        left = Cycle()
        left.me = left
        seen["left"] = weakref.ref(left)
        if argv == ["fail"]:
            raise RuntimeError("it broke")
        return 0, "ran\n", ""

    paths = ServicePaths(str(store_dir))
    os.makedirs(paths.claims, 0o700)
    svc = _service._Service(
        str(ws_dir),
        str(store_dir),
        quiet=1,
        idle_full=1,
        full_every=1,
        faults=False,
        runner=runner,
    )
    try:
        for argv, code, said in ((["snapshot"], 0, "ran"), (["fail"], 1, "it broke")):
            claim = os.urandom(12).hex()
            Path(paths.claims, claim).touch()
            frame = wire.call_frame(claim, svc.package, argv, str(ws_dir), {}, None)
            ours, theirs = socket.socketpair()
            with ours, theirs:
                svc.run_call(ours, wire.Call(frame.split(b"\n", 1)[1]))
                ours.shutdown(socket.SHUT_WR)
                got = b""
                while chunk := theirs.recv(1 << 16):
                    got += chunk
            taken, _, done = got.partition(b"\n")
            assert taken == wire.TAKEN
            back = wire.done(done.split(b"\n", 1)[1])
            assert back[0] == code and said in back[1] + back[2]
            assert seen["collector"] is False
            assert gc.isenabled()
            assert seen["left"]() is None
    finally:
        svc.watcher.close()
