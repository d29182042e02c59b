"""The PostgreSQL store's own rules: its schema and version, keys, addresses and errors."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

import takeback
from takeback.errors import StoreError, StoreMissingError, StoreVersionError
from takeback.store import open_store
from takeback.store._pg_schema import PG_SCHEMA_VERSION

from ._postgres import PgServer, pg_server, pg_url
from .conftest import CLI, write

__all__ = ["pg_server", "pg_url"]

pytestmark = pytest.mark.postgres


def test_the_schema_is_made_once_by_servers_that_start_together(
    pg_url: str, tmp_path: Path
) -> None:
    errors: list[BaseException] = []

    def first_snapshot(i: int) -> None:
        root = tmp_path / f"ws{i}"
        root.mkdir()
        write(root, "f.txt", f"{i}\n")
        try:
            with takeback.Workspace(root, store=pg_url, data_dir=str(tmp_path / f"d{i}")) as ws:
                ws.snapshot()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=first_snapshot, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(pg_url) as conn:
        got = conn.execute(b"SELECT version FROM takeback.version").fetchall()
        assert got == [(PG_SCHEMA_VERSION,)]
        (n,) = conn.execute(b"SELECT count(*) FROM takeback.workspaces").fetchone() or (0,)
    assert n == 4


def test_a_newer_schema_is_refused_and_a_missing_one_is_no_store(
    pg_url: str, tmp_path: Path, ws_dir: Path
) -> None:
    local = str(tmp_path / "local")
    with pytest.raises(StoreMissingError):
        open_store(pg_url, str(ws_dir), local=local, create=False)
    open_store(pg_url, str(ws_dir), local=local, create=True).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(b"UPDATE takeback.version SET version = 99")
    with pytest.raises(StoreVersionError, match="newer than this takeback knows"):
        open_store(pg_url, str(ws_dir), local=local, create=True)


def test_a_database_of_the_first_schema_is_migrated_and_keeps_its_history(
    pg_url: str, tmp_path: Path, ws_dir: Path
) -> None:
    """A database made by a takeback of schema 1 (before gc's indexes) is brought forward."""
    write(ws_dir, "f.txt", "kept\n")
    data = str(tmp_path / "data")
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=data) as ws:
        first = ws.snapshot("made at version 1")
    # Taken back to schema 1 (what version 2 adds, removed), with its rows:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name in ("steps_before", "steps_after", "turns_before", "turns_after"):
            conn.execute(f"DROP INDEX takeback.{name}".encode())
        conn.execute(b"DROP INDEX takeback.ops_pre")
        conn.execute(b"DROP INDEX takeback.sessions_baseline")
        # and what version 3 adds: the sequence numbers of turns and ops
        conn.execute(b"ALTER TABLE takeback.turns DROP COLUMN begun_seq")
        conn.execute(b"ALTER TABLE takeback.turns DROP COLUMN ended_seq")
        conn.execute(b"ALTER TABLE takeback.ops DROP COLUMN seq")
        conn.execute(b"ALTER TABLE takeback.touches DROP COLUMN unconfirmed")
        conn.execute(b"ALTER TABLE takeback.changes DROP COLUMN unconfirmed")
        # and what version 4 adds: the objects' numbers (their sequence goes with them)
        conn.execute(b"ALTER TABLE takeback.objects DROP COLUMN seq")
        conn.execute(b"UPDATE takeback.version SET version = 1")
    with takeback.Workspace(ws_dir, store=pg_url, data_dir=data) as ws:
        assert [s.id for s in ws.log()] == [first.id]
        write(ws_dir, "g.txt", "stored after the upgrade\n")
        ws.snapshot("made at the newest version")
    with psycopg.connect(pg_url) as conn:
        got = conn.execute(b"SELECT version FROM takeback.version").fetchall()
        indexes = conn.execute(
            b"SELECT count(*) FROM pg_indexes WHERE schemaname = 'takeback' "
            b"AND indexname IN ('steps_before', 'turns_after', 'ops_pre', 'sessions_baseline')"
        ).fetchone()
        # Objects stored before the upgrade have no number; those stored after, one each.
        numbered = conn.execute(
            b"SELECT count(*) FILTER (WHERE seq IS NULL), count(seq) FROM takeback.objects"
        ).fetchone()
    assert got == [(PG_SCHEMA_VERSION,)] and indexes == (4,)
    assert numbered is not None and numbered[0] > 0 and numbered[1] > 0


def test_workspaces_in_one_database_keep_their_own_histories(pg_url: str, tmp_path: Path) -> None:
    roots = [tmp_path / "one", tmp_path / "two"]
    for i, root in enumerate(roots):
        root.mkdir()
        write(root, "f.txt", f"workspace {i}\n")
    data = str(tmp_path / "data")
    with takeback.Workspace(roots[0], store=pg_url, data_dir=data) as ws:
        first = ws.snapshot("one's")
    with takeback.Workspace(roots[1], store=pg_url, data_dir=data) as ws:
        ws.snapshot("two's")
        assert [s.message for s in ws.log()] == ["two's"]
        with pytest.raises(takeback.RefError):
            ws.rewind(first.id)
    # One key, two folders (a workspace mounted at two paths): one history.
    with takeback.Workspace(roots[1], store=f"{pg_url}#shared", data_dir=data) as ws:
        ws.snapshot("from two")
    with takeback.Workspace(roots[0], store=f"{pg_url}#shared", data_dir=data) as ws:
        assert [s.message for s in ws.log()] == ["from two"]


def test_an_unreachable_database_is_one_line_and_hides_the_password(
    tb: CLI, pg_server: PgServer
) -> None:
    url = f"postgresql://someone:s3cret@127.0.0.1:{pg_server.port}/no_such_db"
    proc = tb("log", env={"TAKEBACK_STORE": url}, check=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("takeback: error: cannot reach")
    assert "s3cret" not in proc.stderr and "***" in proc.stderr


def test_a_database_store_has_nothing_to_adopt(pg_url: str, ws_dir: Path) -> None:
    with (
        takeback.Workspace(ws_dir, store=pg_url) as ws,
        pytest.raises(takeback.UsageError, match="nothing to adopt"),
    ):
        ws.adopt()


def test_a_lost_connection_is_a_store_error(pg_url: str, tmp_path: Path, ws_dir: Path) -> None:
    store = open_store(pg_url, str(ws_dir), local=str(tmp_path / "l"), create=True)
    pid = store.meta.pg.conn.info.backend_pid  # type: ignore[attr-defined]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(b"SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StoreError, match="failed"):
        store.meta.snapshots()
    store.close()


def test_the_store_option_names_a_database_over_the_environment(
    tb: CLI, ws_dir: Path, pg_url: str
) -> None:
    write(ws_dir, "f.txt", "one\n")
    sid = tb("--store", pg_url, "snapshot", "-m", "in the database").stdout.strip()
    assert "in the database" in tb("log", "--store", pg_url).stdout
    assert not tb.store.exists()  # the folder store in the environment was never made
    write(ws_dir, "f.txt", "two\n")
    tb("rewind", "--to", sid, "--store", pg_url)
    assert (ws_dir / "f.txt").read_text() == "one\n"
