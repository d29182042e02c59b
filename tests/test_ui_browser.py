"""``takeback ui`` in a real browser: the system's headless Chromium, driven by Playwright.

A session of three turns is recorded through the library; the real ``takeback ui``
serves it; the page shows the timeline and a turn's diff, undoes a turn by clicking
(the folder ends exactly as ``takeback undo`` leaves a twin folder), refuses a conflict,
and shows a turn recorded while it is open without being reloaded. A screenshot of each
stage is kept in ``test-artifacts/ui/`` (git-ignored) to be looked at.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from takeback import Workspace
from takeback.integrations._ui_api import UiConfig
from takeback.integrations._ui_server import UiServer

from ._ui import APP_1, README_0, README_1, TEST_1, record_three_turns, serve_ui
from .conftest import CLI, files_state, write

pytestmark = pytest.mark.slow

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "ui"


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = chromium()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs it")
        pytest.skip("no system chromium (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 820}, color_scheme="light")
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(8000)
    try:
        yield pg
    finally:
        ctx.close()
    assert errors == [], errors


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_timeline_diff_undo_conflict_and_live_update(
    page: Page, tmp_path: Path, ws_dir: Path, store_dir: Path
) -> None:
    record_three_turns(ws_dir, store_dir)
    twin, twin_store = tmp_path / "twin", tmp_path / "twin-store"
    twin.mkdir()
    record_three_turns(twin, twin_store)
    assert files_state(twin) == files_state(ws_dir)

    with serve_ui(ws_dir, store_dir) as ui:
        page.goto(ui.url)
        page.evaluate("window.samePage = true")  # gone if the page were ever reloaded

        # The timeline: three turns, newest first, with their counts and steps.
        turns = page.locator(".entry.turn")
        expect(turns).to_have_count(3)
        expect(turns.nth(0)).to_contain_text("Turn 3")
        expect(turns.nth(0)).to_contain_text("Document how to run it")
        expect(turns.nth(0)).to_contain_text("1 file changed +5 -1")
        expect(turns.nth(1)).to_contain_text("2 files changed +7 -0")
        expect(turns.nth(1).locator(".step .cmd")).to_have_text("$ ruff format src tests")
        expect(turns.nth(2)).to_contain_text("Add a greeting function")
        # The newest turn is opened: its diff.
        expect(page.locator("#detail h1")).to_have_text("Turn 3")
        readme = page.locator('.file[data-path="README.md"]')
        expect(readme.locator("td.code.del")).to_have_text(["A small app."])
        expect(readme.locator("td.code.add").first).to_have_text("A small app that greets.")
        shot(page, "01-timeline")

        # A turn's diff, side by side: the file a step created, the one a command changed.
        page.locator('[data-turn="2"]').click()
        expect(page.locator("#detail h1")).to_have_text("Turn 2")
        page.locator('[data-view="split"]').click()
        created = page.locator('.file[data-path="tests/test_app.py"]')
        expect(created.locator("table.diff.split")).to_be_visible()
        expect(created.locator("td.code.add")).to_have_count(5)
        expect(created.locator("td.code.add").nth(3)).to_have_text("def test_greet():")
        expect(page.locator('.file[data-path="src/app.py"] td.code.add').last).to_have_text(
            "# formatted"
        )
        shot(page, "02-diff-side-by-side")
        page.locator('[data-view="unified"]').click()

        # Undo turn 3 by clicking: the plan first, nothing written until confirmed.
        page.locator('[data-turn="3"]').click()
        expect(page.locator("#detail h1")).to_have_text("Turn 3")
        page.locator('[data-action="undo-turn"]').click()
        expect(page.locator("#plan-summary")).to_have_text(
            "Would undo turn 3 of session 'agent'. Files it would restore: 1."
        )
        expect(page.locator("#plan-list")).to_contain_text("README.md")
        shot(page, "03-undo-plan")
        assert (ws_dir / "README.md").read_text() == README_1
        page.locator("#plan-confirm").click()
        expect(page.locator("#apply-result")).to_contain_text("Undid turn 3 of session 'agent'.")
        expect(page.locator("#takeback-id")).to_have_text(
            _last_pre(ws_dir, store_dir, "pre-undo")[:10]
        )
        shot(page, "04-undo-done")
        page.locator("#plan-cancel").click()
        # Exactly what `takeback undo` does to the twin.
        CLI(twin, twin_store)("undo", "--session", "agent")
        assert files_state(ws_dir) == files_state(twin)
        assert (ws_dir / "README.md").read_text() == README_0
        expect(page.locator('[data-turn="3"] .badge')).to_have_text("undone")
        expect(page.locator('.entry.takeback[data-op="undo"]')).to_have_count(1)

        # A person's edit since turn 2: the plan names it and why, and will not write.
        write(ws_dir, "tests/test_app.py", TEST_1 + "# mine\n")
        page.locator('[data-turn="2"]').click()
        expect(page.locator("#detail h1")).to_have_text("Turn 2")
        page.locator('[data-action="undo-turn"]').click()
        expect(page.locator("#plan-conflicts")).to_contain_text(
            "tests/test_app.py changed after turn 2"
        )
        expect(page.locator("#plan-confirm")).to_be_disabled()
        shot(page, "05-conflict-planned")
        page.locator("#plan-cancel").click()
        # An edit that lands between the plan and the click: the plan confirmed is out of
        # date, so the library refuses it (nothing written) and the page shows the plan
        # as it is now, with the conflict (SPEC, "Take-backs do what they showed").
        write(ws_dir, "tests/test_app.py", TEST_1)
        page.locator('[data-action="undo-turn"]').click()
        expect(page.locator("#plan-conflicts")).to_have_count(0)
        expect(page.locator("#plan-confirm")).to_be_enabled()
        write(ws_dir, "src/app.py", "# a person's rewrite\n")
        before = files_state(ws_dir)
        page.locator("#plan-confirm").click()
        expect(page.locator("#plan-stale")).to_contain_text("out of date")
        expect(page.locator("#plan-stale")).to_contain_text("nothing was written")
        expect(page.locator("#plan-conflicts")).to_contain_text("src/app.py changed after turn 2")
        expect(page.locator("#plan-confirm")).to_be_disabled()
        shot(page, "06-conflict-refused")
        page.locator("#plan-cancel").click()
        assert files_state(ws_dir) == before
        expect(page.locator('[data-turn="2"] .badge')).to_have_text("done")
        # The refused undo is no entry of the timeline: only the undo that was done.
        expect(page.locator(".entry.takeback")).to_have_count(1)
        expect(page.locator(".entry.takeback")).to_contain_text("took back turn 3 · 1 path")

        # Any two points: the session's start and the files now; a file's whole text.
        page.locator("#compare-open").click()
        page.locator("#compare-to").select_option("")
        expect(page.locator("#detail .file")).to_have_count(2)
        expect(page.locator("#detail .sub")).to_contain_text("2 files changed +6 -6")
        page.locator('.file[data-path="src/app.py"] button', has_text="before").click()
        expect(page.locator("#file-body td.code").first).to_have_text("def main():")
        expect(page.locator("#file-body td.code")).to_have_count(6)
        shot(page, "07-compare-and-file")
        page.locator("#file-close").click()

        # A turn recorded while the page is open shows up by itself.
        with Workspace(ws_dir, store=store_dir) as ws, ws.session("agent").turn("Add a CLI") as t:
            with t.step() as st:
                st.touch("cli.py")
                write(ws_dir, "cli.py", "import sys\n")
        new = page.locator('[data-turn="4"]')
        expect(new).to_contain_text("Add a CLI", timeout=5000)
        expect(new).to_contain_text("1 file changed +1 -0")
        expect(page.locator(".entry.turn").first).to_contain_text("Turn 4")
        assert page.evaluate("window.samePage") is True
        expect(page.locator("#live")).to_have_class("live on")
        shot(page, "08-live-update")

        # The same page in a browser that prefers dark colours.
        dark = page.context.browser
        assert dark is not None
        ctx = dark.new_context(viewport={"width": 1280, "height": 820}, color_scheme="dark")
        try:
            night = ctx.new_page()
            night.goto(ui.url)
            expect(night.locator(".entry.turn")).to_have_count(4)
            expect(night.locator("#detail h1")).to_have_text("Turn 4")
            background = night.evaluate("getComputedStyle(document.body).backgroundColor")
            assert background == "rgb(22, 23, 27)"
            shot(night, "09-dark")
        finally:
            ctx.close()


def _last_pre(root: Path, store: Path, kind: str) -> str:
    with Workspace(root, store=store) as ws:
        return next(i.id for i in ws.log() if i.kind == kind)


def test_a_page_opened_before_anything_is_recorded_shows_the_first_turn(
    page: Page, ws_dir: Path, store_dir: Path
) -> None:
    server = UiServer(UiConfig(root=str(ws_dir), store=str(store_dir)))
    server.start()
    try:
        page.goto(server.url)
        expect(page.locator("#timeline")).to_have_text("Nothing recorded in this folder yet.")
        page.locator("#compare-open").click()  # nothing to compare: nothing happens
        assert not store_dir.exists()
        record_three_turns(ws_dir, store_dir)
        expect(page.locator(".entry.turn")).to_have_count(3, timeout=5000)
        expect(page.locator("#session")).to_have_value("agent")
    finally:
        server.stop()


def test_a_page_that_saw_a_store_with_no_session_yet_follows_the_first_one(
    page: Page, ws_dir: Path, store_dir: Path
) -> None:
    """The page looked while the store was made but before its session was: it must not
    hold on to the default session the server answered with then (it showed "Session
    started" and no turn, for good)."""
    with Workspace(ws_dir, store=store_dir) as ws:
        ws.open_store(create=True)  # a store, and no session in it yet
    server = UiServer(UiConfig(root=str(ws_dir), store=str(store_dir)))
    server.start()
    try:
        page.goto(server.url)
        expect(page.locator(".entry.turn")).to_have_count(0)
        record_three_turns(ws_dir, store_dir)
        expect(page.locator(".entry.turn")).to_have_count(3, timeout=5000)
        expect(page.locator("#session")).to_have_value("agent")
    finally:
        server.stop()


def test_a_conflict_taken_back_by_merge_and_one_that_cannot_merge(
    page: Page, tmp_path: Path, ws_dir: Path, store_dir: Path
) -> None:
    """A person's edit on other lines: the plan offers merge, shows the merged file and
    the diff the merge writes, and confirming leaves what ``takeback undo --merge`` leaves
    a twin. An edit on the turn's own lines: the regions, by line, and nothing written."""
    twin, twin_store = tmp_path / "twin", tmp_path / "twin-store"
    twin.mkdir()
    for root, store in ((ws_dir, store_dir), (twin, twin_store)):
        record_three_turns(root, store)
        # Turn 3 changed line 3 of the README and added lines 4-7; this is line 1.
        write(root, "README.md", README_1.replace("# Demo\n", "# Demo (edited by hand)\n"))
    twin_cli = CLI(twin, twin_store)

    with serve_ui(ws_dir, store_dir) as ui:
        page.goto(ui.url)
        page.locator('[data-turn="3"]').click()
        expect(page.locator("#detail h1")).to_have_text("Turn 3")
        page.locator('[data-action="undo-turn"]').click()
        expect(page.locator("#plan-conflicts")).to_contain_text("README.md changed after turn 3")
        expect(page.locator("#plan-confirm")).to_be_disabled()
        expect(page.locator("#merge-label")).to_have_text("Merge (keep both sides' edits)")
        expect(page.locator("#force-label")).to_be_visible()
        shot(page, "10-merge-offered")

        page.locator("#merge").check()
        expect(page.locator("#plan-summary")).to_have_text(
            "Would undo turn 3 of session 'agent'. Files it would restore: 1. Merged: 1."
        )
        expect(page.locator("#plan-conflicts")).to_have_count(0)
        expect(page.locator("#plan-merged li")).to_have_text(["README.md"])
        preview = page.locator('#plan-preview .file[data-path="README.md"]')
        expect(preview.locator("td.code.del")).to_have_text(
            ["A small app that greets.", "", "## Usage", "", "    python -m src.app"]
        )
        expect(preview.locator("td.code.add")).to_have_text(["A small app."])
        expect(preview.locator("td.code").first).to_have_text("# Demo (edited by hand)")
        expect(page.locator("#plan-confirm")).to_be_enabled()
        expect(page.locator("#plan-confirm")).to_have_text("Confirm the merge")
        assert not page.locator("#force").is_checked()
        shot(page, "11-merge-planned")
        # The preview is the library's own: what `--dry-run --merge --json` prints.
        planned = json.loads(twin_cli("undo", "--merge", "--dry-run", "--json").stdout)
        assert planned["merged"] == ["README.md"]
        assert (ws_dir / "README.md").read_text() != README_0

        page.locator("#plan-confirm").click()
        expect(page.locator("#apply-result")).to_contain_text("Undid turn 3 of session 'agent'.")
        expect(page.locator("#apply-result")).to_contain_text("Merged: 1.")
        expect(page.locator("#plan-body .why")).to_have_text(["merged: edits made since kept"])
        shot(page, "12-merge-done")
        page.locator("#plan-cancel").click()
        twin_cli("undo", "--merge")
        assert files_state(ws_dir) == files_state(twin)
        assert (ws_dir / "README.md").read_text() == "# Demo (edited by hand)\n\nA small app.\n"
        expect(page.locator('[data-turn="3"] .badge')).to_have_text("undone")

        # Both changed the same lines: the merge plan names the regions; nothing written.
        for root in (ws_dir, twin):
            write(root, "src/app.py", APP_1 + "\n# formatted by hand\n")
        before = files_state(ws_dir)
        pre_undos = _count(ws_dir, store_dir, "pre-undo")
        page.locator('[data-turn="2"]').click()
        expect(page.locator("#detail h1")).to_have_text("Turn 2")
        page.locator('[data-action="undo-turn"]').click()
        expect(page.locator("#plan-conflicts")).to_contain_text("src/app.py changed after turn 2")
        page.locator("#merge").check()
        refused = json.loads(
            twin_cli("undo", "--turn", "2", "--merge", "--dry-run", "--json", check=3).stdout
        )
        why = refused["why"]["src/app.py"]
        assert "both changed" in why
        conflicts = page.locator("#plan-conflicts")
        expect(conflicts).to_contain_text("These cannot be merged, so nothing will be written")
        expect(conflicts.locator("li").first).to_contain_text(why)
        rows = conflicts.locator('table.regions[data-path="src/app.py"] tbody tr')
        expect(rows).to_have_count(len(refused["regions"]["src/app.py"]))
        first = refused["regions"]["src/app.py"][0]
        expect(rows.first.locator("td")).to_have_text(
            ["1", _span(first["now"]), _span(first["record"]), _span(first["target"])]
        )
        expect(page.locator("#plan-merged")).to_have_count(0)
        expect(page.locator("#plan-preview")).to_have_count(0)
        expect(page.locator("#plan-confirm")).to_be_disabled()
        shot(page, "13-merge-regions")
        page.locator("#plan-cancel").click()
        assert files_state(ws_dir) == before
        assert _count(ws_dir, store_dir, "pre-undo") == pre_undos
        expect(page.locator('[data-turn="2"] .badge')).to_have_text("done")


def _span(r: list[int]) -> str:
    if r[1] < r[0]:
        return f"none (after line {r[1]})"
    return f"line {r[0]}" if r[0] == r[1] else f"lines {r[0]}\u2013{r[1]}"


def _count(root: Path, store: Path, kind: str) -> int:
    with Workspace(root, store=store) as ws:
        return sum(1 for i in ws.log() if i.kind == kind)


def test_a_hunk_of_a_turn_taken_back_from_its_own_control(
    page: Page, ws_dir: Path, store_dir: Path
) -> None:
    record_three_turns(ws_dir, store_dir)
    with serve_ui(ws_dir, store_dir) as ui:
        page.goto(ui.url)
        page.locator('[data-turn="3"]').click()
        expect(page.locator("#detail h1")).to_have_text("Turn 3")
        readme = page.locator('.file[data-path="README.md"]')
        control = readme.locator('[data-action="undo-hunk"]')
        expect(control).to_have_count(1)  # README.md's one hunk in turn 3
        control.first.click()
        expect(page.locator("#plan-summary")).to_contain_text("Would take back hunks of turn 3")
        assert (ws_dir / "README.md").read_text() == README_1  # the plan writes nothing
        shot(page, "hunk-plan")
        page.locator("#plan-confirm").click()
        expect(page.locator("#apply-result")).to_contain_text("Took back hunks of turn 3")
    assert (ws_dir / "README.md").read_text() == README_0


def test_a_plan_on_the_page_says_what_will_happen_in_the_command_lines_words(
    page: Page, ws_dir: Path, store_dir: Path
) -> None:
    """``D`` rows sit under "Would recreate", as ``undo --dry-run`` prints them."""
    write(ws_dir, "examples/naval/README", "ships\n")
    write(ws_dir, "app.py", "v1\n")
    with Workspace(ws_dir, store=store_dir) as ws:
        s = ws.session("agent")
        s.start()
        with s.turn("Remove the naval example.") as t, t.command("rm -r examples/naval"):
            shutil.rmtree(ws_dir / "examples" / "naval")
            write(ws_dir, "app.py", "v2\n")
    with serve_ui(ws_dir, store_dir) as ui:
        page.goto(ui.url)
        page.locator('[data-turn="1"]').click()
        page.locator('[data-action="undo-turn"]').click()
        rows = page.locator("#plan-list li")
        expect(rows).to_have_text(
            [
                "Would restore",
                "Mapp.pychanged since",
                "Would recreate",
                "Dexamples/naval/deleted since",
                "Dexamples/naval/READMEdeleted since",
            ]
        )
        shot(page, "10-plan-in-words")
        page.locator("#plan-cancel").click()
        # A rewind's plan, the same words.
        page.locator('[data-action="rewind-turn"]').click()
        expect(page.locator("#plan-list li.plan-head")).to_have_text(
            ["Would restore", "Would recreate"]
        )
        page.locator("#plan-cancel").click()
        assert (ws_dir / "app.py").read_text() == "v2\n"  # plans write nothing
