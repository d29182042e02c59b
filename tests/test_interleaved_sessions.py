"""Two Claude Code conversations in one workspace, their hook streams interleaved at random.

The acceptance test of "real agent traffic: undo takes back exactly the right reply". A
state machine plays two conversations (two ``session_id`` values) the way Claude Code
sends their hooks: a reply is ``UserPromptSubmit`` … ``Stop``; inside it, file-tool calls
(``PreToolUse`` of Write or Edit with a ``tool_use_id``, the write, ``PostToolUse``),
parallel ones (both ``PreToolUse`` calls before either write), and Bash commands that
change files (``PreToolUse``, the command's writes, then ``PostToolUse``,
``PostToolUseFailure`` or, for a failing command on an older Claude Code, nothing). A
command runs while the other conversation goes on, and while a person takes back the
other conversation's reply. Between the calls a person edits files and, after a
conversation's reply, types ``takeback --session S undo --json``.

The model is written from the README's rules ("Undo, redo, revert" and "Claude Code
hooks"), not from the code:

- a reply's change list holds each file its file tools touched or its commands changed,
  with the state before its first change and what the reply left (the file at
  ``Stop``); files that came back to where they began are dropped;
- a command's change is what differs between the snapshots before and after it, but a
  file the other conversation claimed while it ran (its file tool touched it, its
  command changed it, or its reply that touched it is still open), and but what a
  take-back wrote meanwhile;
- every hook call of a session first finishes that session's command steps still open
  (a failed call that got no ``PostToolUse``, the first of two parallel calls);
- undo takes back the session's last reply that changed something, and refuses with
  exit 3, naming the files and writing nothing, when one of them changed since, or
  was brought in by a command step whose end was never seen (unconfirmed).

The conversations mostly touch their own files, and sometimes a shared one (then the
undo of the earlier reply must refuse). A person's edit while a command runs would be
the command's (the README says so), so the person edits only between commands. Hook
calls run in-process through the hook's own entry (``claude_code._hook.run``, what
``takeback hook claude-code`` calls once it has read stdin) to keep the test fast; one
run, in the slow tier, sends every call through the real command, and a regression test
in the quick tier some. Each undo is the real command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import takeback
from takeback.integrations.claude_code._call import HookCall
from takeback.integrations.claude_code._hook import run
from takeback.integrations.claude_code._log import LOG_NAME

from .conftest import SRC, examples, files_state

#: A file's bytes, or None when it does not exist.
Content = bytes | None

A = "0b5e7c2a-91f4-4d6e-8a3b-5c7d9e1f2a40"
B = "7f3d1c9e-2b6a-4e8f-b1c5-3a9d7e2f6b81"
SESSIONS = (A, B)
OWN = {A: ["a1.txt", "a2.txt", "a3.txt"], B: ["b1.txt", "b2.txt", "b3.txt"]}
SHARED = "shared.txt"
PERSON = ["notes.md", "todo.txt"]
ALL = [*OWN[A], *OWN[B], SHARED, *PERSON]
#: present before the first reply; the others are created on the way
INITIAL = ["a1.txt", "b1.txt", SHARED, "notes.md"]

#: a conversation picks the shared file about once in ten
own_or_shared = st.integers(0, 9)
#: the person edits an agent's file about once in five
persons_pick = st.integers(0, 4)
endings = st.sampled_from(["PostToolUse", "PostToolUseFailure", "none"])


def env_of(root: Path, store: Path) -> dict[str, str]:
    return {"CLAUDE_PROJECT_DIR": str(root), "TAKEBACK_STORE": str(store)}


def send(root: Path, store: Path, payload: dict[str, Any], *, real: bool) -> None:
    """One hook call, as Claude Code makes it; it must succeed silently."""
    raw = json.dumps(payload).encode()
    if real:
        proc = subprocess.run(
            [sys.executable, "-m", "takeback", "hook", "claude-code"],
            input=raw,
            capture_output=True,
            cwd=root,
            env=dict(os.environ, PYTHONPATH=SRC, **env_of(root, store)),
            timeout=60,
        )
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    else:
        assert run(raw, HookCall(), env_of(root, store)) is not None
    log = store / LOG_NAME
    assert not log.exists(), log.read_text()


def undo_cli(root: Path, store: Path, session: str) -> subprocess.CompletedProcess[str]:
    """``takeback --root WS --store ST --session S undo --json``, as a person types it."""
    return subprocess.run(
        [sys.executable, "-m", "takeback", "--root", str(root), "--store", str(store)]
        + ["--session", session, "undo", "--json"],
        capture_output=True,
        text=True,
        cwd=root.parent,
        env=dict(os.environ, PYTHONPATH=SRC),
        timeout=60,
    )


def status(before: Content, after: Content) -> str:
    return "created" if before is None else "deleted" if after is None else "modified"


@dataclass
class Reply:
    """One reply (turn) of a conversation, as the README says it is recorded."""

    n: int
    #: each path's state before the reply first changed it, and when that state was seen
    before: dict[str, tuple[int, Content]] = field(default_factory=dict)
    #: what the reply left: each path at ``Stop``
    after: dict[str, Content] = field(default_factory=dict)
    ended: bool = False
    undone: bool = False
    #: paths a command step whose end was never seen brought in (a take-back's conflicts)
    unconfirmed: set[str] = field(default_factory=set)

    def changes(self) -> dict[str, tuple[Content, Content]]:
        """The change list: paths that came back to where they began are dropped."""
        return {p: (b, self.after[p]) for p, (_t, b) in self.before.items() if b != self.after[p]}


@dataclass
class Step:
    """A Bash call's command step: begun by ``PreToolUse``, finished later."""

    tid: str
    tool_input: dict[str, Any]
    #: the logical time of the snapshot before, and the files then
    at: int
    before: dict[str, Content]
    #: the command's writes still to come
    todo: list[tuple[str, Content]]
    #: paths the other conversation claimed while the step was open
    claimed: set[str] = field(default_factory=set)
    #: paths a take-back wrote while the step was open, and what it wrote
    taken_back: dict[str, Content] = field(default_factory=dict)
    #: the step was finished (its snapshot after was taken)
    done: bool = False


@dataclass
class Convo:
    name: str
    replies: list[Reply] = field(default_factory=list)
    #: Bash calls whose writes or whose PostToolUse are still to come
    calls: list[Step] = field(default_factory=list)
    #: command steps begun and not finished yet
    steps: list[Step] = field(default_factory=list)

    @property
    def open(self) -> Reply | None:
        if self.replies and not self.replies[-1].ended:
            return self.replies[-1]
        return None

    def open_steps(self) -> list[Step]:
        return [c for c in self.steps if not c.done]


counter = count()
stamp = count()


class Interleaved(RuleBasedStateMachine):
    base: Path
    #: send every hook call through the real ``takeback hook claude-code`` command
    real_hooks = False
    #: hook calls sent, over every example
    calls = 0

    def __init__(self) -> None:
        super().__init__()
        k = next(counter)
        self.root = self.base / f"ws{k}"
        self.root.mkdir()
        self.store = self.base / f"store{k}"
        self.disk: dict[str, Content] = dict.fromkeys(ALL)
        for p in INITIAL:
            self.put(p, f"{p} at the start\n".encode())
        self.convos = {s: Convo(s) for s in SESSIONS}
        self.tool_ids = count(1)
        self.clock = count()

    # -- the world ---------------------------------------------------------------------

    def put(self, rel: str, data: Content) -> None:
        """Write (or delete) a file on disk and in the model."""
        path = self.root / rel
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)
        self.disk[rel] = data

    def fresh(self, who: str, rel: str) -> bytes:
        """New bytes, never seen before (a write always changes the file)."""
        return f"{rel}: {who} wrote #{next(stamp)}\n".encode()

    def hook(self, convo: Convo, event: str, *, but: str | None = None, **fields: Any) -> None:
        """Send one hook call; the session's open command steps end first (README)."""
        for step in convo.open_steps():
            if step.tid != but:
                # Its end was never seen (no PostToolUse): what it changed is unconfirmed.
                self.finish(convo, step, unconfirmed=True)
        payload = {
            "session_id": convo.name,
            "transcript_path": f"/home/u/.claude/projects/ws/{convo.name}.jsonl",
            "cwd": str(self.root),
            "permission_mode": "acceptEdits",
            "hook_event_name": event,
            **fields,
        }
        send(self.root, self.store, payload, real=self.real_hooks)
        type(self).calls += 1

    def tool_id(self) -> str:
        return f"toolu_01{next(self.tool_ids):08d}"

    # -- the model's rules -------------------------------------------------------------

    def other(self, convo: Convo) -> Convo:
        return self.convos[B if convo.name == A else A]

    def claim(self, reply: Reply, rel: str, at: int, was: Content) -> None:
        """A path joins the reply; it keeps the earliest state seen before its change."""
        if rel not in reply.before or reply.before[rel][0] > at:
            reply.before[rel] = (at, was)
        for step in self.other_steps(reply):
            step.claimed.add(rel)

    def other_steps(self, reply: Reply) -> list[Step]:
        """The open command steps of the conversation the reply is not of."""
        mine = next(c for c in self.convos.values() if reply in c.replies)
        return self.other(mine).open_steps()

    def finish(self, convo: Convo, step: Step, *, unconfirmed: bool = False) -> None:
        """A command step ends: what it changed joins the reply, but what others claimed.

        ``unconfirmed``: its end was never seen; each path it brings in is unconfirmed.
        """
        reply = convo.open
        assert reply is not None and not step.done
        step.done = True
        convo.steps.remove(step)
        other = self.other(convo).open
        others = set(other.before) if other is not None else set()
        for rel in ALL:
            if step.before[rel] == self.disk[rel] or rel in step.claimed | others:
                continue
            if rel in step.taken_back:
                if self.disk[rel] == step.taken_back[rel]:
                    continue  # the take-back's write, not the command's
                self.claim(reply, rel, step.at, step.taken_back[rel])
            else:
                self.claim(reply, rel, step.at, step.before[rel])
            if unconfirmed:
                reply.unconfirmed.add(rel)

    def quiet(self) -> bool:
        """No command runs (a person's edit now would be the command's, the README says)."""
        return not any(c.calls or c.steps for c in self.convos.values())

    def crossing(self, convo: Convo) -> bool:
        """Whether a hook call of the session now would end a step across the other's.

        Its call finishes its open steps; a step of the other conversation begun after
        one of them and still open makes the two commands overlap without one holding
        the other, and which of two snapshots-apart commands wrote a file is then beyond
        what any record can tell: the generator keeps commands nested or apart.
        """
        mine = [s.at for s in convo.open_steps()]
        theirs = [s.at for s in self.other(convo).open_steps()]
        return bool(mine) and any(t > min(mine) for t in theirs)

    def may_touch(self, convo: Convo, rel: str) -> bool:
        """Whether the conversation may touch ``rel`` now.

        Both replies open on one file is outside what the README decides (each claims
        it), so the generator keeps the shared file to one open reply at a time.
        """
        other = self.other(convo)
        busy = set(other.open.before) if other.open is not None else set()
        for step in other.calls:
            busy |= {rel for rel, _c in step.todo}
        return rel not in busy

    def pick(self, convo: Convo, data: st.DataObject) -> str:
        if data.draw(own_or_shared) == 0 and self.may_touch(convo, SHARED):
            return SHARED
        return data.draw(st.sampled_from(OWN[convo.name]))

    def free(self, names: list[str]) -> list[str]:
        return [s for s in names if not self.crossing(self.convos[s])]

    def idle(self) -> list[str]:
        return self.free([s for s in SESSIONS if self.convos[s].open is None])

    def replying(self) -> list[str]:
        """Sessions that may make their next tool call: none of theirs is in flight.

        Claude Code runs a Bash call that writes alone (parallel calls are read-only
        ones), so a session's next call comes after its command's writes.
        """
        return self.free(
            [s for s in SESSIONS if self.convos[s].open is not None and not self.convos[s].calls]
        )

    # -- a conversation ----------------------------------------------------------------

    @precondition(lambda self: self.idle())
    @rule(data=st.data())
    def prompt(self, data: st.DataObject) -> None:
        convo = self.convos[data.draw(st.sampled_from(self.idle()), label="session")]
        self.hook(convo, "UserPromptSubmit", prompt=f"reply {len(convo.replies) + 1}, please")
        convo.replies.append(Reply(len(convo.replies) + 1))

    def may_stop(self) -> list[str]:
        """Sessions whose reply may end.

        Not while the other's command runs: whether what this reply's commands changed
        meanwhile is claimed once the reply has ended is not a thing the README says.
        """
        return [
            s
            for s in self.replying()
            if not self.convos[s].calls and not self.other(self.convos[s]).open_steps()
        ]

    @precondition(lambda self: self.may_stop())
    @rule(data=st.data())
    def stop(self, data: st.DataObject) -> None:
        convo = self.convos[data.draw(st.sampled_from(self.may_stop()), label="session")]
        reply = convo.open
        assert reply is not None
        self.hook(convo, "Stop", stop_hook_active=False)
        reply.after = {rel: self.disk[rel] for rel in reply.before}
        reply.ended = True
        with takeback.Workspace(self.root, store=self.store) as ws:
            listed = {c.path: c.status for c in ws.session(convo.name).changes(reply.n)}
        assert listed == {p: status(b, a) for p, (b, a) in reply.changes().items()}

    @precondition(lambda self: self.replying())
    @rule(parallel=st.booleans(), post=st.booleans(), data=st.data())
    def file_tools(self, parallel: bool, post: bool, data: st.DataObject) -> None:
        """One file-tool call, or two in parallel (both PreToolUse before the writes)."""
        s = data.draw(st.sampled_from(self.replying()), label="session")
        convo = self.convos[s]
        reply = convo.open
        assert reply is not None
        paths = [self.pick(convo, data)]
        if parallel:
            second = self.pick(convo, data)
            if second not in paths:
                paths.append(second)
        calls = []
        for rel in paths:
            tool = "Edit" if self.disk[rel] is not None and data.draw(st.booleans()) else "Write"
            new = self.fresh(s, rel)
            tool_input: dict[str, Any] = {"file_path": str(self.root / rel)}
            if tool == "Write":
                tool_input["content"] = new.decode()
            else:
                tool_input |= {"old_string": "wrote", "new_string": "wrote"}
            calls.append((tool, self.tool_id(), tool_input, rel, new))
        # Parallel calls: every PreToolUse first, then the writes; one call: one by one.
        for tool, tid, tool_input, rel, new in calls:
            self.hook(convo, "PreToolUse", tool_name=tool, tool_use_id=tid, tool_input=tool_input)
            self.claim(reply, rel, next(self.clock), self.disk[rel])
            if not parallel:
                self.put(rel, new)
        for tool, tid, tool_input, rel, new in calls:
            if parallel:
                self.put(rel, new)
            if post:  # installed, takeback's PostToolUse matches Bash only; one added by hand
                self.hook(
                    convo,
                    "PostToolUse",
                    tool_name=tool,
                    tool_use_id=tid,
                    tool_input=tool_input,
                    tool_response={"filePath": tool_input["file_path"], "success": True},
                )

    @precondition(lambda self: self.replying())
    @rule(data=st.data())
    def bash_begins(self, data: st.DataObject) -> None:
        """A command starts: PreToolUse, then the first of its writes (the rest later)."""
        s = data.draw(st.sampled_from(self.replying()), label="session")
        convo = self.convos[s]
        n = data.draw(st.integers(1, 3), label="files")
        targets = sorted({self.pick(convo, data) for _ in range(n)})
        writes: list[tuple[str, Content]] = []
        for rel in targets:
            gone = self.disk[rel] is not None and data.draw(st.integers(0, 3)) == 0
            writes.append((rel, None if gone else self.fresh(s, rel)))
        tid = self.tool_id()
        tool_input = {"command": f"./gen.sh {' '.join(targets)}", "description": "Generate"}
        self.hook(convo, "PreToolUse", tool_name="Bash", tool_use_id=tid, tool_input=tool_input)
        now = data.draw(st.integers(0, len(writes)), label="written at once")
        step = Step(tid, tool_input, next(self.clock), dict(self.disk), writes[now:])
        convo.calls.append(step)
        convo.steps.append(step)
        for rel, content in writes[:now]:
            self.put(rel, content)

    def may_end(self) -> list[str]:
        """Sessions with a command to end; the one begun last ends first (nested)."""
        return [s for s in self.free(list(SESSIONS)) if self.convos[s].calls]

    @precondition(lambda self: self.may_end())
    @rule(ending=endings, data=st.data())
    def bash_ends(self, ending: str, data: st.DataObject) -> None:
        """A command's last writes, then PostToolUse, PostToolUseFailure, or nothing."""
        s = data.draw(st.sampled_from(self.may_end()), label="session")
        convo = self.convos[s]
        step = data.draw(st.sampled_from(convo.calls), label="call")
        for rel, content in step.todo:
            if rel == SHARED and rel in (self.other(convo).open or Reply(0)).before:
                continue  # the other reply took the file meanwhile: the command skips it
            if content is not None or self.disk[rel] is not None:  # already gone: rm -f
                self.put(rel, content)
        step.todo = []
        convo.calls.remove(step)
        if ending == "none":
            return  # a failed call, and no PostToolUseFailure handler: finished later
        response: dict[str, Any] = (
            {"stdout": "", "stderr": "", "interrupted": False}
            if ending == "PostToolUse"
            else {"error": "Exit code 1"}
        )
        self.hook(
            convo,
            ending,
            but=step.tid,
            tool_name="Bash",
            tool_use_id=step.tid,
            tool_input=step.tool_input,
            tool_response=response,
        )
        if not step.done:
            self.finish(convo, step)

    # -- the person --------------------------------------------------------------------

    @precondition(lambda self: self.quiet())
    @rule(data=st.data())
    def persons_edit(self, data: st.DataObject) -> None:
        """A person saves a file: mostly their own, sometimes one an agent wrote."""
        if data.draw(persons_pick) == 0:
            rel = data.draw(st.sampled_from([*OWN[A], *OWN[B], SHARED]))
        else:
            rel = data.draw(st.sampled_from(PERSON))
        self.put(rel, self.fresh("a person", rel))

    def may_undo(self) -> list[str]:
        """Sessions whose reply a person may take back now (even while the other
        conversation's command runs: what the undo writes is not that command's)."""
        return [s for s in SESSIONS if self.convos[s].open is None and self.convos[s].replies]

    @precondition(lambda self: self.may_undo())
    @rule(data=st.data())
    def undo(self, data: st.DataObject) -> None:
        """After the conversation's reply, a person types ``takeback --session S undo``.

        The other conversation may be replying.
        """
        s = data.draw(st.sampled_from(self.may_undo()), label="session")
        convo = self.convos[s]
        proc = undo_cli(self.root, self.store, s)
        target = next((r for r in reversed(convo.replies) if not r.undone and r.changes()), None)
        if target is None:
            assert proc.returncode == 0, proc.stderr
            assert json.loads(proc.stdout)["nothing"] is True, proc.stdout
            self.check_disk()
            return
        changes = target.changes()
        changed = sorted(p for p, (_b, a) in changes.items() if self.disk[p] != a)
        # A path a step whose end was never seen brought in is a conflict too (README).
        doubted = sorted(p for p in changes if p in target.unconfirmed and p not in changed)
        conflicts = sorted(changed + doubted)
        doc = json.loads(proc.stdout)
        if conflicts:
            assert proc.returncode == 3, (proc.stdout, proc.stderr)
            assert sorted(doc["conflicts"]) == conflicts, doc
            assert all(f"{p} changed after turn {target.n}" in proc.stderr for p in changed)
            assert all(f"{p} changed in a step whose end" in proc.stderr for p in doubted)
        else:
            assert proc.returncode == 0, (proc.stdout, proc.stderr)
            assert doc["session"] == s and doc["turns"] == [target.n], doc
            for rel, (was, _a) in changes.items():
                self.disk[rel] = was
                for step in self.other(convo).open_steps():
                    step.taken_back[rel] = was
            target.undone = True
        self.check_disk()

    # -- what must always hold ---------------------------------------------------------

    def check_disk(self) -> None:
        want = {rel: ("f", data) for rel, data in self.disk.items() if data is not None}
        assert files_state(self.root) == want

    @invariant()
    def nothing_but_the_model_changed_the_folder(self) -> None:
        self.check_disk()


def play(tmp_path: Path, *, examples: int, steps: int, real_hooks: bool = False) -> int:
    """Run the machine; return how many hook calls it sent."""

    class Machine(Interleaved):
        pass

    Machine.base = tmp_path
    Machine.real_hooks = real_hooks
    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,  # a test writes nothing outside its tmp_path
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    return Machine.calls


def test_two_conversations_interleaved_undo_takes_back_exactly_the_reply(
    tmp_path: Path,
) -> None:
    play(tmp_path, examples=examples(40), steps=50)


# Slow: each hook call of its six runs is a process of its own (``takeback hook
# claude-code``); the quick tier sends real calls through it in the regression test below.
@pytest.mark.slow
def test_two_conversations_through_the_real_hook_command(tmp_path: Path) -> None:
    # Hypothesis begins with the simplest runs (a few steps): enough examples to send a
    # real reply or more of both conversations through the command.
    assert play(tmp_path, examples=6, steps=30, real_hooks=True) >= 20


def test_regression_undo_while_the_other_conversations_command_runs(tmp_path: Path) -> None:
    """Found by the state machine: a person undoes A's reply while B's command runs."""
    root, store = tmp_path / "ws", tmp_path / "store"
    root.mkdir()
    (root / "a1.txt").write_text("a0\n")
    (root / "b1.txt").write_text("b0\n")

    def hook(session: str, event: str, **fields: Any) -> None:
        payload = {"session_id": session, "cwd": str(root), "hook_event_name": event, **fields}
        send(root, store, payload, real=True)

    bash = {"tool_name": "Bash", "tool_use_id": "toolu_02", "tool_input": {"command": "make"}}
    hook(A, "UserPromptSubmit", prompt="edit a1")
    write = {"file_path": str(root / "a1.txt"), "content": "A's\n"}
    hook(A, "PreToolUse", tool_name="Write", tool_use_id="toolu_01", tool_input=write)
    (root / "a1.txt").write_text("A's\n")
    hook(A, "Stop")
    hook(B, "UserPromptSubmit", prompt="build")
    hook(B, "PreToolUse", **bash)
    assert undo_cli(root, store, A).returncode == 0  # while B's command runs
    assert (root / "a1.txt").read_text() == "a0\n"
    (root / "b1.txt").write_text("B's command\n")
    hook(B, "PostToolUse", **bash)
    hook(B, "Stop")
    proc = undo_cli(root, store, B)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["actions"] == {"b1.txt": "M"}
    assert (root / "b1.txt").read_text() == "b0\n"
    assert (root / "a1.txt").read_text() == "a0\n"  # A's reply stays taken back
