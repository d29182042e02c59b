"""A pytest plugin that runs end-to-end suites against the PostgreSQL store.

Loaded with ``-p tests._pg_mode`` and ``TAKEBACK_TEST_PG=<database URL>`` (by
``tests/test_postgres_suites.py``); without that variable it does nothing. Every store
folder a test names (``Workspace(store=...)``, the ``tb`` command line's
``TAKEBACK_STORE``) becomes that database with the folder's path as the workspace's key,
so each test still has a history of its own. Tests that look inside a store folder (its
files, its lock file, its ``events.jsonl``) check the folder store itself and are left out
here, each with its reason.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

URL_VAR = "TAKEBACK_TEST_PG"

#: tests that check the folder store's own files, and why they do not apply to a database
FOLDER_ONLY = {
    "test_store_is_private": "checks the store folder's file modes",
    "test_store_inside_the_workspace_is_never_scanned": "puts a store folder in the workspace",
    "test_a_damaged_object_refuses_the_rewind_and_writes_nothing": "damages objects.db",
    "test_a_store_for_another_root_is_refused": "a #key names a workspace whatever its root",
    "test_json_of_turn_begin_touch_and_end": "reads events.jsonl (events are rows there)",
    "test_events_reach_callbacks_and_the_log": "reads events.jsonl (events are rows there)",
    "test_failed_snapshots_never_stop_the_agent": "breaks the lock file",
    "test_failed_baseline_never_stops_the_agent": "breaks the lock file",
    # These start their own processes with the folder's path in TAKEBACK_STORE;
    # tests/test_postgres_servers.py runs processes at once on a database.
    "test_several_processes_share_one_store": "its processes are given the folder store",
    "test_two_undos_at_once_take_back_two_turns": "its processes are given the folder store",
    # gc's suites (tests/test_postgres_gc.py checks fsck on a database's rows)
    "test_fsck_finds_each_kind_of_damage": "damages objects.db and meta.db with SQLite",
    "test_a_store_that_does_not_say_when_it_was_made_starts_the_clock": (
        "edits the store folder's store.json"
    ),
}


def _spec(url: str, store: str | os.PathLike[str] | None) -> str | None:
    if store is None:
        return None
    path = os.fspath(store)
    return path if path.startswith("postgres") else f"{url}#{os.path.realpath(path)}"


def pytest_configure(config: pytest.Config) -> None:
    url = os.environ.get(URL_VAR)
    if not url:
        return
    import takeback
    import takeback.workspace

    from . import conftest

    original_init = takeback.workspace.Workspace.__init__

    def init(self: Any, root: Any, *, store: Any = None, **kwargs: Any) -> None:
        original_init(self, root, store=_spec(url, store), **kwargs)

    takeback.workspace.Workspace.__init__ = init  # type: ignore[method-assign]
    original_call = conftest.CLI.__call__

    def call(self: Any, *args: str, env: dict[str, str] | None = None, **kw: Any) -> Any:
        spec = str(_spec(url, self.store))
        return original_call(self, *args, env={**(env or {}), "TAKEBACK_STORE": spec}, **kw)

    conftest.CLI.__call__ = call  # type: ignore[method-assign]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get(URL_VAR):
        return
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "tb_env"):
            _patch_tb_env(module, os.environ[URL_VAR])
        why = FOLDER_ONLY.get(item.name.partition("[")[0])
        if why:
            item.add_marker(pytest.mark.skip(reason=f"folder store only: {why}"))


def _patch_tb_env(module: Any, url: str) -> None:
    """Make a test module's own environment helper name the database too."""
    if getattr(module.tb_env, "_pg", False):
        return
    original = module.tb_env

    def tb_env(tb: Any) -> dict[str, str]:
        return {**original(tb), "TAKEBACK_STORE": str(_spec(url, tb.store))}

    tb_env._pg = True  # type: ignore[attr-defined]
    module.tb_env = tb_env
