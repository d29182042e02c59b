"""The watching service trusts no one: a clean daemon, its owner's folders, its owner's peers.

Each test is a finding: a lock held for half an hour by the detached service, a root
service following another user's links, a socket that hands root's environment to a
stranger, a command run from a removed folder, input that killed the service.
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from takeback._service_client import ServicePaths
from takeback.integrations import _service

from ._service import alive, running_service, stop_for_good
from .conftest import CLI, SRC


def _seed(ws: Path) -> None:
    (ws / "a").mkdir()
    (ws / "a" / "f").write_text("f\n")


def _nobody() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("needs root, to act as another user")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")


# -- 6. a daemon that starts clean ---------------------------------------------------------


def test_the_detached_service_holds_nothing_its_starter_had_open(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    _seed(ws_dir)
    tb("snapshot")
    lock = tmp_path / "job.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # As `flock job.lock takeback service start` would run it: the lock's
        # descriptor is inherited by the command.
        env = dict(os.environ, TAKEBACK_STORE=str(store_dir), PYTHONPATH=SRC)
        subprocess.run(
            [sys.executable, "-m", "takeback", "service", "start", "--json"],
            cwd=ws_dir,
            env=env,
            pass_fds=(fd,),
            check=True,
            capture_output=True,
            timeout=60,
        )
    finally:
        os.close(fd)
    pid = _service.running_pid(str(store_dir))
    assert pid
    try:
        other = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the job's lock is free
        finally:
            os.close(other)
        held = {os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
        assert str(lock) not in held
        assert os.readlink(f"/proc/{pid}/cwd") == "/"
        assert os.getsid(pid) != os.getsid(0)  # a session of its own
    finally:
        stop_for_good(store_dir, pid)


def test_stop_never_signals_a_process_the_pid_file_did_not_start(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    _seed(ws_dir)
    tb("snapshot")
    bystander = subprocess.Popen(["sleep", "60"])
    time.sleep(0.1)  # a start time some clock ticks before the service's
    try:
        with running_service(ws_dir, store_dir) as pid:
            os.kill(pid, signal.SIGSTOP)  # it will not answer "stop"
            try:
                # The pid file names another process (a pid from another namespace, or
                # one reused): its start time is not the one recorded.
                record = os.open(ServicePaths(str(store_dir)).pid, os.O_WRONLY)
                stat_line = Path(f"/proc/{pid}/stat").read_bytes()
                start = stat_line.rsplit(b")", 1)[1].split()[19]
                os.ftruncate(record, 0)
                os.pwrite(record, b"%d %s" % (bystander.pid, start), 0)
                os.close(record)
                _service.stop(str(store_dir), timeout=1.0)
                assert bystander.poll() is None, "stop killed a process it did not start"
            finally:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGTERM)
    finally:
        bystander.kill()
        bystander.wait()


_FINALIZER_SERVICE = """
import os, sys, time
from takeback.integrations import _service

marker = sys.argv[3]


class Slow:
    def __del__(self):
        # A finalizer the signal lands in: Python ignores what it raises there.
        open(marker, "w").close()
        time.sleep(2.0)


sweep = _service._Service.sweep_claims


def sweep_then_drop(self):
    sweep(self)
    if not os.path.exists(marker):
        Slow()  # dropped at once: its finalizer runs here, in the service's loop


_service._Service.sweep_claims = sweep_then_drop
sys.exit(_service.serve(sys.argv[1], sys.argv[2], quiet=120.0))
"""


def test_a_sigterm_that_lands_in_a_finalizer_still_stops_the_service(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    # A signal's handler runs wherever the main thread is, a finalizer (``__del__``, a
    # collector's callback) too, and an exception raised there is printed and dropped:
    # a SIGTERM whose only effect was to raise went unheeded, and the service ran on
    # until its idle exit, 30 minutes later.
    _seed(ws_dir)
    tb("snapshot")
    marker = tmp_path / "in-finalizer"
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.Popen(
        [sys.executable, "-c", _FINALIZER_SERVICE, str(ws_dir), str(store_dir), str(marker)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists(), proc.stderr.read().decode() if proc.stderr else ""
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("the service ran on 10 s after SIGTERM")
        assert code == 0
        assert _service.running_pid(str(store_dir)) is None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


# -- 7. folders and peers of its own user only ---------------------------------------------


def test_a_store_folder_others_may_write_is_refused(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    _seed(ws_dir)
    tb("snapshot")
    store_dir.chmod(0o777)
    try:
        for args in (("snapshot",), ("service", "start")):
            got = tb(*args, check=2)
            assert got.stderr.count("\n") == 1 and str(store_dir) in got.stderr
            assert "written by others" in got.stderr and "Traceback" not in got.stderr
        assert _service.running_pid(str(store_dir)) is None
    finally:
        store_dir.chmod(0o700)


def test_a_service_folder_another_user_made_is_refused(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    nobody = _nobody()
    _seed(ws_dir)
    tb("snapshot")
    paths = ServicePaths(str(store_dir))
    os.mkdir(paths.dir, 0o700)
    victim = tmp_path / "root-owned"
    victim.write_text("precious\n")
    os.symlink(victim, paths.pid)  # what the other user planted
    os.chown(paths.dir, nobody.pw_uid, nobody.pw_gid)
    got = tb("service", "start", check=2)
    assert "belongs to another user" in got.stderr and paths.dir in got.stderr
    assert victim.read_text() == "precious\n"
    assert _service.running_pid(str(store_dir)) is None


def test_a_pid_link_is_never_followed(
    tb: CLI, ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    _seed(ws_dir)
    tb("snapshot")
    paths = ServicePaths(str(store_dir))
    os.mkdir(paths.dir, 0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.symlink(victim, paths.pid)
    tb("service", "start", "--wait", "2", check=2)
    assert victim.read_text() == "precious\n"


def test_the_claims_sweep_never_follows_a_link(
    ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    _seed(ws_dir)
    victim = tmp_path / "victim-folder"
    victim.mkdir()
    old = victim / "old-file"
    old.write_text("precious\n")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    paths = ServicePaths(str(store_dir))
    os.makedirs(paths.dir, 0o700)
    os.symlink(victim, paths.claims)
    svc = _service._Service(
        str(ws_dir), str(store_dir), quiet=1, idle_full=1, full_every=1, faults=False
    )
    try:
        svc.sweep_claims()
    finally:
        svc.watcher.close()
    assert old.read_text() == "precious\n"


def test_a_socket_of_another_user_gets_nothing(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    nobody = _nobody()
    _seed(ws_dir)
    tb("snapshot")
    paths = ServicePaths(str(store_dir))
    os.makedirs(paths.claims, 0o700)
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the stranger: binds as root, listens as nobody
        try:
            os.close(r)
            os.close(ready_r)
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(paths.socket)
            os.setresgid(nobody.pw_gid, nobody.pw_gid, nobody.pw_gid)
            os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)
            srv.listen(4)
            os.write(ready_w, b"!")
            srv.settimeout(3)
            got = b""
            try:
                while True:  # every connection, until none comes for 3 s
                    conn, _ = srv.accept()
                    conn.settimeout(2)
                    try:
                        while chunk := conn.recv(1 << 16):
                            got += chunk
                    except OSError:
                        pass
                    conn.close()
            except OSError:
                pass
            os.write(w, b"%d" % len(got))
        finally:
            os._exit(0)
    os.close(w)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"!"
        os.close(ready_r)
        secret = {"TAKEBACK_TEST_SECRET": "do-not-send"}
        doc = json.loads(tb("snapshot", "--json", env=secret).stdout)
        assert doc["scan"]["mode"] == "full"
        assert "another user" in doc["scan"]["reason"]
    finally:
        os.waitpid(child, 0)
        sent = os.read(r, 64)
        os.close(r)
    assert sent == b"0", "the stranger's socket was sent the call"


@pytest.mark.quick
def test_the_service_answers_no_stranger(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    nobody = _nobody()
    _seed(ws_dir)
    tb("snapshot")
    with running_service(ws_dir, store_dir):
        paths = ServicePaths(str(store_dir))
        os.chmod(paths.dir, 0o711)  # reachable by a stranger, still written by none
        os.chmod(paths.socket, 0o666)
        r, w = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the stranger
            try:
                os.close(r)
                # A handle on the folder, taken as root: the stranger reaches the socket
                # through it without searching the folders above (each 0700).
                dfd = os.open(paths.dir, os.O_PATH)
                os.setresgid(nobody.pw_gid, nobody.pw_gid, nobody.pw_gid)
                os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.settimeout(5)
                c.connect(f"/proc/self/fd/{dfd}/sock")
                got = b""
                try:
                    c.sendall(b'{"op": "status"}\n')
                except BrokenPipeError:
                    pass  # closed before the question was sent: no answer either
                try:
                    while chunk := c.recv(1 << 16):
                        got += chunk
                except ConnectionResetError:
                    pass  # closed unread: no answer either
                os.write(w, got or b"-")
            except OSError as e:
                os.write(w, f"error {e}".encode())
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(child, 0)
        answer = os.read(r, 1 << 16)
        os.close(r)
        assert answer == b"-", answer
        status = _service.status(str(store_dir))
        assert status["answering"] and status["strangers"] == 1


# -- 8. and the rest -----------------------------------------------------------------------


def test_a_command_run_from_a_removed_folder_says_so_in_one_line(
    tb: CLI, ws_dir: Path, tmp_path: Path
) -> None:
    _seed(ws_dir)
    tb("snapshot")
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        "import os, sys, runpy; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "sys.argv = ['takeback', *sys.argv[2:]]; runpy.run_module('takeback', run_name='__main__')"
    )
    env = dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)
    got = subprocess.run(
        [sys.executable, "-c", script, str(gone), "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode == 2, got.stderr
    assert got.stderr.count("\n") == 1 and "current folder no longer exists" in got.stderr
    gone.mkdir()
    ok = subprocess.run(
        [sys.executable, "-c", script, str(gone), "status", "--root", str(ws_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr


def test_an_empty_variable_name_does_not_fail_a_relayed_call(
    tb: CLI, ws_dir: Path, store_dir: Path
) -> None:
    _seed(ws_dir)
    tb("snapshot")
    with running_service(ws_dir, store_dir):
        tb("snapshot")  # the service's first: a full scan, and its mark
        doc = json.loads(tb("snapshot", "--json", env={"": "odd"}).stdout)
        assert doc["scan"]["mode"] == "service"
        assert _service.status(str(store_dir))["calls"] >= 1


def test_json_nested_deep_does_not_kill_the_service(tb: CLI, ws_dir: Path, store_dir: Path) -> None:
    _seed(ws_dir)
    tb("snapshot")
    with running_service(ws_dir, store_dir) as pid:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(5)
        c.connect(ServicePaths(str(store_dir)).socket)
        c.sendall(b"[" * 200_000 + b"\n")
        try:
            c.recv(1 << 16)
        except OSError:
            pass
        c.close()
        assert alive(pid)
        assert _service.status(str(store_dir))["answering"]
