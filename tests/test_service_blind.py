"""The watching service cannot go blind: every cause of incomplete watches means a full scan.

Each test here is a way the service was once made to answer "nothing changed" while
something had (a hard link, a recreated root, an unmount, a folder exchange, a linked
ignore file): the snapshot it feeds must equal a scan with no cache, every time.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from takeback.ops import Options, scan
from takeback.store import FolderStore, Store

from ._service import can_mount, full_scan, running_service


def _seed(root: Path) -> None:
    for d in ("", "a", "b", "c", "c/deep"):
        (root / d).mkdir(parents=True, exist_ok=True)
        for i in range(2):
            (root / d / f"f{i}").write_bytes(f"{d} {i}\n".encode())


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Path, Store]]:
    """A seeded workspace, its store, and a running service whose mark the cache holds."""
    root = tmp_path / "ws"
    _seed(root)
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    try:
        with running_service(root, tmp_path / "store"):
            assert scan(store, Options()).mode == "full"
            assert scan(store, Options()).mode == "service"
            yield root, store
    finally:
        store.close()


def _exact(store: Store) -> str:
    """Scan through the service; assert it equals a scan with no cache; return its mode."""
    got = scan(store, Options())
    full = full_scan(store)
    assert got.tree == full.tree, got.reason
    assert got.files == full.files
    return got.mode


# -- 1. hard links -------------------------------------------------------------------------


def test_a_file_written_through_a_hard_link_in_another_folder_is_seen(
    watched: tuple[Path, Store],
) -> None:
    root, store = watched
    os.link(root / "a" / "f0", root / "b" / "linked")
    _exact(store)  # the new link: its other name's folder is found
    with open(root / "b" / "linked", "ab") as f:
        f.write(b"written through b/linked\n")
    _exact(store)
    assert (root / "a" / "f0").read_bytes().endswith(b"through b/linked\n")
    with open(root / "a" / "f0", "ab") as f:
        f.write(b"and through a/f0\n")
    _exact(store)


def test_a_link_known_before_the_service_started_is_listed_every_time(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _seed(root)
    os.link(root / "a" / "f1", root / "c" / "deep" / "twin")
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    try:
        with running_service(root, tmp_path / "store"):
            scan(store, Options())
            for n in range(3):
                with open(root / "c" / "deep" / "twin", "ab") as f:
                    f.write(b"%d\n" % n)
                assert _exact(store) == "service"
    finally:
        store.close()


# -- 2. the root made again ----------------------------------------------------------------


@pytest.mark.parametrize("how", ["rm-mkdir", "mv-mkdir"])
def test_a_root_removed_and_made_again_is_watched_again(
    watched: tuple[Path, Store], how: str
) -> None:
    root, store = watched
    if how == "rm-mkdir":
        shutil.rmtree(root)
    else:
        root.rename(root.parent / "ws.bak")
    root.mkdir()
    (root / "new").mkdir()
    (root / "new" / "x").write_bytes(b"x\n")
    _exact(store)
    for n in range(3):
        (root / "new" / f"later{n}").write_bytes(b"later\n")
        (root / f"top{n}").write_bytes(b"top\n")
        _exact(store)
    if how == "mv-mkdir":
        # The old tree, moved away, is not this workspace: its changes are not reported.
        (root.parent / "ws.bak" / "a" / "f0").write_bytes(b"elsewhere\n")
        assert _exact(store) == "service"


# -- 3. mounts -----------------------------------------------------------------------------


def test_an_unmount_uncovers_a_folder_that_is_then_watched(
    watched: tuple[Path, Store], tmp_path: Path
) -> None:
    root, store = watched
    if not can_mount(tmp_path):
        pytest.skip("mounting needs CAP_SYS_ADMIN")
    under = root / "c"
    subprocess.run(["mount", "-t", "tmpfs", "none", str(under)], check=True)
    try:
        (under / "on-the-mount").write_bytes(b"m\n")
        _exact(store)  # the mount covers c's own files
    finally:
        subprocess.run(["umount", str(under)], check=True)
    _exact(store)  # c's own files again
    for n in range(3):
        (under / f"after{n}").write_bytes(b"seen\n")
        (under / "deep" / "f0").write_bytes(b"changed %d\n" % n)
        _exact(store)


def test_a_mount_over_a_watched_folder_is_seen(watched: tuple[Path, Store], tmp_path: Path) -> None:
    root, store = watched
    if not can_mount(tmp_path):
        pytest.skip("mounting needs CAP_SYS_ADMIN")
    subprocess.run(["mount", "-t", "tmpfs", "none", str(root / "b")], check=True)
    try:
        _exact(store)
        for n in range(3):
            (root / "b" / f"on{n}").write_bytes(b"on the mount\n")
            _exact(store)
    finally:
        subprocess.run(["umount", str(root / "b")], check=True)
    _exact(store)


# -- 4. an exchange of two folders ---------------------------------------------------------

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        pytest.skip("no renameat2 in this C library")
    got = libc.renameat2(
        _AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), ctypes.c_uint(_RENAME_EXCHANGE)
    )
    if got != 0:
        err = ctypes.get_errno()
        pytest.skip(f"renameat2(RENAME_EXCHANGE) failed: {os.strerror(err)}")


@pytest.mark.parametrize("pair", [("a", "b"), ("a", "c/deep"), ("b", "c")])
def test_an_exchange_of_two_folders_keeps_both_watched(
    watched: tuple[Path, Store], pair: tuple[str, str]
) -> None:
    root, store = watched
    _exchange(root / pair[0], root / pair[1])
    _exact(store)
    for n in range(3):
        for side in pair:
            (root / side / f"after{n}").write_bytes(b"%s %d\n" % (side.encode(), n))
        _exact(store)
        for side in pair:
            (root / side / "f0").write_bytes(b"edited %d\n" % n)
        _exact(store)


# -- an ignore file reached through a link ---------------------------------------------------


def test_an_exclude_file_edited_through_its_link_target_is_noticed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _seed(root)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    shared = tmp_path / "shared-exclude"
    shared.write_bytes(b"")
    exclude = root / ".git" / "info" / "exclude"
    exclude.unlink(missing_ok=True)
    exclude.symlink_to(shared)
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    try:
        with running_service(root, tmp_path / "store"):
            scan(store, Options())
            assert scan(store, Options()).mode == "service"
            shared.write_bytes(b"a/\n")
            got = scan(store, Options())
            assert got.tree == full_scan(store).tree
            assert got.mode == "full" and "ignore" in got.reason
    finally:
        store.close()


def test_a_cache_from_before_links_were_marked_is_listed_again_once(tmp_path: Path) -> None:
    # A cache saved by a takeback that did not mark linked folders has a stat key for
    # them that a scan would trust: read, it is trusted for nothing, and rewritten.
    import marshal

    from takeback.scan import CACHE_KEY, GRANULARITY_NS, OLDER_KEY
    from takeback.scan._cache import _STAT, SHARDS, is_linked, shard_of

    root = tmp_path / "ws"
    _seed(root)
    os.link(root / "a" / "f1", root / "c" / "twin")
    past = time.time_ns() - 10 * GRANULARITY_NS
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(dirpath, name), ns=(past, past))
    time.sleep(GRANULARITY_NS / 1e9 + 0.1)  # their ctimes too: no file is racy
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    try:
        first = scan(store, Options())
        folders = {}
        for key, raw in store.meta.get_kv_prefix(CACHE_KEY):
            if key != CACHE_KEY:
                folders.update(marshal.loads(raw))
        assert {r for r, f in folders.items() if is_linked(f[_STAT])} == {"a", "c"}
        older = {r: (*f[:_STAT], b"k" * 16, *f[_STAT + 1 :]) for r, f in folders.items()}
        shards: list[dict[str, object]] = [{} for _ in range(SHARDS)]
        for r, f in older.items():
            shards[shard_of(r)][r] = f
        with store.meta.tx():
            store.meta.set_kvs({k: None for k, _v in store.meta.get_kv_prefix("dirs-")})
            rows: dict[str, bytes | None] = {OLDER_KEY: b"t" * 16}
            for i, part in enumerate(shards):
                if part:
                    rows[f"{OLDER_KEY}/{i:03x}"] = marshal.dumps(part)
            store.meta.set_kvs(rows)
        again = scan(store, Options(), use_service=False)
        assert (again.tree, again.mode) == (first.tree, "full")
        assert again.reason == "the scan cache is of an older format"
        assert again.hashed_files == 0  # every folder listed again, no file read again
        keys = {k for k, _v in store.meta.get_kv_prefix("dirs-")}
        assert CACHE_KEY in keys and OLDER_KEY not in keys
        with running_service(root, tmp_path / "store"):
            scan(store, Options())
            with open(root / "c" / "twin", "ab") as twin:
                twin.write(b"through c/twin\n")
            assert _exact(store) == "service"
    finally:
        store.close()


# -- the service audits itself --------------------------------------------------------------


def _status(store_dir: Path) -> dict[str, object]:
    from takeback.integrations import _service

    return _service.status(str(store_dir))


def _wait_for_audits(store_dir: Path, n: int) -> dict[str, object]:
    deadline = time.monotonic() + 30
    doc = _status(store_dir)
    while int(doc.get("audits", 0)) < n and time.monotonic() < deadline:  # type: ignore[call-overload]
        time.sleep(0.1)
        doc = _status(store_dir)
    return doc


def test_an_audit_agrees_when_the_service_saw_everything(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _seed(root)
    store = FolderStore.open(str(tmp_path / "store"), str(root), create=True)
    options = ["--audit-after", "0.2", "--audit-every", "0.3"]
    try:
        with running_service(root, tmp_path / "store", options):
            scan(store, Options())
            (root / "b" / "new").write_bytes(b"seen\n")
            scan(store, Options())
            doc = _wait_for_audits(tmp_path / "store", 2)
            assert int(doc["audits"]) >= 2 and doc["divergences"] == 0  # type: ignore[call-overload]
            assert doc["degraded"] is None
            assert _exact(store) == "service"
    finally:
        store.close()


def test_a_planted_divergence_is_caught_logged_and_turns_the_fast_path_off(
    tmp_path: Path,
) -> None:
    from takeback._service_client import ServicePaths, ask_service

    root = tmp_path / "ws"
    _seed(root)
    store_dir = tmp_path / "store"
    store = FolderStore.open(str(store_dir), str(root), create=True)
    options = ["--audit-after", "0.2", "--audit-every", "0.3"]
    try:
        with running_service(root, store_dir, options, faults=True):
            scan(store, Options())
            assert scan(store, Options()).mode == "service"
            # The watch of c/deep is dropped without a trace: the service goes blind there.
            ask_service(str(store_dir), {"op": "fault", "kind": "blind", "folder": "c/deep"})
            (root / "c" / "deep" / "f0").write_bytes(b"unseen by the service\n")
            deadline = time.monotonic() + 30
            doc = _status(store_dir)
            while doc.get("divergences") == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
                doc = _status(store_dir)
            assert doc["divergences"] == 1
            assert "c/deep" in str(doc["last_audit"])
            assert "audit" in str(doc["degraded"])
            log = Path(ServicePaths(str(store_dir)).log).read_text()
            assert "differed from a full scan" in log and "c/deep" in log
            got = scan(store, Options())
            assert got.mode == "full" and "audit" in got.reason
            assert got.tree == full_scan(store).tree
    finally:
        store.close()
