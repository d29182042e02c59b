"""Store layer: objects are checked on read, the store refuses what it cannot trust."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat
from pathlib import Path

import pytest

from takeback.errors import (
    RootMismatchError,
    StoreCorruptError,
    StoreMissingError,
    StoreVersionError,
)
from takeback.store import Store


def test_objects_round_trip_and_are_named_by_their_sha256(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "s"), "/root-a", create=True)
    data = b"hello\n" * 1000
    oid = store.objects.put("blob", data)
    assert oid == hashlib.sha256(data).hexdigest()
    store.objects.flush()
    assert store.objects.get(oid) == data
    assert store.objects.put("blob", data) == oid  # written once
    (size,) = store.objects.conn.execute("SELECT length(data) FROM objects").fetchone()
    assert size < len(data) // 10  # compressed
    store.close()


def test_a_tampered_object_fails_its_check(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = Store.open(str(path), "/r", create=True)
    oid = store.objects.put("blob", b"original")
    store.close()
    conn = sqlite3.connect(path / "objects.db")
    conn.execute("UPDATE objects SET data=? WHERE oid=?", (b"not zstd at all", oid))
    conn.commit()
    conn.close()
    store = Store.open(str(path), "/r", create=False)
    with pytest.raises(StoreCorruptError, match="damaged"):
        store.objects.get(oid)
    with pytest.raises(StoreCorruptError, match="missing"):
        store.objects.get("0" * 64)
    store.close()


def test_missing_newer_and_foreign_stores_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with pytest.raises(StoreMissingError):
        Store.open(str(path), "/r", create=False)
    Store.open(str(path), "/r", create=True).close()
    with pytest.raises(RootMismatchError):
        Store.open(str(path), "/other", create=False)
    marker = path / "store.json"
    info = json.loads(marker.read_text())
    info["format"] = 99
    marker.write_text(json.dumps(info))
    with pytest.raises(StoreVersionError):
        Store.open(str(path), "/r", create=False)
    marker.write_text("{not json")
    with pytest.raises(StoreCorruptError):
        Store.open(str(path), "/r", create=False)


def test_a_store_without_its_databases_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "s"
    Store.open(str(path), "/r", create=True).close()
    (path / "objects.db").unlink()
    with pytest.raises(StoreCorruptError, match="objects.db is missing"):
        Store.open(str(path), "/r", create=False)


def test_store_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = Store.open(str(path), "/r", create=True)
    store.objects.put("blob", b"x")
    store.objects.flush()
    with store.lock(exclusive=True):
        with store.lock(exclusive=False):  # re-entrant: a snapshot inside a restore
            pass
    store.log_event({"event": "x"})
    store.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for p in path.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p.name
