"""Benchmark: one reply through each agent's hooks, against the same reply through Claude Code's.

On a generated tree of ``_tree.py`` (default 10,000 files), every round plays the same
reply through each agent's real ``takeback hook AGENT`` process, fed that agent's
documented payload: the prompt, a file tool's before-event, a shell command's before-
and after-event (10 files rewritten between them) and the end of the reply, each agent
in its own session. The agents take turns in an order that rotates every round, so a
drift of the machine falls on all of them alike. The whole is run twice: without the
watching service (``TAKEBACK_SERVICE=0``: every snapshot a walk of stats) and with it.

For each kind of call it prints the median wall clock per agent, process start-up
included, its ratio to Claude Code's in the same run, and per agent the geometric mean of
those ratios: the target is that no agent's call costs more than Claude Code's (they
share one mapping; what differs is the reading of the payload and one small module, run
with bytecode written, as an installed package is).

Run it with the project's virtualenv::

    .venv/bin/python bench/bench_agent_hooks.py                   # 10,000 files, 5 rounds
    .venv/bin/python bench/bench_agent_hooks.py --files 100000 --repeat 7 --json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _tree import (
    DEFAULT_BASE,
    bench_lock,
    ensure_tree,
    log,
    make_line_pool,
    make_text,
    median,
    restore_pristine,
    run_checked,
    takeback_exe,
)

AGENTS = ("claude-code", "codex", "gemini", "cursor", "copilot")
KINDS = ("prompt", "file", "shell_before", "shell_after", "stop")
CHANGED_FILES = 10
#: what each agent must read on stdout (anything else is a failed call)
ANSWER = {"cursor": b"{}\n"}
SETTLE_S = 1.2


def payloads(agent: str, root: str, n: int, target: str) -> list[tuple[str, dict[str, Any]]]:
    """Return one reply's calls for ``agent``: (kind, its payload), in order.

    Each payload has the documented shape of that agent's hook input (docs/agents.md).
    ``target`` is the file the file tool writes; ``n`` numbers the call ids.
    """
    sid = f"bench-{agent}"
    shell = "make build"
    if agent in ("claude-code", "codex"):
        base = {"session_id": sid, "cwd": root, "transcript_path": None}
        tool_call = {"tool_use_id": f"t{n}"}
        file_tool = (
            ("Write", {"file_path": target, "content": "x"})
            if agent == "claude-code"
            else ("apply_patch", {"command": f"*** Begin Patch\n*** Update File: {target}\n"})
        )
        return [
            ("prompt", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "bench"}),
            (
                "file",
                {
                    **base,
                    "hook_event_name": "PreToolUse",
                    "tool_name": file_tool[0],
                    "tool_input": file_tool[1],
                    "tool_use_id": f"f{n}",
                },
            ),
            (
                "shell_before",
                {
                    **base,
                    "hook_event_name": "PreToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": shell},
                    **tool_call,
                },
            ),
            (
                "shell_after",
                {
                    **base,
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": shell},
                    "tool_response": "ok",
                    **tool_call,
                },
            ),
            ("stop", {**base, "hook_event_name": "Stop", "stop_hook_active": False}),
        ]
    if agent == "gemini":
        base = {"session_id": sid, "cwd": root, "timestamp": "2026-01-01T00:00:00Z"}
        run = {"tool_name": "run_shell_command", "tool_input": {"command": shell, "n": n}}
        return [
            ("prompt", {**base, "hook_event_name": "BeforeAgent", "prompt": "bench"}),
            (
                "file",
                {
                    **base,
                    "hook_event_name": "BeforeTool",
                    "tool_name": "write_file",
                    "tool_input": {"file_path": target, "content": "x"},
                },
            ),
            ("shell_before", {**base, "hook_event_name": "BeforeTool", **run}),
            ("shell_after", {**base, "hook_event_name": "AfterTool", **run}),
            ("stop", {**base, "hook_event_name": "AfterAgent", "prompt_response": "ok"}),
        ]
    if agent == "cursor":
        base = {"conversation_id": sid, "generation_id": f"g{n}", "workspace_roots": [root]}
        run = {"tool_name": "Shell", "tool_input": {"command": shell}, "tool_use_id": f"t{n}"}
        return [
            ("prompt", {**base, "hook_event_name": "beforeSubmitPrompt", "prompt": "bench"}),
            (
                "file",
                {
                    **base,
                    "hook_event_name": "preToolUse",
                    "tool_name": "Write",
                    "tool_input": {"path": target, "contents": "x"},
                    "tool_use_id": f"f{n}",
                },
            ),
            ("shell_before", {**base, "hook_event_name": "preToolUse", **run}),
            ("shell_after", {**base, "hook_event_name": "postToolUse", **run}),
            ("stop", {**base, "hook_event_name": "stop", "status": "completed"}),
        ]
    base = {"sessionId": sid, "cwd": root, "timestamp": 1767225600000}
    run = {"toolName": "bash", "toolArgs": {"command": shell, "n": n}}
    return [
        ("prompt", {**base, "prompt": "bench"}),
        ("file", {**base, "toolName": "create", "toolArgs": {"path": target, "file_text": "x"}}),
        ("shell_before", {**base, **run}),
        ("shell_after", {**base, **run, "toolResult": {"resultType": "success"}}),
        ("stop", {**base, "stopReason": "end_turn"}),
    ]


#: Copilot's camelCase payloads name no event: its installed commands do
COPILOT_EVENTS = {
    "prompt": "userPromptSubmitted",
    "file": "preToolUse",
    "shell_before": "preToolUse",
    "shell_after": "postToolUse",
    "stop": "agentStop",
}


class Bench:
    """The tree, its store, and the timings of every call."""

    def __init__(self, tb: str, root: Path, store: Path, files: list[str]) -> None:
        self.tb = tb
        self.root = root
        self.store = store
        self.files = files
        self.rng = random.Random(7)
        self.pool = make_line_pool(seed=13)
        self.errors: list[str] = []

    def env(self, service: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAKEBACK_")}
        for var in ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", "CURSOR_PROJECT_DIR"):
            env.pop(var, None)
        env["TAKEBACK_STORE"] = str(self.store)
        if not service:
            env["TAKEBACK_SERVICE"] = "0"
        return env

    def call(self, agent: str, kind: str, payload: dict[str, Any], service: bool) -> float:
        argv = [self.tb, "hook", agent]
        if agent == "copilot":
            argv += ["--event", COPILOT_EVENTS[kind]]
        t0 = time.perf_counter()
        proc = subprocess.run(
            argv,
            input=json.dumps(payload).encode(),
            capture_output=True,
            check=False,
            env=self.env(service),
            cwd=self.root,
        )
        dt = time.perf_counter() - t0
        if proc.returncode != 0 or proc.stdout != ANSWER.get(agent, b""):
            self.errors.append(f"{agent} {kind}: exit {proc.returncode}, stdout {proc.stdout!r}")
        return dt

    def reply(
        self, agent: str, n: int, service: bool, times: dict[str, dict[str, list[float]]]
    ) -> None:
        target = str(self.root / self.rng.choice(self.files))
        for kind, payload in payloads(agent, str(self.root), n, target):
            if kind == "shell_after":
                for rel in self.rng.sample(self.files, CHANGED_FILES):
                    (self.root / rel).write_bytes(make_text(self.rng, self.pool))
                if service:
                    time.sleep(SETTLE_S)  # let the service see them, as a command's run would
            times[agent][kind].append(self.call(agent, kind, payload, service))


def run(args: argparse.Namespace) -> dict[str, Any]:
    tb = takeback_exe(args.takeback)
    tree = ensure_tree(args.base, args.files)
    work = Path(args.base) / "agent-hooks"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out: dict[str, Any] = {"files": args.files, "repeat": args.repeat, "modes": {}}
    try:
        for service in (False, True):
            mode = "service" if service else "no service"
            store = work / f"store-{'svc' if service else 'plain'}"
            b = Bench(tb, tree.root, store, tree.files)
            run_checked([tb, "snapshot", "--root", str(tree.root)], env=b.env(False))
            if service:
                run_checked(
                    [tb, "service", "start", "--root", str(tree.root), "--wait", "120"],
                    env=b.env(True),
                )
            times: dict[str, dict[str, list[float]]] = {a: {k: [] for k in KINDS} for a in AGENTS}
            try:
                for n in range(args.repeat):
                    order = AGENTS[n % len(AGENTS) :] + AGENTS[: n % len(AGENTS)]
                    log(f"{mode}: round {n + 1} of {args.repeat}")
                    for agent in order:
                        b.reply(agent, n, service, times)
            finally:
                if service:
                    subprocess.run(
                        [tb, "service", "stop", "--root", str(tree.root)],
                        env=b.env(True),
                        capture_output=True,
                        check=False,
                    )
            medians = {a: {k: median(v) for k, v in times[a].items()} for a in AGENTS}
            out["modes"][mode] = {"medians": medians, "errors": b.errors}
    finally:
        restore_pristine(tree)
        shutil.rmtree(work, ignore_errors=True)
    return out


def report(res: dict[str, Any]) -> bool:
    """Print the table; return whether every agent's call cost no more than Claude Code's."""
    ok = True
    print(f"{res['files']} files, medians of {res['repeat']} rounds (ratio to claude-code)")
    for mode, doc in res["modes"].items():
        m = doc["medians"]
        print(f"\n{mode}")
        print(f"{'call':<13}" + "".join(f"{a:>20}" for a in AGENTS))
        for kind in KINDS:
            ref = m["claude-code"][kind]
            cells = []
            for a in AGENTS:
                ratio = m[a][kind] / ref if ref else float("nan")
                cells.append(f"{m[a][kind] * 1000:8.0f} ms ({ratio:4.2f}x)")
            print(f"{kind:<13}" + "".join(f"{c:>20}" for c in cells))
        # One figure per agent: the geometric mean of its ratios over the kinds of call.
        means = []
        for a in AGENTS:
            logs = [math.log(m[a][k] / m["claude-code"][k]) for k in KINDS]
            means.append(math.exp(sum(logs) / len(logs)))
        print(f"{'geo. mean':<13}" + "".join(f"{x:>19.2f}x" for x in means))
        for e in doc["errors"]:
            print(f"error: {e}")
            ok = False
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=10_000, help="files in the tree (default 10000)")
    p.add_argument("--repeat", type=int, default=5, help="rounds (medians are over these)")
    p.add_argument("--base", default=DEFAULT_BASE, help="where trees and stores live")
    p.add_argument("--takeback", default=None, help="the takeback executable")
    p.add_argument("--json", action="store_true", help="figures as JSON on stdout")
    args = p.parse_args(argv)
    load = os.getloadavg()[0]
    with bench_lock(args.base):
        res = run(args)
    res["loadavg_1min"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    if args.json:
        print(json.dumps(res, indent=2, sort_keys=True))
    ok = report(res) if not args.json else not any(d["errors"] for d in res["modes"].values())
    print(f"load average {res['loadavg_1min'][0]} -> {res['loadavg_1min'][1]}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
