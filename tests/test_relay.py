"""The relay: with the service running, it runs `takeback snapshot` and hook calls, once each.

Every test runs the real command in a subprocess against a real service process. What a
user checks: the command prints and records what it would have run by itself, with the
caller's folder and environment; no call is ever recorded twice or lost, whether the
service is stopped, dies half way, or is another installation's.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from takeback._service_client import ask_service
from takeback.integrations import _service
from takeback.store import default_store_path
from tests._service import alive, running_service
from tests.conftest import CLI


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    for d in ("a", "b", "sub/deep"):
        (ws_dir / d).mkdir(parents=True)
        for i in range(3):
            (ws_dir / d / f"f{i}.txt").write_text(f"{d} {i}\n")
    return ws_dir


@pytest.fixture
def service(tb: CLI, ws: Path, store_dir: Path) -> Iterator[int]:
    """A running service (it takes calls) over a workspace with one snapshot."""
    tb("snapshot")
    with running_service(ws, store_dir, faults=True) as pid:
        yield pid


def _calls(store: Path) -> int:
    got = _service.status(str(store))
    assert got.get("answering"), got
    return int(got["calls"])


def _snapshots(tb: CLI, *args: str) -> list[dict[str, Any]]:
    """Every session's snapshots, newest first."""
    rows: list[dict[str, Any]] = json.loads(tb("log", "--all", "--json", *args).stdout)
    return rows


@pytest.mark.quick
def test_a_snapshot_the_service_runs_is_the_one_the_command_would_take(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    before = _calls(store_dir)
    tb("snapshot")  # the service's first mark
    (ws / "a" / "f1.txt").write_text("changed\n")
    got = json.loads(tb("snapshot", "--json", "-m", "after the edit").stdout)
    assert got["scan"] == {"mode": "service", "reason": "1 folder(s) changed"}
    assert got["message"] == "after the edit"
    assert _calls(store_dir) == before + 2
    # Run here instead, nothing changed since: the same tree.
    here = json.loads(tb("snapshot", "--json", env={"TAKEBACK_RELAY": "0"}).stdout)
    assert here["scan"]["mode"] == "service"
    same = json.loads(tb("diff", got["id"], here["id"], "--json").stdout)
    assert same["files"] == []
    assert _calls(store_dir) == before + 2
    short = tb("snapshot", "--message=plain").stdout.strip()
    assert [s["message"] for s in _snapshots(tb)[:3]] == ["plain", "", "after the edit"]
    assert _snapshots(tb)[0]["id"].startswith(short)


def _in_the_file(db: Path, message: str) -> bool:
    """Whether the database file itself, its write-ahead log left out, holds the snapshot."""
    try:
        conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
        try:
            row = conn.execute("SELECT count(*) FROM snapshots WHERE message=?", (message,))
            return bool(row.fetchone()[0])
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False  # read while a checkpoint wrote it: asked again


def test_the_service_copies_its_log_into_the_databases_when_idle(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    """A call's commit leaves the checkpoint to the service's idle time: the snapshot
    is in the log at once, and in the database file itself soon after."""
    (ws / "a" / "f1.txt").write_text("changed\n")
    tb("snapshot", "-m", "through the service")
    assert _snapshots(tb)[0]["message"] == "through the service"
    deadline = time.monotonic() + 10
    while not _in_the_file(store_dir / "meta.db", "through the service"):
        assert time.monotonic() < deadline, "the service never copied its log back"
        time.sleep(0.1)
    assert alive(service)


def test_the_service_reads_ahead_the_trees_a_change_far_below_would_read(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    """After a snapshot it ran, the service reads ahead, in its idle time, the last trees
    of the folders that hold others (here the root and sub): a change below them then
    reads none back, and is recorded as it is."""
    tb("snapshot")  # the first the service runs: its cache is the one read ahead from
    deadline = time.monotonic() + 20
    while _service.status(str(store_dir)).get("trees_read_ahead") != 2:
        assert time.monotonic() < deadline, _service.status(str(store_dir))
        time.sleep(0.05)
    (ws / "sub" / "deep" / "f0.txt").write_text("changed far below\n")
    got = json.loads(tb("snapshot", "--json").stdout)
    assert got["scan"]["mode"] == "service"
    changed = json.loads(tb("diff", _snapshots(tb)[2]["id"], got["id"], "--json").stdout)
    assert [f["path"] for f in changed["files"]] == ["sub/deep/f0.txt"]


def test_the_service_reads_the_objects_id_index_ahead_once(
    ws: Path, store_dir: Path, service: int
) -> None:
    """In its idle time the service reads the objects' id index once, every id the store
    holds: a new object's lookup then finds the index's page in memory (with a million
    objects, read from the disk otherwise)."""
    conn = sqlite3.connect(store_dir / "objects.db")
    try:
        (stored,) = conn.execute("SELECT count(*) FROM objects").fetchone()
    finally:
        conn.close()
    assert stored >= 10
    deadline = time.monotonic() + 20
    while _service.status(str(store_dir)).get("ids_read_ahead") != stored:
        assert time.monotonic() < deadline, _service.status(str(store_dir))
        time.sleep(0.05)
    time.sleep(0.5)
    assert _service.status(str(store_dir))["ids_read_ahead"] == stored  # once, not again


def test_take_backs_the_service_runs_do_what_they_would_do_here(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    """A rewind, undo or redo handed to the service (no library loaded by the caller)
    writes what it would write run here, says the same, and exits the same; a line with
    an option the relay does not know (a patch's questions, a merge, paths) runs here."""
    tb("run", "--", "sh", "-c", "echo two > a/f1.txt && rm a/f2.txt")
    before = _calls(store_dir)
    plan = tb("undo", "--dry-run")
    assert _calls(store_dir) == before + 1
    local = tb("undo", "--dry-run", env={"TAKEBACK_RELAY": "0"})
    assert (plan.stdout, plan.stderr) == (local.stdout, local.stderr)
    done = json.loads(tb("undo", "--json").stdout)
    assert _calls(store_dir) == before + 2
    assert sorted(done["restored"]) == ["a/f1.txt", "a/f2.txt"]
    assert (ws / "a" / "f1.txt").read_text() == "a 1\n" and (ws / "a" / "f2.txt").exists()
    # Nothing left to undo: the same words and exit code as here.
    again, here = tb("undo", check=None), tb("undo", check=None, env={"TAKEBACK_RELAY": "0"})
    assert (again.returncode, again.stdout, again.stderr) == (
        here.returncode,
        here.stdout,
        here.stderr,
    )
    tb("redo")
    assert (ws / "a" / "f1.txt").read_text() == "two\n" and not (ws / "a" / "f2.txt").exists()
    start = _snapshots(tb)[-1]["id"]
    calls = _calls(store_dir)
    tb("rewind", "--to", start)
    assert _calls(store_dir) == calls + 1
    assert (ws / "a" / "f1.txt").read_text() == "a 1\n"
    # Not the relay's to read: these run here.
    tb("rewind", "--to", start, "--dry-run", "--", "a/f1.txt")
    tb("undo", "--merge", "--dry-run", check=None)
    assert _calls(store_dir) == calls + 1


def test_the_callers_folder_environment_and_errors_are_the_ones_used(
    tb: CLI, ws: Path, tmp_path: Path
) -> None:
    # The default store, found from a subfolder as git finds its top: no store named.
    default = Path(default_store_path(str(ws.resolve()), str(tmp_path / "home/data/takeback")))
    no_store = {"TAKEBACK_STORE": ""}
    tb("snapshot", env=no_store)
    assert (default / "store.json").is_file()
    with running_service(ws, default):
        got = json.loads(
            tb(
                "snapshot",
                "--json",
                cwd=ws / "sub" / "deep",
                env={**no_store, "TAKEBACK_SESSION": "theirs"},
            ).stdout
        )
        assert got["session"] == "theirs"
        assert got["scan"]["mode"] in ("service", "full")
        assert _calls(default) == 1
        # An error is the command's own: its message on stderr and its exit code.
        bad = tb("snapshot", "--root", str(ws / "a" / "f0.txt"), env=no_store, check=2)
        assert bad.stdout == ""
        assert bad.stderr.startswith("takeback: error: ") and "f0.txt" in bad.stderr
        assert _calls(default) == 1  # that root has no service: it ran here
        store_named = {"TAKEBACK_STORE": str(default)}
        bad = tb("snapshot", "--root", str(ws / "a" / "f0.txt"), env=store_named, check=2)
        assert bad.stderr.startswith("takeback: error: ") and "f0.txt" in bad.stderr
        assert _calls(default) == 2  # run by the service, which said the same


def test_a_stopped_service_never_gets_to_run_a_call_a_second_time(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    tb("snapshot")
    before, count = _calls(store_dir), len(_snapshots(tb))
    os.kill(service, signal.SIGSTOP)
    try:
        (ws / "b" / "f2.txt").write_text("while it was stopped\n")
        t0 = time.monotonic()
        got = json.loads(tb("snapshot", "--json").stdout)
        took = time.monotonic() - t0
    finally:
        os.kill(service, signal.SIGCONT)
    assert took < 10
    # Run here: the scan asked the stopped service what changed and got no answer.
    assert got["scan"]["mode"] == "full"
    # Woken, the service finds the call withdrawn: it runs nothing.
    assert _calls(store_dir) == before
    assert len(_snapshots(tb)) == count + 1
    assert os.listdir(store_dir / "service" / "claims") == []
    (ws / "b" / "f2.txt").write_text("after\n")
    tb("snapshot")
    assert _calls(store_dir) == before + 1
    assert len(_snapshots(tb)) == count + 2


def test_a_service_that_dies_with_a_call_says_so_and_never_runs_it_twice(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    count = len(_snapshots(tb))
    ask_service(str(store_dir), {"op": "fault", "kind": "die-in-call"})
    broke = tb("snapshot", check=1)
    assert broke.stdout == ""
    assert "stopped answering" in broke.stderr and "takeback log" in broke.stderr
    assert len(_snapshots(tb)) == count  # it died before running it; nor did the caller
    # The service is gone: the next call runs here.
    assert json.loads(tb("snapshot", "--json").stdout)["scan"]["mode"] == "full"
    assert len(_snapshots(tb)) == count + 1


def test_a_hook_call_whose_service_dies_fails_open_and_logs_it(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    ask_service(str(store_dir), {"op": "fault", "kind": "die-in-call"})
    doc = {"session_id": "s", "cwd": str(ws), "hook_event_name": "UserPromptSubmit"}
    proc = tb("hook", "claude-code", input=json.dumps({**doc, "prompt": "go"}).encode())
    assert proc.stdout == "" and proc.stderr == ""
    assert "stopped answering" in (store_dir / "hook.log").read_text()


def _hook_run(tb: CLI, ws: Path, env: dict[str, str]) -> None:
    base = {"session_id": "s", "cwd": str(ws)}

    def hook(**p: Any) -> None:
        proc = tb("hook", "claude-code", input=json.dumps({**base, **p}).encode(), env=env)
        assert proc.stdout == "" and proc.stderr == ""

    hook(hook_event_name="UserPromptSubmit", prompt="tidy up")
    call = {"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {"command": "sed -i"}}
    hook(hook_event_name="PreToolUse", **call)
    (ws / "a" / "f0.txt").write_text("by the command\n")
    (ws / "b" / "f1.txt").unlink()
    hook(hook_event_name="PostToolUse", **call)
    write = {"file_path": str(ws / "sub" / "new.txt"), "content": "x"}
    hook(hook_event_name="PreToolUse", tool_name="Write", tool_use_id="w1", tool_input=write)
    (ws / "sub" / "new.txt").write_text("x")
    hook(hook_event_name="Stop")


def _record(tb: CLI) -> list[tuple[str, Any, Any, str]]:
    return [(s["kind"], s["turn"], s["step"], s["message"]) for s in _snapshots(tb, "-n", "50")]


def test_hook_calls_the_service_runs_record_what_calls_run_here_do(
    tb: CLI, ws: Path, store_dir: Path, tmp_path: Path
) -> None:
    twin_ws, twin_store = tmp_path / "twin", tmp_path / "twin-store"
    os.rename(ws, twin_ws)
    twin = CLI(twin_ws, twin_store)
    ws.mkdir()
    for d in ("a", "b", "sub/deep"):
        (ws / d).mkdir(parents=True)
        for i in range(3):
            (ws / d / f"f{i}.txt").write_text(f"{d} {i}\n")
    local = {"TAKEBACK_RELAY": "0"}
    twin("snapshot")
    _hook_run(twin, twin_ws, local)
    tb("snapshot")
    with running_service(ws, store_dir):
        _hook_run(tb, ws, {})
        assert _calls(store_dir) == 5
    assert _record(tb) == _record(twin)
    changes = json.loads(tb("changes", "--session", "s", "--json").stdout)["changes"]
    twin_changes = json.loads(twin("changes", "--session", "s", "--json").stdout)["changes"]
    assert changes == twin_changes
    assert [(c["path"], c["status"]) for c in changes] == [
        ("a/f0.txt", "modified"),
        ("b/f1.txt", "deleted"),
        ("sub/new.txt", "created"),
    ]
    tb("undo", "--session", "s")
    assert (ws / "a" / "f0.txt").read_text() == "a 0\n"
    assert (ws / "b" / "f1.txt").read_text() == "b 1\n"
    assert not (ws / "sub" / "new.txt").exists()


def _ask_raw(store: Path, call: dict[str, Any]) -> list[Any]:
    """Send a call frame; return the service's first line and the ``done`` answer, if any."""
    from takeback import _wire

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(store / "service" / "sock"))
    try:
        sock.sendall(_wire.call_frame(**call))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    finally:
        sock.close()
    first, _, rest = data.partition(b"\n")
    got: list[Any] = [first.decode()]
    if rest:
        line, _, body = rest.partition(b"\n")
        size = _wire.header(line, _wire.DONE)
        assert size == len(body)
        got.append(_wire.done(body))
    return got


def _claim(store: Path, digit: str) -> tuple[Path, str, str]:
    """Make a claim file as a caller would; return the claims folder, the claim, and this
    installation's package folder."""
    import takeback

    claims = store / "service" / "claims"
    claim = digit * 24
    (claims / claim).write_bytes(b"")
    return claims, claim, os.path.dirname(os.path.abspath(takeback.__file__))


def test_a_call_meant_for_another_installation_or_without_its_claim_is_declined(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    claims, claim, mine = _claim(store_dir, "a")
    call = {
        "claim": claim,
        "package": "/somewhere/else/takeback",
        "argv": ["snapshot"],
        "cwd": str(ws),
        "env": dict(os.environ, TAKEBACK_STORE=str(store_dir)),
        "stdin": None,
    }
    count = len(_snapshots(tb))
    got = _ask_raw(store_dir, call)
    assert got == ["declined the service runs another installation of takeback"]
    assert (claims / claim).exists()  # still the caller's: it runs the call itself
    (claims / claim).unlink()
    got = _ask_raw(store_dir, {**call, "package": mine})
    assert got == ["declined the caller withdrew it"]
    assert len(_snapshots(tb)) == count
    (claims / claim).write_bytes(b"")
    got = _ask_raw(store_dir, {**call, "package": mine})
    assert got[0] == "taken" and got[1][0] == 0 and got[1][2] == ""
    assert not (claims / claim).exists()
    assert len(_snapshots(tb)) == count + 1


def test_a_file_tools_call_with_a_large_payload_is_run_by_the_service(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    big = "x" * (3 << 20)  # a Write of a 3 MB file: its content rides in the payload
    base = {"session_id": "s", "cwd": str(ws)}
    tb(
        "hook",
        "claude-code",
        input=json.dumps({**base, "hook_event_name": "UserPromptSubmit"}).encode(),
    )
    before = _calls(store_dir)
    write = {
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_use_id": "w1",
        "tool_input": {"file_path": str(ws / "a" / "f0.txt"), "content": big},
    }
    proc = tb("hook", "claude-code", input=json.dumps({**base, **write}).encode())
    assert proc.stdout == "" and proc.stderr == ""
    assert _calls(store_dir) == before + 1
    (ws / "a" / "f0.txt").write_text(big)
    tb("hook", "claude-code", input=json.dumps({**base, "hook_event_name": "Stop"}).encode())
    tb("undo", "--session", "s")
    assert (ws / "a" / "f0.txt").read_text() == "a 0\n"


def test_a_service_that_answers_garbage_gets_no_call_and_it_runs_here(
    tb: CLI, ws: Path, store_dir: Path
) -> None:
    import threading

    from takeback._service_client import ServicePaths

    tb("snapshot")
    paths = ServicePaths(str(store_dir))
    os.makedirs(paths.claims, mode=0o700, exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(paths.socket)
    server.listen(4)
    server.settimeout(10)
    asked: list[bytes] = []

    def answer_garbage() -> None:
        for _ in range(2):  # the relay's call, then the scan's question
            conn, _ = server.accept()
            with conn:
                asked.append(conn.recv(1 << 20)[:20])
                conn.sendall(b"not json at all\n")

    t = threading.Thread(target=answer_garbage)
    t.start()
    try:
        got = json.loads(tb("snapshot", "--json").stdout)
    finally:
        t.join(10)
        server.close()
        os.unlink(paths.socket)
    assert got["scan"] == {"mode": "full", "reason": "the service's answer was not understood"}
    assert [a.startswith(b"takeback-run ") for a in asked] == [True, False]
    assert os.listdir(paths.claims) == []  # withdrawn: the command ran it itself


def test_a_snapshot_interrupted_while_the_service_runs_it_says_so_and_is_taken(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    import subprocess
    import sys

    from tests.conftest import SRC, with_default_sigint

    count = len(_snapshots(tb))
    mark = store_dir.parent / "stalling"
    # Stalled long enough that the interrupt lands while it runs, on a busy machine too.
    fault = {"op": "fault", "kind": "stall-in-call", "seconds": 5.0, "mark": str(mark)}
    ask_service(str(store_dir), fault)
    env = {**os.environ, "TAKEBACK_STORE": str(store_dir), "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeback", "snapshot"],
        cwd=ws,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=with_default_sigint,  # interrupted below as Ctrl-C would
    )
    deadline = time.monotonic() + 20
    while not mark.exists() and time.monotonic() < deadline:  # the service has taken it
        time.sleep(0.01)
    assert mark.exists()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert out == b"" and err == b"takeback: interrupted\n"
    deadline = time.monotonic() + 20
    while len(_snapshots(tb)) == count and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_snapshots(tb)) == count + 1  # the service took it: it ran it to the end


def test_a_snapshot_the_service_ran_into_a_closed_pipe_ends_quietly(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    """``takeback snapshot --json | true``: recorded, exit 141, nothing on stderr."""
    before, count = _calls(store_dir), len(_snapshots(tb))
    proc = tb.into_closed_pipe("snapshot", "--json")
    assert (proc.returncode, proc.stderr) == (141, b"")
    assert _calls(store_dir) == before + 1
    assert len(_snapshots(tb)) == count + 1


def _send_raw(store: Path, data: bytes, *, close_early: bool = False) -> bytes:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(store / "service" / "sock"))
    try:
        sock.sendall(data)
        if close_early:
            return b""
        sock.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
        return got
    finally:
        sock.close()


def test_a_bad_call_frame_is_declined_and_the_service_goes_on(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    """Frames cut short, lying about their size, or not a call: nothing runs, nothing hangs."""
    from takeback import _wire

    claims, claim, mine = _claim(store_dir, "c")
    env = dict(os.environ, TAKEBACK_STORE=str(store_dir))
    good = _wire.call_frame(claim, mine, ["snapshot"], str(ws), env, None)
    count = len(_snapshots(tb))
    not_understood = b"declined the call was not understood\n"
    assert _send_raw(store_dir, b"takeback-run 5\n1:ab") == b""  # cut short: dropped
    assert _send_raw(store_dir, b"takeback-run 99999999999\n") == not_understood
    assert _send_raw(store_dir, _wire.frame(_wire.CALL, [b"x", b"y"])) == not_understood
    assert _send_raw(store_dir, b"takeback-run 6\n9:abcde") == not_understood
    bad_argc = _wire.frame(_wire.CALL, [claim.encode(), b"p", b"/", b"0", b"", b"7", b"x", b"0"])
    assert _send_raw(store_dir, bad_argc) == not_understood
    _send_raw(store_dir, good[: len(good) // 2], close_early=True)  # the caller went away
    assert (claims / claim).exists()  # none of these took the claim
    assert len(_snapshots(tb)) == count
    got = _send_raw(store_dir, good)
    first, _, rest = got.partition(b"\n")
    line, _, body = rest.partition(b"\n")
    assert first == _wire.TAKEN and _wire.header(line, _wire.DONE) == len(body)
    assert _wire.done(body)[0] == 0
    assert len(_snapshots(tb)) == count + 1
    assert not (claims / claim).exists()


@pytest.mark.parametrize("relay", ["1", "0"])
def test_a_snapshot_with_stdout_closed_is_recorded_without_a_traceback(
    tb: CLI, ws: Path, store_dir: Path, service: int, relay: str
) -> None:
    """``takeback snapshot >&-``: no output to print it to, the snapshot all the same."""
    before, count = _calls(store_dir), len(_snapshots(tb))
    proc = tb.without_stdout("snapshot", env={"TAKEBACK_RELAY": relay})
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert len(_snapshots(tb)) == count + 1
    assert _calls(store_dir) == before + (1 if relay == "1" else 0)


def test_databases_the_service_holds_open_still_let_gc_empty_their_logs(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    """The service keeps the store's databases open between calls, idle: gc's checkpoints
    still copy the write-ahead logs whole and empty them, and nothing is left when the
    service stops."""
    for i in range(12):
        (ws / "a" / f"f{i % 3}.txt").write_text(f"version {i}\n")
        tb("snapshot")
    assert (store_dir / "meta.db-wal").exists()  # kept between calls while it runs
    tb("gc", "--keep-turns", "1")
    for name in ("meta.db", "objects.db"):
        assert (store_dir / f"{name}-wal").stat().st_size == 0, name
    assert "is sound" in tb("fsck").stdout
    _service.stop(str(store_dir), timeout=5.0)
    deadline = time.monotonic() + 10
    while alive(service) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(store_dir.glob("*.db-wal")), list(store_dir.glob("*"))
    assert len(_snapshots(tb)) >= 13


def test_status_the_service_runs_prints_what_a_local_run_prints(
    tb: CLI, ws: Path, store_dir: Path, service: int
) -> None:
    tb("snapshot")  # the service's first mark
    (ws / "a" / "f1.txt").write_text("changed\n")
    (ws / "b" / "f0.txt").unlink()
    (ws / "sub" / "new.txt").write_text("new\n")
    before = _calls(store_dir)
    served = tb("status")
    served_json = json.loads(tb("status", "--json").stdout)
    assert _calls(store_dir) == before + 2
    local = tb("status", env={"TAKEBACK_RELAY": "0"})
    local_json = json.loads(tb("status", "--json", env={"TAKEBACK_RELAY": "0"}).stdout)
    assert _calls(store_dir) == before + 2
    assert served.stdout == local.stdout == "M a/f1.txt\nD b/f0.txt\nA sub/new.txt\n"
    assert served_json["changes"] == local_json["changes"]
    assert served_json["scan"]["mode"] == "service"
    # An option status does not take is refused as a local run refuses it.
    bad = tb("status", "-m", "x", check=2)
    assert bad.stderr == tb("status", "-m", "x", check=2, env={"TAKEBACK_RELAY": "0"}).stderr


def test_a_served_call_gets_the_callers_environment_exactly() -> None:
    """The service sets each call's environment by what differs from the last one's:
    a name the caller lacks is gone, for the call and for what it runs."""
    import subprocess

    from takeback.cli._served import _set_environ

    saved = dict(os.environ)
    try:
        caller = {k: v for k, v in saved.items() if k != "HOME"}
        caller["TAKEBACK_TEST_ONLY_THIS_CALL"] = "1"
        caller["PATH"] = saved.get("PATH", "") + ":/nowhere"
        _set_environ(caller)
        assert dict(os.environ) == caller
        seen = subprocess.run(["env", "-0"], capture_output=True, check=True).stdout
        got = dict(e.split("=", 1) for e in seen.decode().split("\0") if e)
        # (Names set in C alone, past os.environ, are not the service's to manage.)
        known = saved.keys() | caller.keys()
        assert {k: v for k, v in got.items() if k in known} == caller
    finally:
        _set_environ(saved)
    assert dict(os.environ) == saved


def test_one_reader_for_the_command_lines_read_before_the_parser() -> None:
    """The relay, a hook call and the choice of parser read a line the same way."""
    from takeback.cli._argv import GLOBAL_VALUED, read

    valued = (*GLOBAL_VALUED, "--message")
    line = read(
        ["--root=/w", "snapshot", "-m", "a b", "--store", "/s", "--json"], valued, ["--json"]
    )
    assert (line.words, line.opts, line.unknown, line.missing) == (
        ["snapshot"],
        {"--root": "/w", "--message": "a b", "--store": "/s"},
        [],
        None,
    )
    line = read(["snapshot", "--help", "--session"], valued)
    assert (line.words, line.unknown, line.missing) == (["snapshot"], ["--help"], "--session")
    # -m is a value only where --message is one (a hook call has none).
    assert read(["hook", "-m", "x"], GLOBAL_VALUED).words == ["hook", "x"]


def test_the_commands_the_relay_reads_are_the_ones_main_hands_it() -> None:
    from takeback.cli import _RELAYED, _relay

    assert set(_relay._COMMANDS) == _RELAYED
