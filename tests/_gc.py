"""Helpers of the gc tests: a history whose every snapshot's files are known, and checks.

:class:`Recorded` listens to a workspace's events and keeps, for every snapshot taken,
the workspace's files at that moment; :meth:`Recorded.check` then reads every snapshot
still in the store back through the store and compares it byte for byte.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import takeback

from .conftest import files_state, write


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
