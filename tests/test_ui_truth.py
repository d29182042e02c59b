"""What the page behind ``takeback ui`` shows is what a person needs to read, and only that.

Each was seen on the page: the session picker showed a conversation's raw 36-character
id, a rewind's entry said "rewound to f4628da546" instead of naming the step, the Redo
and Unrevert buttons were enabled with nothing to redo or unrevert, and ``takeback ui``
gave the browser the page's token on its command line (readable by any user with
``ps``). The page's own questions are asked of the real server (its JSON), and what a
person sees is checked in the system's Chromium.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from takeback import Workspace
from takeback.integrations._ui_api import UiApi, UiConfig
from takeback.integrations._ui_server import UiServer

from ._ui import record_three_turns, serve_ui
from .conftest import SRC, write
from .test_ui_browser import browser, page  # noqa: F401 (the browser fixtures)

CONVERSATION = "5f0c3b1e-93a2-4c7e-b0d4-2f51e6a8c9d0"


def recorded(ws_dir: Path, store_dir: Path) -> None:
    """An agent's conversation of three turns, and a person's own command in ``default``."""
    record_three_turns(ws_dir, store_dir, session=CONVERSATION)
    with Workspace(ws_dir, store=store_dir) as ws:
        ws.mark_agent(CONVERSATION, "claude-code")
        mine = ws.session("default")
        with mine.turn(label="make notes") as t, t.command("touch notes.txt"):
            write(ws_dir, "notes.txt", "mine\n")


def test_sessions_are_listed_by_what_a_person_knows_of_them(ws_dir: Path, store_dir: Path) -> None:
    recorded(ws_dir, store_dir)
    tl = UiApi(UiConfig(root=str(ws_dir), store=str(store_dir))).timeline(CONVERSATION)
    by_name = {s["name"]: s for s in tl["sessions"]}
    assert set(by_name) == {CONVERSATION, "default"}
    assert by_name[CONVERSATION]["label"] == "claude-code 5f0c3b1e"
    assert by_name["default"]["label"] == "default (commands run by hand)"


def test_a_rewind_is_named_by_the_point_it_went_back_to(ws_dir: Path, store_dir: Path) -> None:
    recorded(ws_dir, store_dir)
    api = UiApi(UiConfig(root=str(ws_dir), store=str(store_dir)))
    with Workspace(ws_dir, store=store_dir) as ws:
        ws.rewind("turn:2", session=CONVERSATION)
        steps = ws.session(CONVERSATION).steps()
        ws.rewind(str(steps[-1].n), session=CONVERSATION)
        ws.rewind("start", session=CONVERSATION)
    rewinds = [e for e in api.timeline(CONVERSATION)["takebacks"] if e["op"] == "rewind"]
    assert [e["message"] for e in rewinds] == [
        "rewound to before turn 2",
        f"rewound to before step {steps[-1].n}",
        "rewound to the session's start",
    ]


def test_redo_and_unrevert_are_offered_only_when_there_is_one(
    ws_dir: Path, store_dir: Path
) -> None:
    recorded(ws_dir, store_dir)
    api = UiApi(UiConfig(root=str(ws_dir), store=str(store_dir)))
    tl = api.timeline(CONVERSATION)
    assert (tl["can_redo"], tl["can_unrevert"]) == (False, False)
    with Workspace(ws_dir, store=store_dir) as ws:
        ws.session(CONVERSATION).undo()
    tl = api.timeline(CONVERSATION)
    assert (tl["can_redo"], tl["can_unrevert"]) == (True, False)
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session(CONVERSATION)
        s.redo()
        s.revert(to_turn=1)
    tl = api.timeline(CONVERSATION)
    assert (tl["can_redo"], tl["can_unrevert"]) == (False, True)
    # Another session's undo is not this session's to redo.
    assert api.timeline("default")["can_redo"] is False


def test_the_page_names_sessions_and_rewinds_and_offers_only_what_can_be_done(
    page: Page,  # noqa: F811 (the fixture)
    ws_dir: Path,
    store_dir: Path,
) -> None:
    recorded(ws_dir, store_dir)
    with Workspace(ws_dir, store=store_dir) as ws:
        ws.rewind("turn:3", session=CONVERSATION)
    server = UiServer(UiConfig(root=str(ws_dir), store=str(store_dir), session=CONVERSATION))
    server.start()
    try:
        page.goto(server.url)
        options = page.locator("#session option")
        expect(options).to_have_count(2)
        texts = options.all_text_contents()
        assert not any(CONVERSATION in t for t in texts), texts
        assert any(t.startswith("claude-code 5f0c3b1e") for t in texts), texts
        assert any(t.startswith("default") for t in texts), texts
        expect(page.locator(".entry.takeback")).to_contain_text("rewound to before turn 3")
        expect(page.locator("#redo")).to_be_disabled()
        expect(page.locator("#unrevert")).to_be_disabled()
        with Workspace(ws_dir, store=store_dir) as ws:
            ws.session(CONVERSATION).undo(turn=2, force=True)
        expect(page.locator("#redo")).to_be_enabled(timeout=5000)
        expect(page.locator("#unrevert")).to_be_disabled()
    finally:
        server.stop()


@pytest.fixture
def fake_browser(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A "browser" that writes down what it was given, and the environment that names it."""
    seen = tmp_path / "browser-argv.json"
    script = tmp_path / "browser.py"
    script.write_text(
        "import json, os, sys\n"
        "target = sys.argv[1]\n"
        "path = target[len('file://'):] if target.startswith('file://') else target\n"
        "doc = {'argv': sys.argv[1:]}\n"
        "if os.path.isfile(path):\n"
        "    doc['mode'] = os.stat(path).st_mode & 0o777\n"
        "    doc['text'] = open(path).read()\n"
        # Written aside and renamed: the test reads it the moment its name appears.
        f"open({str(seen) + '.tmp'!r}, 'w').write(json.dumps(doc))\n"
        f"os.rename({str(seen) + '.tmp'!r}, {str(seen)!r})\n"
    )
    env = dict(
        os.environ,
        BROWSER=f"{sys.executable} {script} %s",
        TMPDIR=str(tmp_path / "tmp"),
        PYTHONPATH=SRC,
    )
    (tmp_path / "tmp").mkdir()
    yield seen, env


def test_the_browser_is_given_a_private_file_never_the_token(
    fake_browser: tuple[Path, dict[str, str]], ws_dir: Path, store_dir: Path, tmp_path: Path
) -> None:
    seen, env = fake_browser
    recorded(ws_dir, store_dir)
    with serve_ui(ws_dir, store_dir, env=env) as served:
        deadline = time.monotonic() + 10
        while not seen.exists() and served.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        doc = json.loads(seen.read_text())
    token = served.token
    assert token not in " ".join(doc["argv"]), doc["argv"]
    assert doc["mode"] == 0o600, oct(doc["mode"])
    assert f"token={token}" in doc["text"]
    assert "127.0.0.1" in doc["text"]
    # The file goes with the server.
    opened = doc["argv"][0].removeprefix("file://")
    assert not os.path.exists(opened), opened
    assert list((tmp_path / "tmp").iterdir()) == []
