"""Output that tells the truth: small untruths a new user met, each through the real command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CLI, SRC


def test_diff_stat_speaks_as_git_does(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    tb("snapshot")
    assert tb("diff", "--stat").stdout == ""  # nothing changed: nothing printed, as git
    (ws_dir / "a.txt").write_text("two\n")
    last = tb("diff", "--stat").stdout.splitlines()[-1]
    assert last == " 1 file changed, 1 insertion(+), 1 deletion(-)"
    (ws_dir / "b.txt").write_text("x\ny\n")
    last = tb("diff", "--stat").stdout.splitlines()[-1]
    assert last == " 2 files changed, 3 insertions(+), 1 deletion(-)"


def test_keep_days_must_be_a_finite_number(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    tb("snapshot")
    for bad in ("inf", "nan", "-1", "soon"):
        got = tb("config", "--keep-days", bad, check=2)
        assert got.stderr.startswith("takeback: error:") and got.stderr.count("\n") == 1
    tb("config", "--keep-days", "7.5")
    doc = json.loads(tb("config", "--json").stdout)  # strict JSON
    assert doc["keep_days"] == 7.5


def test_a_session_name_that_is_not_text_is_one_line(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    tb("snapshot")
    env = dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)
    for args in (["log"], ["snapshot"], ["turn", "begin"], ["undo"]):
        got = subprocess.run(
            [
                sys.executable,
                "-m",
                "takeback",
                *args,
                "--session",
                b"\xff\xfe".decode("utf-8", "surrogateescape"),
            ],
            cwd=ws_dir,
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert got.returncode == 2, got.stderr
        assert got.stderr.count(b"\n") == 1 and b"must be text" in got.stderr


def test_status_json_has_the_line_counts(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    tb("snapshot")
    (ws_dir / "a.txt").write_text("one\ntwo\nthree\n")
    doc = json.loads(tb("status", "--json").stdout)
    assert doc["changes"] == [{"path": "a.txt", "status": "M", "added": 2, "removed": 0}]


@pytest.mark.quick
def test_every_error_starts_the_same_way(tb: CLI) -> None:
    for args in (("config", "--bogus"), ("bogus",), ("undo", "--turn", "x"), ("rewind",)):
        got = tb(*args, check=2)
        assert got.stderr.startswith("takeback: error: "), got.stderr


def test_run_says_what_it_recorded_and_its_json_can_be_piped(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    made = tb("run", "--", sys.executable, "-c", "print('hi'); open('b.txt', 'w').write('b')")
    assert made.stdout == "hi\n"
    assert made.stderr.endswith(
        "takeback: turn 1 of session 'default': 1 file changed (takeback undo takes it back)\n"
    )
    got = tb("run", "--json", "--", sys.executable, "-c", "print('to stderr'); open('c', 'w')")
    doc = json.loads(got.stdout)  # exactly one document
    assert doc["session"] == "default" and doc["turn"] == 2 and doc["exit_code"] == 0
    assert [c["path"] for c in doc["changes"]] == ["c"]
    assert "to stderr" in got.stderr
    quiet = tb("run", "--", "true")
    assert "turn 3 of session 'default': no file changed" in quiet.stderr


def test_a_persons_run_never_joins_an_agents_conversation(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    hook = {"session_id": "claude-1", "cwd": str(ws_dir)}

    def call(**p: object) -> None:
        tb("hook", "claude-code", input=json.dumps({**hook, **p}).encode())

    call(hook_event_name="UserPromptSubmit", prompt="edit a")
    call(
        hook_event_name="PreToolUse",
        tool_name="Write",
        tool_use_id="w1",
        tool_input={"file_path": str(ws_dir / "a.txt")},
    )
    (ws_dir / "a.txt").write_text("the agent's\n")
    call(
        hook_event_name="PostToolUse",
        tool_name="Write",
        tool_use_id="w1",
        tool_input={"file_path": str(ws_dir / "a.txt")},
    )
    call(hook_event_name="Stop")
    mine = tb("run", "--", sys.executable, "-c", "open('mine.txt', 'w').write('mine')")
    assert "of session 'default'" in mine.stderr
    log = json.loads(tb("log", "--all", "--json").stdout)
    assert {e["session"] for e in log if e["kind"] in ("step", "step-after")} == {"default"}
    assert json.loads(tb("changes", "--session", "claude-1", "--json").stdout)["turn"] == 1


def test_log_is_one_line_a_step_with_short_sessions_and_failures(tb: CLI, ws_dir: Path) -> None:
    (ws_dir / "a.txt").write_text("one\n")
    uuid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    tb("run", "--session", uuid, "-m", "make b", "--", sys.executable, "-c", "open('b', 'w')")
    tb("run", "--session", uuid, "-m", "fails", "--", "sh", "-c", "exit 4", check=4)
    tb("undo", "--session", uuid, "--file", "b")
    lines = tb("log", "--session", uuid).stdout.splitlines()
    steps = [ln for ln in lines if "step " in ln]
    assert len(steps) == 2  # one line a step, not its two snapshots
    assert all("0f1e2d3c " in ln and uuid not in ln for ln in lines)
    assert "exit 4" in steps[0] and "fails" in steps[0] and "exit" not in steps[1]
    assert any(ln.rstrip().endswith("before undo file") for ln in lines)
    assert not any("turn(s)" in ln for ln in lines)


def test_help_is_grouped_true_and_says_something_of_every_option() -> None:
    import argparse

    from takeback.cli._app import GROUPS, build_parser

    parser = build_parser()
    text = parser.format_help()
    for title, _names in GROUPS:
        assert f"\n{title}:\n" in text
    assert "(default: .)" not in text and "or 'default')" not in text
    assert text.count("--max-file-bytes N  ") == 1
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, sp in sub.choices.items():
        own = sp.format_help()
        assert "--root" not in own, name  # the options every command takes: once, above
        for action in sp._actions:
            if action.help is None and action.dest not in ("help",):
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []
    assert "-- PATH" in sub.choices["diff"].format_usage()


@pytest.mark.parametrize("columns", ["50", "132", None])
def test_help_fits_the_terminal_as_argparse_itself_would_fit_it(
    columns: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parser finds the width without shutil (which loads bz2 and lzma): the help
    # must still be what argparse's own formatter makes, wrapped alike.
    import argparse

    from takeback.cli._app import build_parser

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    for only in (None, "snapshot", "undo"):
        parser = build_parser(only)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for p in (parser, *sub.choices.values()):
            ours = p.format_help()
            p.formatter_class = argparse.RawDescriptionHelpFormatter
            assert ours == p.format_help(), (columns, only, p.prog)


def test_files_over_the_limit_are_named_when_that_changes_with_how_to_keep_them(
    tb: CLI, ws_dir: Path
) -> None:
    (ws_dir / "big.bin").write_bytes(b"x" * 5000)
    first = tb("snapshot", "--max-file-bytes", "1000")
    assert "1 file(s) over the size limit not kept: big.bin" in first.stderr
    assert "--max-file-bytes N" in first.stderr
    again = tb("snapshot", "--max-file-bytes", "1000")
    assert "over the size limit" not in again.stderr  # said already, nothing new
    (ws_dir / "bigger.bin").write_bytes(b"y" * 5000)
    third = tb("snapshot", "--max-file-bytes", "1000")
    assert "2 file(s) over the size limit not kept: big.bin, bigger.bin" in third.stderr


def test_without_the_mcp_extra_the_server_says_which_extra_in_one_line(
    tb: CLI, ws_dir: Path
) -> None:
    script = (
        "import sys; sys.modules['mcp'] = None; from takeback.cli import main; "
        "sys.exit(main(['mcp']))"
    )
    env = dict(os.environ, TAKEBACK_STORE=str(tb.store), PYTHONPATH=SRC)
    got = subprocess.run(
        [sys.executable, "-c", script], cwd=ws_dir, env=env, capture_output=True, timeout=60
    )
    assert got.returncode == 2
    assert got.stderr == (
        b"takeback: error: the MCP server needs the mcp extra, which is not installed: "
        b"pip install 'takeback[mcp]'\n"
    )
