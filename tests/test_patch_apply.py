"""``takeback diff`` output against the real ``git apply``: the patch must take a folder
from the FROM state to the TO state byte for byte.

Each case builds a git repository holding the FROM state, snapshots it, changes it to the
TO state, takes the diff, resets the folder to FROM with git and applies the patch with
``git apply --check`` and ``git apply``. The headers are also compared with ``git diff``'s
own, which pins the quoting of odd file names (core.quotePath=true).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takeback import Workspace
from takeback.ops import line_counts

from .conftest import CLI, SRC, examples

# A state: name (bytes, '/'-separated) -> content for a 0644 file, or (kind, bytes) with
# kind "x" (an executable file) or "l" (a symlink; the bytes are its target).
Spec = bytes | tuple[str, bytes]
State = dict[bytes, Spec]


def git(root: Path, *args: str | bytes, input: bytes | None = None) -> bytes:
    proc = subprocess.run(
        ["git", "-c", "core.quotePath=true", *args],
        cwd=root,
        input=input,
        capture_output=True,
        timeout=60,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"git {args!r} exited {proc.returncode}:\n{proc.stderr.decode(errors='replace')}"
        )
    return proc.stdout


def write_state(root: Path, state: State) -> None:
    for name, spec in state.items():
        path = os.path.join(os.fsencode(root), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        kind, data = ("f", spec) if isinstance(spec, bytes) else spec
        if kind == "l":
            os.symlink(data, path)
            continue
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o755 if kind == "x" else 0o644)


def read_state(root: Path) -> State:
    """The files and links under root (not .git, not folders), normalised like a State."""
    out: State = {}
    broot = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(broot):
        dirnames[:] = [d for d in dirnames if d != b".git"]
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in filenames + links:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, broot)
            st_ = os.lstat(full)
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("l", os.readlink(full))
            else:
                with open(full, "rb") as f:
                    data = f.read()
                out[rel] = ("x", data) if st_.st_mode & 0o100 else data
    return out


def clear(root: Path) -> None:
    for name in os.listdir(os.fsencode(root)):
        if name == b".git":
            continue
        full = os.path.join(os.fsencode(root), name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)


def apply_and_check(root: Path, patch: bytes, before: State, after: State) -> None:
    """With root at ``before``, apply the patch with git: root must be ``after``; and back."""
    assert read_state(root) == before
    if not patch:
        assert before == after
        return
    patch_file = root.parent / "p.diff"
    patch_file.write_bytes(patch)
    git(root, "apply", "--check", str(patch_file))
    git(root, "apply", str(patch_file))
    assert read_state(root) == after
    git(root, "apply", "-R", str(patch_file))
    assert read_state(root) == before
    git(root, "apply", str(patch_file))


def roundtrip(tmp_path: Path, before: State, after: State, *, binary: bool = False) -> bytes:
    """Diff ``before`` -> ``after`` with takeback, apply it with git; return the patch."""
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q")
    write_state(root, before)
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", "from")
    with Workspace(root, store=tmp_path / "store") as ws:
        sid = ws.snapshot().id
        clear(root)
        write_state(root, after)
        patch = ws.diff(sid, binary=binary).patch
    git(root, "reset", "-q", "--hard")
    git(root, "clean", "-q", "-f", "-d", "-x")
    apply_and_check(root, patch, before, after)
    return patch


def git_headers(tmp_path: Path, binary: bool) -> list[bytes]:
    """The header lines of git's own diff of the folder in tmp_path/ws (index vs HEAD)."""
    root = tmp_path / "ws"
    git(root, "add", "-A")
    out = git(root, "diff", "--cached", "--no-renames", *(["--binary"] if binary else []))
    return headers(out, binary)


def headers(patch: bytes, binary: bool) -> list[bytes]:
    keep: tuple[bytes, ...] = (
        b"diff --git ",
        b"--- ",
        b"+++ ",
        b"new file mode",
        b"deleted file mode",
        b"old mode",
        b"new mode",
        b"Binary files ",
    )
    if binary:
        keep += (b"index ",)  # full ids: the same whatever git's abbreviation is
    return sorted(line for line in patch.split(b"\n") if line.startswith(keep))


# -- line ends ---------------------------------------------------------------------------


def test_bare_cr_inside_a_line(tmp_path: Path) -> None:
    before: State = {
        b"cr.txt": b"one\rtwo\nthree\n",
        b"cr-end.txt": b"a\rb\rc",
        b"only-cr.txt": b"x\r\r\ry\n",
    }
    after: State = {
        b"cr.txt": b"one\rTWO\nthree\n",
        b"cr-end.txt": b"a\rb\rC",
        b"only-cr.txt": b"x\r\ry\n",
    }
    patch = roundtrip(tmp_path, before, after)
    # One line each: a CR does not end a line in a diff, as in git.
    assert patch.count(b"\n-one\rtwo\n") == 1
    assert patch.count(b"\\ No newline at end of file\n") == 2


def test_line_counts_split_on_newline_only() -> None:
    assert line_counts(b"one\rtwo\nthree\n", b"one\rTWO\nthree\n") == (1, 1)
    assert line_counts(b"a\rb\rc", b"a\rb\rC") == (1, 1)
    assert line_counts(b"", b"a\r\nb\r\n") == (2, 0)
    assert line_counts(b"x\r\r\ry\n", None) == (0, 1)


def test_crlf_files(tmp_path: Path) -> None:
    before: State = {
        b"win.txt": b"a\r\nb\r\nc\r\n",
        b"mixed.txt": b"a\r\nb\nc\r\n",
        b"gone.txt": b"x\r\n",
    }
    after: State = {
        b"win.txt": b"a\r\nB\r\nc\r\n",
        b"mixed.txt": b"a\nb\r\nc",
        b"new.txt": b"n\r\nm",
    }
    roundtrip(tmp_path, before, after)


def test_missing_final_newline(tmp_path: Path) -> None:
    before: State = {
        b"add-nl": b"a\nb",
        b"drop-nl": b"a\nb\n",
        b"keep": b"1\n2\n3\n4\n5\n6\n7\n8",
        b"last-only": b"x",
        b"del": b"no newline",
    }
    after: State = {
        b"add-nl": b"a\nb\n",
        b"drop-nl": b"a\nb",
        b"keep": b"1\nTWO\n3\n4\n5\n6\n7\n8",
        b"last-only": b"y",
        b"new": b"fresh",
    }
    roundtrip(tmp_path, before, after)


def test_empty_files_created_deleted_emptied_filled(tmp_path: Path) -> None:
    before: State = {
        b"empty-gone": b"",
        b"to-empty": b"some\ntext\n",
        b"from-empty": b"",
        b"sub/empty-gone": ("x", b""),
    }
    after: State = {
        b"empty-new": b"",
        b"to-empty": b"",
        b"from-empty": b"now\n",
        b"sub2/empty-new": ("x", b""),
    }
    roundtrip(tmp_path, before, after)


def test_mode_changes(tmp_path: Path) -> None:
    before: State = {b"run": b"#!/bin/sh\n", b"norun": ("x", b"#!/bin/sh\n"), b"both": b"a\n"}
    after: State = {
        b"run": ("x", b"#!/bin/sh\n"),
        b"norun": b"#!/bin/sh\n",
        b"both": ("x", b"b\n"),
        b"newx": ("x", b"x\n"),
    }
    patch = roundtrip(tmp_path, before, after)
    assert b"old mode 100644\nnew mode 100755\n" in patch
    assert b"new file mode 100755\n" in patch


def test_symlinks(tmp_path: Path) -> None:
    before: State = {
        b"target": b"t\n",
        b"moved": ("l", b"target"),
        b"gone": ("l", b"x/y"),
        b"becomes-file": ("l", b"target"),
        b"becomes-link": b"data\n",
    }
    after: State = {
        b"target": b"t\n",
        b"moved": ("l", b"elsewhere"),
        b"new": ("l", b"target"),
        b"becomes-file": b"now a file\n",
        b"becomes-link": ("l", b"target"),
    }
    patch = roundtrip(tmp_path, before, after)
    assert b"new file mode 120000\n" in patch


# -- names -------------------------------------------------------------------------------

ODD_NAMES = [
    b"tab\there",
    b"new\nline",
    b'quo"te',
    b"back\\slash",
    b"caf\xc3\xa9",
    b"not-utf8-\xff\xfe",
    b"ctl\x01\x7f",
    b"sp ace",
    b"bell\x07\x08\x0b\x0c\r",
    b"dir\twith/inside file",
]


def test_odd_names_are_quoted_as_git_does(tmp_path: Path) -> None:
    before: State = {n: b"old " + n + b"\n" for n in ODD_NAMES}
    before[b"gone\tfile"] = b"bye\n"
    before[b"mode \xe2\x9c\x93"] = b"m\n"
    after: State = {n: b"new " + n + b"\n" for n in ODD_NAMES}
    after[b'made\\"\xff'] = b"hi\n"
    after[b"mode \xe2\x9c\x93"] = ("x", b"m\n")
    patch = roundtrip(tmp_path, before, after)
    assert b'diff --git "a/tab\\there" "b/tab\\there"\n' in patch
    assert b'--- "a/caf\\303\\251"\n' in patch
    assert b'+++ "b/not-utf8-\\377\\376"\n' in patch
    assert b"--- a/sp ace\t\n" in patch  # git ends a name that has a space with a tab
    clear(tmp_path / "ws")
    write_state(tmp_path / "ws", after)
    assert headers(patch, False) == git_headers(tmp_path, False)


def test_binary_files_without_and_with_binary(tmp_path: Path) -> None:
    before: State = {b"b.bin": b"\0\1\2" * 100, b"gone.bin": b"\0x", b"bin\tname": b"\0"}
    after: State = {
        b"b.bin": b"\0\1\3" * 100,
        b"new.bin": bytes(range(256)) * 3,
        b"bin\tname": b"\0\0",
        b"to-text": b"text\n",
    }
    before[b"to-text"] = b"\0was binary"
    patch = roundtrip(tmp_path, before, after, binary=True)
    assert b"GIT binary patch\n" in patch
    root = tmp_path / "ws"
    clear(root)
    write_state(root, after)
    assert headers(patch, True) == git_headers(tmp_path, True)
    with Workspace(root, store=tmp_path / "store") as ws:
        plain = ws.diff(ws.log()[0].id).patch
    assert b'Binary files "a/bin\\tname" and "b/bin\\tname" differ\n' in plain
    assert b"Binary files /dev/null and b/new.bin differ\n" in plain
    assert headers(plain, False) == git_headers(tmp_path, False)


def test_cli_diff_binary_stat_and_name_status(tb: CLI, ws_dir: Path, tmp_path: Path) -> None:
    git(ws_dir, "init", "-q")
    before: State = {
        b"tab\there": b"a\n",
        b"caf\xc3\xa9": b"b\n",
        b"bad\xff": b"\0c",
        b"plain": b"p\n",
    }
    after: State = {
        b"tab\there": b"A\n",
        b"caf\xc3\xa9": b"b\nb\n",
        b"bad\xff": b"\0d",
        b"new\nline": b"n\n",
    }
    write_state(ws_dir, before)
    git(ws_dir, "add", "-A")
    git(ws_dir, "commit", "-q", "-m", "from")
    tb("snapshot")
    clear(ws_dir)
    write_state(ws_dir, after)
    assert tb("diff", "--name-status").stdout.splitlines() == [
        'M\t"bad\\377"',
        'M\t"caf\\303\\251"',
        'A\t"new\\nline"',
        "D\tplain",
        'M\t"tab\\there"',
    ]
    stat_lines = tb("diff", "--stat").stdout.splitlines()
    assert stat_lines[:5] == [
        ' "bad\\377"     | +0 -0',
        ' "caf\\303\\251" | +1 -0',
        ' "new\\nline"   | +1 -0',
        " plain         | +0 -1",
        ' "tab\\there"   | +1 -1',
    ]
    out = subprocess.run(
        [sys.executable, "-m", "takeback", "diff", "--binary"],
        cwd=ws_dir,
        env={**os.environ, "TAKEBACK_STORE": str(tb.store), "PYTHONPATH": SRC},
        capture_output=True,
        check=True,
    ).stdout
    git(ws_dir, "reset", "-q", "--hard")
    git(ws_dir, "clean", "-q", "-f", "-d", "-x")
    apply_and_check(ws_dir, out, before, after)


# -- a property over random names and contents -----------------------------------------

NAME_PIECES = [
    b"a",
    b"b",
    b"\t",
    b"\n",
    b'"',
    b"\\",
    b" ",
    b"\xc3\xa9",
    b"\xff",
    b"\x01",
    b"\x7f",
    b"\r",
    b"-",
]
LINE_PIECES = [b"a", b"b", b"\r", b"\n", b"\r\n", b" ", b"\xe9", b"--", b"\\"]

name = st.lists(st.sampled_from(NAME_PIECES), min_size=1, max_size=4).map(b"".join)
text = st.lists(st.sampled_from(LINE_PIECES), max_size=12).map(b"".join)
content = text | st.binary(max_size=20).map(lambda b: b"\0" + b)
spec: st.SearchStrategy[Spec] = st.one_of(
    content,
    st.tuples(st.just("x"), content),
    st.tuples(st.just("l"), st.sampled_from([b"a", b"t\target", b"../up", b"\xff"])),
)
states = st.dictionaries(
    st.sampled_from([b"", b"d/"]).flatmap(lambda prefix: name.map(lambda n: prefix + n)),
    spec,
    max_size=4,
)


def _drop_clashes(state: State) -> State:
    # "d" as a file and "d/x" in the same state cannot both exist.
    return {k: v for k, v in state.items() if k != b"d"}


@settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    before=states.map(_drop_clashes),
    after=states.map(_drop_clashes),
    keep=st.dictionaries(name, text, max_size=2),
)
def test_property_git_apply_takes_before_to_after(before: State, after: State, keep: State) -> None:
    # Files both states share, changed a little, so that hunks have context.
    for k, v in keep.items():
        if isinstance(v, bytes) and k not in before and k not in after and k != b"d":
            before[k] = v + b"\nctx1\nctx2\nctx3\nctx4\n"
            after[k] = v + b"\nctx1\nCTX2\nctx3\nctx4"
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        roundtrip(tmp, before, after, binary=True)


@pytest.mark.parametrize("name", ODD_NAMES)
def test_quote_path_matches_git(tmp_path: Path, name: bytes) -> None:
    from takeback.ops import quote_path

    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q")
    write_state(root, {name: b"x\n"})
    git(root, "add", "-A")
    listed = git(root, "ls-files").rstrip(b"\n")
    assert quote_path(os.fsdecode(name)) == listed.decode("ascii")
