"""A property test of ``undo`` with ``merge``: random files, a turn's edits, a person's.

Each example makes a few text files of unique lines (LF or CRLF ends, chosen per line;
perhaps a byte-order mark, perhaps no final newline), cut into chunks. Each chunk is kept,
rewritten by the turn, rewritten by the person afterwards, or (in the overlapping case)
rewritten by the turn and then again by the person; two rewritten chunks always have a
kept one between them. The turn is recorded through the library, the person's edits are
written to the disk after it, and ``Session.undo(merge=True)`` runs.

Where no chunk was rewritten by both, every file must end up exactly as the file before
the turn with the person's rewrites applied at their chunks: computed from the chunks,
not by a merge, and checked against ``git merge-file`` on the same three versions too;
redo must then give back every file exactly as the person left it.
Where some chunk was, the undo must write nothing (the folder is byte for byte as the
person left it) and name exactly those chunks' lines in the files as they are.
"""

from __future__ import annotations

import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import takeback
from takeback.errors import ConflictError

from .conftest import files_state, write

pytestmark = pytest.mark.slow

BOM = b"\xef\xbb\xbf"
ROLES = ("keep", "turn", "person", "both")


@dataclass(frozen=True)
class Chunk:
    role: str
    size: int  # lines before the turn (1 or more)
    turn_size: int  # lines the turn writes instead (0: it deletes them)
    person_size: int  # lines the person writes instead (for "both": over the turn's)


@dataclass(frozen=True)
class Doc:
    chunks: tuple[Chunk, ...]
    crlf: tuple[bool, ...]  # per line, a pattern repeated
    bom: bool
    final_newline: bool


@st.composite
def docs(draw: st.DrawFn, *, overlap: bool) -> Doc:
    n = draw(st.integers(3 if overlap else 2, 9))
    bom, final_newline = draw(st.booleans()), draw(st.booleans())
    roles: list[str] = []
    for i in range(n):
        if (
            (roles and roles[-1] != "keep")
            or (i == 0 and bom)
            or (i == n - 1 and not final_newline)
        ):
            # Two rewritten chunks have a kept one between them; a BOM and a last line
            # without its end stay on the same line in every version.
            roles.append("keep")
            continue
        roles.append(draw(st.sampled_from(ROLES if overlap else ROLES[:3])))
    if overlap and "both" not in roles:
        free = [i for i in range(n) if roles[i] != "keep" or (0 < i < n - 1)]
        at = draw(st.sampled_from(free)) if free else 0
        roles[at] = "both"
        for j in (at - 1, at + 1):  # a kept chunk on each side of it
            if 0 <= j < n:
                roles[j] = "keep"
    chunks = []
    for role in roles:
        size = draw(st.integers(1, 3))
        turn_size = draw(st.integers(0, 3))
        low = 1 if role == "both" and turn_size == 0 else 0
        person_size = draw(st.integers(low, 3))
        chunks.append(Chunk(role, size, turn_size, person_size))
    crlf = tuple(draw(st.lists(st.booleans(), min_size=1, max_size=4)))
    return Doc(tuple(chunks), crlf, bom, final_newline)


@dataclass
class Versions:
    before: bytes  # before the turn
    turn: bytes  # as the turn left it
    person: bytes  # as the person left it after the turn
    expected: bytes  # before the turn, with the person's rewrites (clean case)
    both: list[tuple[int, int]]  # lines (first, last) in ``person`` of each "both" chunk


def versions(doc: Doc, tag: str) -> Versions:
    fresh = count()
    ends = [b"\r\n" if c else b"\n" for c in doc.crlf]

    def lines(what: str, k: int) -> list[bytes]:
        return [f"{tag} {what} {next(fresh)}".encode() for _ in range(k)]

    before: list[bytes] = []
    turn: list[bytes] = []
    person: list[bytes] = []
    expected: list[bytes] = []
    both: list[tuple[int, int]] = []
    for c in doc.chunks:
        orig = lines("kept", c.size)
        by_turn = lines("turn", c.turn_size) if c.role in ("turn", "both") else orig
        by_person = lines("person", c.person_size) if c.role in ("person", "both") else None
        before += orig
        turn += by_turn
        if c.role == "both":
            both.append((len(person) + 1, len(person) + c.person_size))
        person += by_person if by_person is not None else by_turn
        expected += by_person if by_person is not None else orig

    def join(body: list[bytes]) -> bytes:
        out = b"".join(line + ends[zlib.crc32(line) % len(ends)] for line in body)
        if not doc.final_newline and out:
            out = out[:-2] if out.endswith(b"\r\n") else out[:-1]
        return (BOM if doc.bom else b"") + out

    # A line's end is chosen by the line itself, so it is the same in every version.
    return Versions(join(before), join(turn), join(person), join(expected), both)


def git_merge_file(tmp: Path, ours: bytes, base: bytes, theirs: bytes) -> bytes | None:
    for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
        (tmp / name).write_bytes(data)
    proc = subprocess.run(
        ["git", "merge-file", "-p", str(tmp / "ours"), str(tmp / "base"), str(tmp / "theirs")],
        capture_output=True,
    )
    return proc.stdout if proc.returncode == 0 else None


def run_undo(docs_: list[Doc], *, overlap: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        root, store, scratch = tmp / "ws", tmp / "store", tmp / "scratch"
        root.mkdir()
        scratch.mkdir()
        files = {f"f{i}.txt": versions(doc, f"f{i}") for i, doc in enumerate(docs_)}
        for name, v in files.items():
            write(root, name, v.before)
        with takeback.Workspace(root, store=store) as ws:
            session = ws.session("s")
            with session.turn("the turn") as turn:
                for name, v in files.items():
                    turn.touch(name)
                    write(root, name, v.turn)
            for name, v in files.items():
                write(root, name, v.person)
            left = files_state(root)
            if not overlap:
                session.undo(merge=True)
                for name, v in files.items():
                    got = (root / name).read_bytes()
                    assert got == v.expected, name
                    git = git_merge_file(scratch, v.person, v.turn, v.before)
                    assert git == got, name
                # Redo brings back the turn's rewrites and keeps the person's.
                session.redo()
                assert files_state(root) == left
                return
            with pytest.raises(ConflictError) as err:
                session.undo(merge=True)
            assert files_state(root) == left  # nothing written
            named = {p: [tuple(r["now"]) for r in rs] for p, rs in err.value.regions.items()}
            want = {name: v.both for name, v in files.items() if v.both}
            assert named == want
            assert err.value.conflicts == sorted(want)


SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@SETTINGS
@given(st.lists(docs(overlap=False), min_size=1, max_size=3))
def test_undo_merge_leaves_exactly_the_persons_edits(docs_: list[Doc]) -> None:
    run_undo(docs_, overlap=False)


@SETTINGS
@given(docs(overlap=True), st.lists(docs(overlap=False), max_size=2))
def test_undo_merge_of_overlapping_edits_writes_nothing_and_names_them(
    clash: Doc, others: list[Doc]
) -> None:
    run_undo([clash, *others], overlap=True)
