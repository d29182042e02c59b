"""Helpers of the gc tests: a history whose every snapshot's files are known, and checks.

:class:`Recorded` listens to a workspace's events and keeps, for every snapshot taken,
the workspace's files at that moment; :meth:`Recorded.check` then reads every snapshot
still in the store back through the store and compares it byte for byte.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import takeback

from .conftest import files_state, write

#: where crash tests aim their kills, in turn (gc names each step on stderr before it,
#: with ``TAKEBACK_GC_PAUSE`` set)
KILL_TARGETS = ("start", "history", "objects", "reclaim")


def kill_at(proc: subprocess.Popen[str], target: str, rng: random.Random) -> str:
    """Kill a ``takeback gc`` run in one of its steps; return the step it was killed in.

    The kill aims at ``target`` (after the line naming it, within or just past its
    pause), so that kills land in every step whatever the machine's speed (a kill at a
    random time from the start lands before any step on a loaded machine); ``"start"``
    kills before gc has named any step. The step is the last gc named, ``"start"`` if
    none.
    """
    seen: list[str] = []
    assert proc.stderr is not None
    if target == "start":
        time.sleep(rng.uniform(0.0, 0.3))
    else:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break  # gc ended before reaching the step (nothing to rewrite, say)
            seen.append(line)
            if line.rstrip().endswith(f"gc: {target}"):
                break
        time.sleep(rng.uniform(0.0, 0.2))
    proc.send_signal(signal.SIGKILL)
    _out, err = proc.communicate(timeout=60)
    said = ("".join(seen) + err).splitlines()
    steps = [line.rsplit(" ", 1)[-1] for line in said if "gc:" in line]
    return steps[-1] if steps else "start"


class Recorded:
    """Every snapshot's expected files, taken as the snapshots are."""

    def __init__(self, ws: takeback.Workspace, root: Path) -> None:
        self.ws = ws
        self.root = root
        self.expected: dict[str, dict[str, tuple[str, bytes]]] = {}
        ws.on_event(self._seen)

    def _seen(self, ev: dict[str, Any]) -> None:
        if ev.get("event") == "snapshot.taken":
            self.expected[str(ev["id"])] = files_state(self.root)

    def check(self, ws: takeback.Workspace | None = None) -> list[str]:
        """Read every snapshot left in the store back; return the ids checked.

        Raises:
            AssertionError: a snapshot's files differ from what the folder held.
        """
        ws = ws or self.ws
        store = ws.open_store()
        kept = [s.id for s in store.meta.snapshots()]
        for sid in kept:
            if sid not in self.expected:
                continue
            snap = store.meta.snapshot(sid)
            assert snap is not None
            assert stored_files(store, snap.tree) == self.expected[sid], sid
        return kept


def stored_files(store: Any, tree: str) -> dict[str, tuple[str, bytes]]:
    """A snapshot's files as the store gives them back, in ``files_state``'s form."""
    out: dict[str, tuple[str, bytes]] = {}
    stack = [("", tree)]
    while stack:
        prefix, tid = stack.pop()
        for name, e in store.objects.get_tree(tid).items():
            rel = f"{prefix}{name}"
            if e.kind == "d":
                out[rel] = ("d", b"")
                stack.append((rel + "/", e.oid))
            else:
                out[rel] = ("f", store.objects.get(e.oid))
    return out


def build_history(
    ws: takeback.Workspace, root: Path, *, turns: int, seed: int = 0, files: int = 8
) -> Recorded:
    """Record ``turns`` turns of a session, each writing a few files and running a command."""
    rng = random.Random(seed)
    rec = Recorded(ws, root)
    for i in range(files):
        write(root, f"src/f{i}.txt", f"file {i}\n" * 40)
    session = ws.session("agent")
    session.start()
    for t in range(turns):
        with session.turn(f"turn {t}") as turn:
            for _ in range(2):
                rel = f"src/f{rng.randrange(files)}.txt"
                turn.touch(rel)
                body = (root / rel).read_bytes()
                write(root, rel, body + f"turn {t} {rng.random()}\n".encode())
            with turn.command(f"cmd {t}"):
                write(root, f"out/{t % 3}.txt", os.urandom(64).hex() * 8)
    return rec
