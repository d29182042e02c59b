"""Ignore rules and the git index reader, checked against a real git."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from takeback.scan._gitindex import GitIndex
from takeback.scan._ignore import IgnoreRules

from .conftest import examples

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="git is not installed")

IgnoreFiles = Callable[[str], tuple[bytes | None, bytes | None]]


# --------------------------------------------------------------------------- helpers


def git_env(home: Path) -> dict[str, str]:
    """An environment in which no user or system git configuration takes part."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".xdg"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "LC_ALL": "C",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }


def git(repo: Path, *args: str) -> bytes:
    assert GIT is not None
    home = repo.parent / "home"
    home.mkdir(exist_ok=True)
    done = subprocess.run(
        [GIT, "-c", "init.defaultBranch=main", *args],
        cwd=repo,
        env=git_env(home),
        capture_output=True,
        check=True,
    )
    return done.stdout


def git_visible(repo: Path) -> set[str]:
    """Files git would offer to add in a repository where nothing is committed yet."""
    out = git(repo, "ls-files", "-z", "--others", "--cached", "--exclude-standard")
    return {os.fsdecode(p) for p in out.split(b"\0") if p}


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def on_disk(root: Path) -> IgnoreFiles:
    def files(dir_rel: str) -> tuple[bytes | None, bytes | None]:
        folder = os.path.join(root, dir_rel)
        return (
            _read(os.path.join(folder, ".gitignore")),
            _read(os.path.join(folder, ".takebackignore")),
        )

    return files


def takeback_visible(
    root: Path,
    *,
    exclude_env: bool = False,
    extra_patterns: tuple[str, ...] = (),
    ignore_files: IgnoreFiles | None = None,
) -> set[str]:
    """The files a walker built on IgnoreRules keeps: descend per folder, prune ignored dirs."""
    files_for = ignore_files or on_disk(root)
    found: set[str] = set()

    def walk(dir_rel: str, rules: IgnoreRules) -> None:
        rules = rules.descend(dir_rel, *files_for(dir_rel))
        with os.scandir(os.path.join(root, dir_rel)) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        for entry in entries:
            if entry.name == ".git":
                continue
            rel = f"{dir_rel}/{entry.name}" if dir_rel else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if rules.ignored(rel, is_dir):
                continue
            if is_dir:
                walk(rel, rules)
            else:
                found.add(rel)

    rules = IgnoreRules.for_root(str(root), exclude_env=exclude_env, extra_patterns=extra_patterns)
    walk("", rules)
    return found


def make_tree(root: Path, spec: Mapping[str, str | bytes | None]) -> None:
    """Create files (content given) and, for keys ending in '/', empty folders."""
    for rel, content in spec.items():
        path = root / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else (content or b"")
        path.write_bytes(data)


def new_repo(tmp_path: Path, spec: Mapping[str, str | bytes | None], name: str = "repo") -> Path:
    repo = tmp_path / name
    repo.mkdir()
    git(repo, "init", "-q")
    make_tree(repo, spec)
    return repo


def assert_same_as_git(tmp_path: Path, spec: Mapping[str, str | bytes | None]) -> set[str]:
    repo = new_repo(tmp_path, spec)
    expected = git_visible(repo)
    assert takeback_visible(repo) == expected
    return expected


# --------------------------------------------------------------------------- fixed cases


def test_nested_gitignore_with_negation(tmp_path: Path) -> None:
    visible = assert_same_as_git(
        tmp_path,
        {
            ".gitignore": "*.log\n!important.log\nbuild/\n",
            "a.log": "",
            "important.log": "",
            "src/x.py": "",
            "src/.gitignore": "!debug.log\nimportant.log\n*.py\n!keep.py\n",
            "src/debug.log": "",
            "src/other.log": "",
            "src/important.log": "",
            "src/keep.py": "",
            "src/deep/important.log": "",
            "src/deep/debug.log": "",
            "src/deep/keep.py": "",
            "src/deep/.gitignore": "!*.py\n",
            "src/deep/y.py": "",
            "build/out.txt": "",
            "src/build/out.txt": "",
        },
    )
    assert "src/debug.log" in visible
    assert "src/deep/y.py" in visible
    assert "src/important.log" not in visible
    assert "important.log" in visible


def test_logs_doublestar_keeps_the_folder(tmp_path: Path) -> None:
    visible = assert_same_as_git(
        tmp_path,
        {
            ".gitignore": "logs/**\n!logs/keep.txt\n",
            "logs/keep.txt": "",
            "logs/x.txt": "",
            "logs/sub/keep.txt": "",
            "logs/sub/y": "",
            "other/logs/z": "",
        },
    )
    assert "logs/keep.txt" in visible
    rules = IgnoreRules.for_root("/nonexistent", exclude_env=False).descend(
        "", b"logs/**\n!logs/keep.txt\n", None
    )
    assert not rules.ignored("logs", True)
    assert rules.ignored("logs/x.txt", False)
    assert rules.ignored("logs/sub", True)
    assert not rules.ignored("logs/keep.txt", False)


def test_dir_only_patterns_and_same_named_files(tmp_path: Path) -> None:
    visible = assert_same_as_git(
        tmp_path,
        {
            ".gitignore": "build/\n/out/\ncache/\n!cache\n",
            "build": "a file called build",
            "sub/build/x": "",
            "sub/build2/x": "",
            "out/x": "",
            "sub/out/x": "",
            "sub/out2": "",
            "cache/x": "",
            "sub/cache": "",
        },
    )
    assert {"build", "sub/out/x", "sub/cache"} <= visible
    assert "sub/build/x" not in visible


def test_anchored_versus_basename_at_depth(tmp_path: Path) -> None:
    assert_same_as_git(
        tmp_path,
        {
            ".gitignore": "/top.txt\nsub/x.txt\nname.txt\ndoc/*.md\n",
            "top.txt": "",
            "sub/top.txt": "",
            "sub/x.txt": "",
            "deep/sub/x.txt": "",
            "name.txt": "",
            "a/b/name.txt": "",
            "doc/a.md": "",
            "doc/deeper/a.md": "",
            "a/doc/a.md": "",
            "a/.gitignore": "/y\nb/c\n*/z\n",
            "a/y": "",
            "a/b/y": "",
            "a/b/c": "",
            "a/x/b/c": "",
            "a/q/z": "",
            "a/q/r/z": "",
        },
    )


def test_doublestar_forms(tmp_path: Path) -> None:
    visible = assert_same_as_git(
        tmp_path,
        {
            ".gitignore": ("**/foo\na/**/b\n**/x/**\nc/**\n!c/keep\nm**n\np/q**/r\n/**/deep.txt\n"),
            "foo": "",
            "s/t/foo": "",
            "a/b": "",
            "a/1/2/b": "",
            "a/1/bb": "",
            "z/x/1": "",
            "y/x": "",
            "c/keep": "",
            "c/other": "",
            "mXn": "",
            "m/n/mYn": "",
            "p/qq/r": "",
            "p/qq/s/r": "",
            "p/q/r": "",
            "u/v/deep.txt": "",
        },
    )
    # git hands only the part after the literal prefix "p/q" to wildmatch, and there a
    # leading "**/" crosses directories.
    assert "p/qq/s/r" not in visible
    assert "c/keep" in visible


def test_character_classes(tmp_path: Path) -> None:
    names = ["a.txt", "b.txt", "d.txt", "a.md", "b.md", "c.md", "-z", "xz", "a1", "d1", "]x"]
    names += ["5.dat", "x.dat", "x-y", "xby", "[ab", "Ab", "ab"]
    spec: dict[str, str | bytes | None] = {n: "" for n in names}
    spec[".gitignore"] = (
        "[abc].txt\n[!a].md\n![^b].md\n[a-c]1\n[]]x\n[[:digit:]]*.dat\n"
        "[!-]z\nx[a-]y\n[ab\n[[:upper:]]b\n"
    )
    assert_same_as_git(tmp_path, spec)


POSIX_CLASSES = ["alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower", "print"]
POSIX_CLASSES += ["punct", "space", "upper", "xdigit"]


def test_posix_classes_on_every_ascii_byte(tmp_path: Path) -> None:
    spec: dict[str, str | bytes | None] = {
        f"{cls}/.gitignore": f"x[[:{cls}:]]\ny[![:{cls}:]]\n" for cls in POSIX_CLASSES
    }
    repo = new_repo(tmp_path, spec)
    # git's classes are ASCII only; a few high bytes stand for the rest.
    tested = [b for b in range(1, 128) if b != ord("/")] + [0x80, 0xA0, 0xC3, 0xFF]
    for cls in POSIX_CLASSES:
        for byte in tested:
            for lead in (b"x", b"y"):
                (repo / cls / os.fsdecode(lead + bytes([byte]))).write_bytes(b"")
    visible = git_visible(repo)
    assert len(visible) > len(tested) * len(POSIX_CLASSES) // 2
    assert takeback_visible(repo) == visible


def test_escapes_comments_and_trailing_spaces(tmp_path: Path) -> None:
    visible = assert_same_as_git(
        tmp_path,
        {
            ".gitignore": (
                "\\#hash\n\\!bang\n#comment\ntrail   \nkeep\\ \n  lead\nwin\r\nstar\\*\nq\\?\n"
            ),
            "#hash": "",
            "!bang": "",
            "#comment": "",
            "trail": "",
            "trail   ": "",
            "keep ": "",
            "keep": "",
            "  lead": "",
            "lead": "",
            "win": "",
            "star*": "",
            "starx": "",
            "q?": "",
            "qx": "",
        },
    )
    assert {"keep", "lead", "#comment", "starx", "qx", "trail   "} <= visible


def test_utf8_bom_and_invalid_bytes(tmp_path: Path) -> None:
    spec: dict[str, str | bytes | None] = {
        ".gitignore": b"\xef\xbb\xbfbom\n\xff\xfe*.bin\n*.x\xff\n?\n\xc3\xa9*\n",
        "bom": "",
        "a.bin": "",
        "\xe9t\xe9.txt": "",  # 'été' in UTF-8: '?' matches one byte, not one character
        "\xe9": "",
        "z": "",
    }
    assert_same_as_git(tmp_path, spec)
    repo = tmp_path / "repo"
    (repo / os.fsdecode(b"f.x\xff")).write_bytes(b"")
    (repo / os.fsdecode(b"g\xff")).write_bytes(b"")
    assert takeback_visible(repo) == git_visible(repo)


def test_info_exclude_has_lowest_precedence(tmp_path: Path) -> None:
    repo = new_repo(
        tmp_path,
        {
            ".gitignore": "!keep.tmp\n",
            "a.tmp": "",
            "keep.tmp": "",
            "sub/b.tmp": "",
            "sub/secret/x": "",
        },
    )
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_bytes(b"*.tmp\n/sub/secret/\n")
    visible = git_visible(repo)
    assert visible == {".gitignore", "keep.tmp"}
    assert takeback_visible(repo) == visible


def test_gitdir_file_is_followed(tmp_path: Path) -> None:
    repo = tmp_path / "work"
    repo.mkdir()
    git(repo, "init", "-q", "--separate-git-dir", str(tmp_path / "store.git"))
    assert (repo / ".git").is_file()
    (tmp_path / "store.git" / "info").mkdir(exist_ok=True)
    (tmp_path / "store.git" / "info" / "exclude").write_bytes(b"*.o\n")
    make_tree(repo, {"a.o": "", "a.c": "", "x.log": "", ".gitignore": "*.log\n"})
    assert takeback_visible(repo) == git_visible(repo) == {"a.c", ".gitignore"}
    git(repo, "add", "-f", "x.log")
    index = GitIndex.load(str(repo))
    assert index is not None and index.is_tracked("x.log")
    # A relative gitdir is taken from the worktree root.
    (repo / ".git").write_text("gitdir: ../store.git\n")
    index = GitIndex.load(str(repo))
    assert index is not None and index.is_tracked("x.log")
    assert IgnoreRules.for_root(str(repo), exclude_env=False).ignored("a.o", False)


def test_takebackignore_overrides_gitignore_at_same_level(tmp_path: Path) -> None:
    spec: dict[str, str | bytes | None] = {
        ".gitignore": "*.log\nsecret.txt\n",
        ".takebackignore": "!a.log\nprivate/\n",
        "a.log": "",
        "b.log": "",
        "secret.txt": "",
        "private/x": "",
        "sub/.gitignore": "!b.log\n",
        "sub/.takebackignore": "b.log\n!secret.txt\n",
        "sub/b.log": "",
        "sub/a.log": "",
        "sub/secret.txt": "",
        "sub/deeper/a.log": "",
    }
    repo = new_repo(tmp_path, spec)
    visible = takeback_visible(repo)

    # git's view: the same tree with each .takebackignore appended to its .gitignore.
    twin = new_repo(tmp_path, spec, name="twin")
    for extra in list(twin.rglob(".takebackignore")):
        gitignore = extra.with_name(".gitignore")
        gitignore.write_bytes((_read(str(gitignore)) or b"") + b"\n" + extra.read_bytes())
        extra.unlink()
    expected = git_visible(twin)
    assert {p for p in visible if not p.endswith(".takebackignore")} == expected
    assert "a.log" in visible and "sub/b.log" not in visible and "sub/secret.txt" in visible


def test_builtin_env_patterns_and_extra_patterns(tmp_path: Path) -> None:
    repo = new_repo(
        tmp_path,
        {
            ".env": "",
            ".env.local": "",
            ".env.example": "",
            "sub/.env": "",
            "environment": "",
            "notes.md": "",
            "draft.md": "",
        },
    )
    assert takeback_visible(repo, exclude_env=False) == git_visible(repo)
    assert takeback_visible(repo, exclude_env=True) == {"environment", "notes.md", "draft.md"}
    (repo / ".gitignore").write_bytes(b"!.env.example\n")
    assert takeback_visible(repo, exclude_env=True, extra_patterns=("draft.md",)) == {
        ".env.example",
        "environment",
        "notes.md",
        ".gitignore",
    }


def test_descend_reuses_rules_and_keys() -> None:
    root = IgnoreRules.for_root("/nonexistent", exclude_env=True)
    assert root.descend("a", None, None) is root
    assert root.descend("a", b"", b"# only a comment\n\n") is root
    one = root.descend("", b"*.log\n", None)
    two = root.descend("", b"*.log\n", None)
    assert one is not root and one.key == two.key and hash(one.key) == hash(two.key)
    assert one.key != root.key
    sub = one.descend("a", b"!x.log\n", None)
    assert sub.key != one.key
    assert not sub.ignored("a/x.log", False) and sub.ignored("a/y.log", False)
    # The root's rules and its own .gitignore share one level; a later dir adds one.
    assert repr(one) == "IgnoreRules(levels=[''])"
    assert repr(sub) == "IgnoreRules(levels=['', 'a'])"
    # Lines that can never match (unterminated bracket) leave the rules as they were.
    assert root.descend("a", b"[abc\nfoo\\\n", None) is root


def test_ignored_answers_for_deep_children() -> None:
    root = IgnoreRules.for_root("/nonexistent", exclude_env=False)
    root = root.descend("", b"*.tmp\n/top/\nsrc/gen/\n!keep.tmp\n", None)
    src = root.descend("src", b"gen2/\n", None)
    assert src.ignored("src/gen", True)
    assert not src.ignored("src/gen", False)
    deep = src.descend("src/a", None, None)
    assert deep is src
    assert deep.ignored("src/a/x.tmp", False)
    assert not deep.ignored("src/a/keep.tmp", False)
    assert not deep.ignored("src/a/top", True)
    assert deep.ignored("src/a/gen2", True)


def test_rules_are_immutable() -> None:
    rules = IgnoreRules.for_root("/nonexistent")
    with pytest.raises(AttributeError):
        rules.key = ()  # type: ignore[misc]


def test_non_ascii_folders_with_anchored_patterns(tmp_path: Path) -> None:
    assert_same_as_git(
        tmp_path,
        {
            ".gitignore": "\xe9t\xe9/sub/y\n",
            "\xe9t\xe9/.gitignore": "/x\nsub/z\n[\xe9]*\n",
            "\xe9t\xe9/x": "",
            "\xe9t\xe9/sub/x": "",
            "\xe9t\xe9/sub/y": "",
            "\xe9t\xe9/sub/z": "",
            "\xe9t\xe9/sub/\xe9a": "",
            "\xe9t\xe9/sub/\xc3": "",
            "\xe9t\xe9/sub/.gitignore": "/\xe9a\n",
            "x/\xe9t\xe9/sub/y": "",
        },
    )


# --------------------------------------------------------------------------- properties

NAMES = ["a", "b", "ab", "a.log", "b.log", "d", "e"]
PATTERNS = [
    "*.log", "!a.log", "d/", "/a", "d/**", "**/b", "a?", "[ab]", "!d/", "!b", "d/*", "*/a",
    "/d/a", "d/**/b", "**/d", "!**/b", "b/", "!*.log", "*", "!a", "e/**", "!e/a", "[!a]*",
    "**", "a/", "/*.log", "\\!a", "a ", "#a", "!/d", "d/a/", "!d", "e/", "!e", "*/", "!*/",
    "a/**/b", "/**/a", "d/b", "!d/b", "ab/", "[a-b].log",
]  # fmt: skip


@dataclass
class Node:
    entries: dict[str, Node | None] = field(default_factory=dict)  # None: a file
    gitignore: list[str] | None = None
    takebackignore: list[str] | None = None


def _node_strategy(depth: int) -> st.SearchStrategy[Node]:
    child: st.SearchStrategy[Node | None] = st.none()
    if depth < 3:
        child = st.one_of(st.none(), st.deferred(lambda: _node_strategy(depth + 1)))
    return st.builds(
        Node,
        entries=st.dictionaries(st.sampled_from(NAMES), child, max_size=4),
        gitignore=st.none() | st.lists(st.sampled_from(PATTERNS), max_size=4),
        takebackignore=st.none() | st.lists(st.sampled_from(PATTERNS), max_size=2),
    )


def _lines(patterns: list[str] | None) -> bytes | None:
    return None if patterns is None else "".join(p + "\n" for p in patterns).encode()


def _write_node(folder: Path, node: Node, index: dict[str, Node], rel: str) -> None:
    index[rel] = node
    on_disk_ignore = [*(node.gitignore or []), *(node.takebackignore or [])]
    if node.gitignore is not None or node.takebackignore is not None:
        # git gets both files as one .gitignore; takeback reads them apart (see below).
        (folder / ".gitignore").write_bytes(_lines(on_disk_ignore) or b"")
    for name, child in node.entries.items():
        if child is None:
            (folder / name).write_bytes(b"")
        else:
            (folder / name).mkdir()
            _write_node(folder / name, child, index, f"{rel}/{name}" if rel else name)


@pytest.fixture(scope="module")
def scratch_repo() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="takeback-ignore-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        (repo / ".git" / "info").mkdir(exist_ok=True)
        yield repo


def _reset(repo: Path) -> None:
    for child in repo.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tree=_node_strategy(0), exclude=st.lists(st.sampled_from(PATTERNS), max_size=3))
def test_random_trees_agree_with_git(scratch_repo: Path, tree: Node, exclude: list[str]) -> None:
    repo = scratch_repo
    _reset(repo)
    (repo / ".git" / "info" / "exclude").write_bytes(_lines(exclude) or b"")
    nodes: dict[str, Node] = {}
    _write_node(repo, tree, nodes, "")

    def files(dir_rel: str) -> tuple[bytes | None, bytes | None]:
        node = nodes[dir_rel]
        return _lines(node.gitignore), _lines(node.takebackignore)

    assert takeback_visible(repo, ignore_files=files) == git_visible(repo)


# Raw pattern text from wildmatch's special characters, to reach its corner cases.
TOKENS = [
    "a", "b", "*", "**", "?", "/", "[", "]", "!", "^", "-", "\\", " ", "#", ".", "[:alpha:]",
    "[:digit:]", "[:bogus:]", "\xe9",
]  # fmt: skip
FILE_NAMES = [
    "a", "b", "ab", "ba", "a.b", "-", "[", "]", "!", "^", "#x", "x y", "a ", "*", "?", "\\",
    "\xe9", "A", "1", "a-b", "[a]", ".a",
]  # fmt: skip
DIRS = ["", "a", "b", "ab", "a/b", "a/ab", "b/a/b", "a b"]


@pytest.fixture(scope="module")
def fixed_tree_repo() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="takeback-wild-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        for folder in DIRS:
            (repo / folder).mkdir(parents=True, exist_ok=True)
        for folder in DIRS:
            for name in FILE_NAMES:
                if not (repo / folder / name).exists():
                    (repo / folder / name).write_bytes(b"")
        yield repo


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    root_patterns=st.lists(st.lists(st.sampled_from(TOKENS), max_size=6).map("".join), max_size=4),
    sub_patterns=st.lists(st.lists(st.sampled_from(TOKENS), max_size=5).map("".join), max_size=2),
)
def test_random_pattern_text_agrees_with_git(
    fixed_tree_repo: Path, root_patterns: list[str], sub_patterns: list[str]
) -> None:
    repo = fixed_tree_repo
    (repo / ".gitignore").write_bytes("".join(p + "\n" for p in root_patterns).encode())
    (repo / "a" / ".gitignore").write_bytes("".join(p + "\n" for p in sub_patterns).encode())
    assert takeback_visible(repo) == git_visible(repo)


# --------------------------------------------------------------------------- git index


def _tracked_repo(tmp_path: Path) -> Path:
    repo = new_repo(
        tmp_path,
        {
            ".gitignore": "*.log\n",
            "a.txt": "",
            "x.log": "",
            "dir/sub/deep.txt": "",
            "dir2/f": "",
            "name with space": "",
            "\xe9t\xe9": "",
            "untracked.txt": "",
            "dirx/only-untracked": "",
        },
    )
    git(repo, "add", ".gitignore", "a.txt", "dir", "dir2", "name with space", "\xe9t\xe9")
    git(repo, "add", "-f", "x.log")
    return repo


def _check_index(repo: Path) -> GitIndex:
    index = GitIndex.load(str(repo))
    assert index is not None
    for path in [".gitignore", "a.txt", "x.log", "dir/sub/deep.txt", "dir2/f", "\xe9t\xe9"]:
        assert index.is_tracked(path), path
    assert index.is_tracked("name with space")
    for path in ["untracked.txt", "dir", "dir/sub", "dirx/only-untracked", "dir2/", "b.log"]:
        assert not index.is_tracked(path), path
    assert index.has_tracked_under("dir")
    assert index.has_tracked_under("dir/sub")
    assert index.has_tracked_under("dir2")
    assert index.has_tracked_under("")
    assert not index.has_tracked_under("dir/sub/deep.txt")
    assert not index.has_tracked_under("dirx")
    assert not index.has_tracked_under("di")
    assert not index.has_tracked_under("dir/su")
    return index


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_git_index_versions(tmp_path: Path, version: str) -> None:
    repo = _tracked_repo(tmp_path)
    # Intent-to-add sets an extended flag, which index versions 3 and 4 store.
    (repo / "later.txt").write_bytes(b"")
    if version != "2":
        git(repo, "add", "-N", "later.txt")
    git(repo, "update-index", "--index-version", version)
    assert (repo / ".git" / "index").read_bytes()[4:8] == int(version).to_bytes(4, "big")
    index = _check_index(repo)
    assert index.is_tracked("later.txt") == (version != "2")


def test_git_index_split_index(tmp_path: Path) -> None:
    repo = _tracked_repo(tmp_path)
    git(repo, "update-index", "--split-index")
    (repo / "new.txt").write_bytes(b"")
    git(repo, "add", "new.txt")
    assert list((repo / ".git").glob("sharedindex.*"))
    index = _check_index(repo)
    assert index.is_tracked("new.txt")


def test_git_index_sha256(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256")
    make_tree(repo, {"a": "", "d/b": ""})
    git(repo, "add", ".")
    index = GitIndex.load(str(repo))
    assert index is not None
    assert index.is_tracked("a") and index.is_tracked("d/b") and index.has_tracked_under("d")


def test_git_index_sparse_directory_entries(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, {"in/a": "", "out/b": "", "out/deep/c": "", "top": ""})
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    git(repo, "sparse-checkout", "set", "--cone", "--sparse-index", "in")
    assert b"out/\0" in (repo / ".git" / "index").read_bytes()
    index = GitIndex.load(str(repo))
    assert index is not None
    assert index.is_tracked("in/a") and index.is_tracked("top")
    assert index.is_tracked("out/b") and index.is_tracked("out/deep/c")
    assert index.has_tracked_under("out") and index.has_tracked_under("out/deep")
    assert not index.is_tracked("out") and not index.has_tracked_under("outer")


def test_git_index_absent(tmp_path: Path) -> None:
    assert GitIndex.load(str(tmp_path)) is None
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    assert GitIndex.load(str(repo)) is None  # no index until the first add
    (repo / ".git" / "index").write_bytes(b"DIRC\0\0\0\x07garbage")
    assert GitIndex.load(str(repo)) is None
    (tmp_path / "notrepo").mkdir()
    (tmp_path / "notrepo" / ".git").write_text("not a gitdir line\n")
    assert GitIndex.load(str(tmp_path / "notrepo")) is None


def test_git_index_read_again_when_git_rewrites_it(tmp_path: Path) -> None:
    """The index read last is kept by its stat: a rewrite by git is always read again."""
    repo = new_repo(tmp_path, {"a": "", "b": ""})
    git(repo, "add", "a")
    first = GitIndex.load(str(repo))
    assert first is not None and first.is_tracked("a") and not first.is_tracked("b")
    assert GitIndex.load(str(repo)) is first  # the same file: not read again
    git(repo, "add", "b")
    again = GitIndex.load(str(repo))
    assert again is not None and again.is_tracked("a") and again.is_tracked("b")
    git(repo, "rm", "-q", "--cached", "a")
    last = GitIndex.load(str(repo))
    assert last is not None and not last.is_tracked("a") and last.is_tracked("b")


def test_git_index_names_that_are_not_utf8(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, {"ok.txt": ""})
    raw = os.path.join(os.fsencode(repo), b"caf\xe9", b"\xff.bin")
    os.makedirs(os.path.dirname(raw))
    with open(raw, "wb") as f:
        f.write(b"x")
    git(repo, "add", "-A")
    index = GitIndex.load(str(repo))
    assert index is not None
    assert index.is_tracked(os.fsdecode(b"caf\xe9/\xff.bin")) and index.is_tracked("ok.txt")
    assert index.has_tracked_under(os.fsdecode(b"caf\xe9"))
    assert not index.has_tracked_under("caf")
