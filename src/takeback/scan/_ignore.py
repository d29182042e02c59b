"""Scan layer: git-compatible ignore rules, compiled once per directory level.

The scan decides which paths are in scope exactly as ``git status`` would: patterns from
``.git/info/exclude`` (lowest precedence), then each directory's ``.gitignore`` from the
root down, a deeper file overriding a shallower one and, within one file, the last matching
line winning. takeback adds built-in patterns (``.env``, ``.env.*``) and caller patterns at
the root just above ``info/exclude``, and reads ``.takebackignore`` as if appended to the
``.gitignore`` beside it.

Matching follows git's ``wildmatch`` byte for byte. Both patterns and paths are turned into
"byte strings" (each byte one code point, via latin-1) so that ``?`` and ``[...]`` match one
byte as in git, whatever the encoding of a name. Each directory level's patterns are compiled
once (and shared between identical files) into alternations, one per kind of entry (file,
directory) and per last character a match can end with. Alternatives run from the last
pattern to the first and each is its own numbered group, so the first one to match is the
pattern git would pick and ``Match.lastindex`` names it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import NamedTuple

from .._fs import read_regular
from ._gitindex import common_git_dir, resolve_git_dir

# Patterns takeback never snapshots unless a .gitignore or caller pattern re-includes them.
_BUILTIN_PATTERNS = (".env", ".env.*")

# git's is_glob_special(): where the literal prefix of a pattern ends.
_GLOB_SPECIAL = re.compile(r"[*?\[\\]")

_SLASH = ord("/")
_ALL_BYTES = frozenset(range(256))


def _chars(*spans: tuple[int, int]) -> frozenset[int]:
    return frozenset(c for lo, hi in spans for c in range(lo, hi + 1))


# POSIX classes as git defines them: ASCII only, and git's isspace() leaves out \v and \f.
_POSIX_CLASSES: dict[str, frozenset[int]] = {
    "alnum": _chars((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)),
    "alpha": _chars((0x41, 0x5A), (0x61, 0x7A)),
    "blank": frozenset((0x09, 0x20)),
    "cntrl": _chars((0x00, 0x1F), (0x7F, 0x7F)),
    "digit": _chars((0x30, 0x39)),
    "graph": _chars((0x21, 0x7E)),
    "lower": _chars((0x61, 0x7A)),
    "print": _chars((0x20, 0x7E)),
    "punct": _chars((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)),
    "space": frozenset((0x09, 0x0A, 0x0D, 0x20)),
    "upper": _chars((0x41, 0x5A)),
    "xdigit": _chars((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)),
}


def _bytes_view(text: str) -> str:
    """Map a str path or pattern to one code point per byte of its file-system encoding."""
    return text if text.isascii() else os.fsencode(text).decode("latin-1")


# --------------------------------------------------------------------------- parsing


def _trim_trailing_spaces(line: str) -> str:
    """Drop unescaped trailing spaces (spaces only: git keeps tabs)."""
    if not line.endswith(" "):
        return line
    last_space = -1
    i = 0
    n = len(line)
    while i < n:
        char = line[i]
        if char == " ":
            if last_space < 0:
                last_space = i
        elif char == "\\":
            i += 1
            if i >= n:
                # A lone trailing backslash: git leaves the line untouched.
                return line
            last_space = -1
        else:
            last_space = -1
        i += 1
    return line[:last_space] if last_space >= 0 else line


def _pattern_lines(data: bytes) -> tuple[str, ...]:
    """Split an ignore file into pattern lines, in git's reading of the format."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines: list[str] = []
    # latin-1 keeps every byte, so invalid UTF-8 cannot fail and matches byte for byte.
    for raw in data.decode("latin-1").split("\n"):
        # git tests emptiness and '#' before it strips the CR of a CRLF line.
        if not raw or raw[0] == "#":
            continue
        line = raw[:-1] if raw.endswith("\r") else raw
        nul = line.find("\0")
        if nul >= 0:
            # git handles each line as a C string from here on.
            line = line[:nul]
        lines.append(_trim_trailing_spaces(line))
    return tuple(lines)


# --------------------------------------------------------------------------- translation


def _class_regex(members: Iterable[int]) -> str:
    """Write a regex character class matching exactly the given byte values."""
    codes = sorted(set(members))
    if not codes:
        return "(?!)"
    parts: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], -2]:
        if code == prev + 1:
            prev = code
            continue
        parts.append(f"\\x{start:02x}" if start == prev else f"\\x{start:02x}-\\x{prev:02x}")
        start = prev = code
    return "[" + "".join(parts) + "]"


def _bracket(pattern: str, pos: int) -> tuple[str, int] | None:
    """Translate the bracket expression opening at ``pattern[pos]``.

    Returns:
        The regex and the index just past the closing ']', or None when git could never
        match the pattern (unterminated bracket, unknown ``[:class:]``).

    """
    n = len(pattern)
    p = pos + 1
    negated = p < n and pattern[p] in "!^"
    if negated:
        p += 1
    members: set[int] = set()
    previous = -1  # the last single member, the low end of a following range
    first = True
    while True:
        if p >= n:
            return None
        char = pattern[p]
        if char == "]" and not first:
            break
        first = False
        if char == "\\":
            p += 1
            if p >= n:
                return None
            previous = ord(pattern[p])
            members.add(previous)
        elif char == "-" and previous >= 0 and p + 1 < n and pattern[p + 1] != "]":
            p += 1
            high = pattern[p]
            if high == "\\":
                p += 1
                if p >= n:
                    return None
                high = pattern[p]
            members.update(range(previous, ord(high) + 1))
            previous = -1
        elif char == "[" and pattern.startswith(":", p + 1):
            close = pattern.find("]", p + 2)
            if close < 0:
                return None
            if close - (p + 2) < 1 or pattern[close - 1] != ":":
                # Not a [:name:] after all: the '[' is an ordinary member.
                previous = ord("[")
                members.add(previous)
            else:
                chars = _POSIX_CLASSES.get(pattern[p + 2 : close - 1])
                if chars is None:
                    return None
                members.update(chars)
                previous = -1
                p = close
        else:
            previous = ord(char)
            members.add(previous)
        p += 1
    chosen = (_ALL_BYTES - members) if negated else members
    # Under WM_PATHNAME no bracket matches '/'; in basename matching there is no '/' anyway.
    return _class_regex(chosen - {_SLASH}), p + 1


class _Translation(NamedTuple):
    regex: str
    last: str | None  # the character every match ends with, when the pattern fixes it


def _translate(pattern: str, start: int, *, in_name: bool) -> _Translation | None:
    """Translate ``pattern[start:]`` from wildmatch (with WM_PATHNAME) to a regex.

    ``start`` counts as the beginning of the pattern for the ``**`` rules: git compares the
    literal prefix of an anchored pattern separately and hands only the rest to wildmatch.
    With ``in_name`` the regex only ever sees a single name, which has no '/': then ``.``
    can stand for ``[^/]``, which the regex engine runs faster.

    Returns:
        The translation, or None when git could never match the pattern.

    """
    any_char = "." if in_name else "[^/]"
    out: list[str] = []
    last: str | None = None
    n = len(pattern)
    i = start
    while i < n:
        char = pattern[i]
        last = None
        if char == "\\":
            if i + 1 >= n:
                # A trailing backslash must match a NUL: never.
                return None
            last = pattern[i + 1]
            out.append(re.escape(last))
            i += 2
        elif char == "?":
            out.append(any_char)
            i += 1
        elif char == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            globstar = j - i >= 2 and (i == start or pattern[i - 1] == "/")
            if globstar and j == n:
                out.append(".*")
                i = j
            elif globstar and pattern[j] == "/":
                # "**/" may stand for no directory at all: then the slash goes too.
                out.append("" if in_name else "(?:.*/)?")
                i = j + 1
            elif globstar and pattern.startswith("\\/", j):
                # An escaped slash gets the crossing '**' but not the zero-directory case.
                out.append(".*")
                i = j
            else:
                out.append(any_char + "*")
                i = j
        elif char == "[":
            bracket = _bracket(pattern, i)
            if bracket is None:
                return None
            regex, i = bracket
            out.append(regex)
        else:
            last = char
            out.append(re.escape(char))
            i += 1
    return _Translation("".join(out), last)


class _Pattern(NamedTuple):
    in_name: str  # regex for the entry's name alone
    in_path: str  # regex for the path below the base (for basename patterns: unused)
    last: str | None
    negative: bool
    dir_only: bool
    basename: bool  # matched against the entry's name, not its path below the base


def _parse_pattern(line: str) -> _Pattern | None:
    """Parse one ignore line; None when it can match nothing."""
    negative = line.startswith("!")
    body = line[1:] if negative else line
    dir_only = body.endswith("/")
    if dir_only:
        body = body[:-1]
    if "/" not in body:
        name = _translate(body, 0, in_name=True)
        if name is None:
            return None
        return _Pattern(name.regex, name.regex, name.last, negative, dir_only, True)
    if body.startswith("/"):
        body = body[1:]
    special = _GLOB_SPECIAL.search(body)
    prefix = special.start() if special else len(body)
    name = _translate(body, prefix, in_name=True)
    path = _translate(body, prefix, in_name=False)
    if name is None or path is None:
        return None
    literal = re.escape(body[:prefix])
    last = path.last if prefix < len(body) else (body[-1] if body else None)
    return _Pattern(literal + name.regex, literal + path.regex, last, negative, dir_only, False)


# --------------------------------------------------------------------------- compiled levels

_Match = Callable[[str, int], re.Match[str] | None]
# A compiled alternation and, per group, 2 * pattern index + (1 if the pattern ignores).
_Matcher = tuple[_Match, tuple[int, ...]]


class _Dispatch(NamedTuple):
    """Alternations split by the last character of the string they are tried on.

    Most patterns end in a literal (``*.log``, ``build``), and a name can only match
    those ending in its own last character. Trying just those keeps every alternation short,
    which matters more than anything else for speed: the regex engine tries alternatives
    one by one.
    """

    by_last: dict[str, _Matcher]
    default: _Matcher | None  # for last characters no pattern ends with


_EMPTY_DISPATCH = _Dispatch({}, None)


def _matcher(patterns: Sequence[tuple[int, _Pattern]], in_name: bool) -> _Matcher:
    # Last pattern first: the first alternative that matches is the one git would pick.
    ordered = list(reversed(patterns))
    body = "|".join(f"({p.in_name if in_name else p.in_path}\\Z)" for _, p in ordered)
    codes = (-1, *(2 * index + (not p.negative) for index, p in ordered))
    return re.compile(body, re.DOTALL).match, codes


def _dispatch(patterns: Sequence[tuple[int, _Pattern]], in_name: bool) -> _Dispatch:
    if not patterns:
        return _EMPTY_DISPATCH
    anywhere = [item for item in patterns if item[1].last is None]
    by_last: dict[str, _Matcher] = {}
    for char in {p.last for _, p in patterns if p.last is not None}:
        chosen = [item for item in patterns if item[1].last in (None, char)]
        by_last[char] = _matcher(chosen, in_name)
    return _Dispatch(by_last, _matcher(anywhere, in_name) if anywhere else None)


class _Variant(NamedTuple):
    """The patterns of one level that apply to one kind of entry (file or directory)."""

    # Every pattern against the name: right when the path below the base is the name.
    whole: _Dispatch
    # Otherwise basename patterns against the name and anchored ones against the path
    # below the base; the larger code of the two wins, being the later pattern.
    names: _Dispatch
    paths: _Dispatch


def _variant(patterns: Sequence[tuple[int, _Pattern]]) -> _Variant | None:
    if not patterns:
        return None
    return _Variant(
        whole=_dispatch(patterns, True),
        names=_dispatch([item for item in patterns if item[1].basename], True),
        paths=_dispatch([item for item in patterns if not item[1].basename], False),
    )


@lru_cache(maxsize=512)
def _compile_level(lines: tuple[str, ...]) -> tuple[_Variant | None, _Variant | None] | None:
    """Compile one level's pattern lines into (file variant, directory variant).

    The result does not depend on the level's directory, so identical ignore files anywhere
    in the tree share one compilation. None when no line can match anything.
    """
    parsed = [(i, p) for i, p in enumerate(map(_parse_pattern, lines)) if p is not None]
    if not parsed:
        return None
    for_files = [item for item in parsed if not item[1].dir_only]
    return _variant(for_files), _variant(parsed)


class _Level(NamedTuple):
    base: str  # the directory the patterns came from, as given (str form)
    start: int  # offset of the path below ``base`` in a child's byte-view path
    lines: tuple[str, ...]
    variants: tuple[_Variant | None, _Variant | None]  # indexed by is_dir


def _make_level(base: str, lines: tuple[str, ...]) -> _Level | None:
    variants = _compile_level(lines)
    if variants is None:
        return None
    view = _bytes_view(base)
    return _Level(base, len(view) + 1 if view else 0, lines, variants)


# --------------------------------------------------------------------------- public API


class IgnoreRules:
    """The ignore rules in force inside one directory of the workspace.

    Instances are immutable; :meth:`descend` makes the rules of a subdirectory. Paths are
    relative to the workspace root, '/'-separated, without leading slash, in the str form
    ``os.fsdecode`` gives (undecodable bytes as surrogate escapes); the root itself is ''.
    """

    __slots__ = ("_key", "_levels", "_stack")

    _levels: tuple[_Level, ...]
    _stack: tuple[tuple[int, tuple[_Variant | None, _Variant | None]], ...]
    _key: tuple[tuple[str, str], ...]

    def __init__(self, levels: tuple[_Level, ...]) -> None:
        """Wrap compiled levels, shallowest first; use :meth:`for_root` to start."""
        set_attr = object.__setattr__
        set_attr(self, "_levels", levels)
        # Deepest level first: that is the order git consults them in.
        set_attr(self, "_stack", tuple((lv.start, lv.variants) for lv in reversed(levels)))
        set_attr(self, "_key", tuple((lv.base, "\n".join(lv.lines)) for lv in levels))

    def __setattr__(self, name: str, value: object) -> None:
        # Rules are shared between directories and cached by key: they must not change.
        raise AttributeError(f"{type(self).__name__} is immutable")

    @property
    def key(self) -> object:
        """A hashable value; rules with equal keys decide every path the same way."""
        return self._key

    def __repr__(self) -> str:
        bases = ", ".join(repr(lv.base) for lv in self._levels)
        return f"IgnoreRules(levels=[{bases}])"

    @classmethod
    def for_root(
        cls, root: str, *, exclude_env: bool = True, extra_patterns: Sequence[str] = ()
    ) -> IgnoreRules:
        """Build the rules that apply at the workspace root before its ``.gitignore``.

        Sources, lowest precedence first: the repository's ``info/exclude`` (found through
        ``root/.git``, a directory or a ``gitdir:`` file; a linked worktree uses its common
        directory's, as git does), the built-in ``.env`` and ``.env.*`` patterns, then
        ``extra_patterns``. ``root/.gitignore`` is not read here: the walker passes it to
        ``descend('', ...)`` like any other directory's.

        Args:
            root: The workspace root on disk.
            exclude_env: Whether to add the built-in ``.env`` patterns.
            extra_patterns: More lines in ``.gitignore`` syntax, in increasing precedence.

        Returns:
            The root rules; they have no level at all when no source has a pattern.

        """
        lines: list[str] = []
        git_dir = resolve_git_dir(root)
        if git_dir is not None:
            exclude = os.path.join(common_git_dir(git_dir), "info", "exclude")
            # git ignores a missing or unreadable info/exclude as well; a FIFO is not read.
            data = read_regular(exclude, follow=True)
            if data:
                lines.extend(_pattern_lines(data))
        if exclude_env:
            lines.extend(_BUILTIN_PATTERNS)
        for pattern in extra_patterns:
            lines.extend(_pattern_lines(os.fsencode(pattern)))
        level = _make_level("", tuple(lines))
        return cls(() if level is None else (level,))

    def descend(
        self, dir_rel: str, gitignore: bytes | None, takebackignore: bytes | None
    ) -> IgnoreRules:
        """Make the rules in force inside the directory ``dir_rel``.

        Args:
            dir_rel: The directory, a child of the one these rules are for ('' for the root,
                whose own ``.gitignore`` is passed this way too).
            gitignore: Contents of ``dir_rel/.gitignore``, None when absent.
            takebackignore: Contents of ``dir_rel/.takebackignore``, None when absent; its
                lines take precedence over the ``.gitignore`` beside it.

        Returns:
            ``self`` when the files add no pattern (so the key is unchanged), else new rules.

        """
        lines: tuple[str, ...] = ()
        if gitignore:
            lines = _pattern_lines(gitignore)
        if takebackignore:
            lines += _pattern_lines(takebackignore)
        if not lines:
            return self
        levels = self._levels
        if levels and levels[-1].base == dir_rel:
            # Same directory (root rules, then the root's .gitignore): one list, one regex.
            lines = levels[-1].lines + lines
            levels = levels[:-1]
        level = _make_level(dir_rel, lines)
        if level is None:
            return self if levels is self._levels else IgnoreRules(levels)
        return IgnoreRules((*levels, level))

    def ignored(self, rel_path: str, is_dir: bool) -> bool:
        """Tell whether an entry of the directory these rules are for is ignored.

        Only the entry's own rules are consulted: the walker never enters an ignored
        directory, which is how git keeps everything below one ignored too.

        Args:
            rel_path: The entry, a direct child of this rules' directory.
            is_dir: Whether it is a directory (a symlink to one is not, as for git).

        Returns:
            True when the last matching pattern of the deepest level with a match ignores the
            entry; False when it re-includes it (``!``) or nothing matches.

        """
        path = rel_path if rel_path.isascii() else os.fsencode(rel_path).decode("latin-1")
        cut = path.rfind("/") + 1
        name = path[cut:] if cut else path
        last = name[-1:]
        for start, variants in self._stack:
            variant = variants[is_dir]
            if variant is None:
                continue
            if start == cut:
                # The path below this level's base is the name itself: one regex decides.
                hit = variant.whole.by_last.get(last, variant.whole.default)
                if hit is not None:
                    found = hit[0](name, 0)
                    if found is not None:
                        return bool(hit[1][found.lastindex or 0] & 1)
                continue
            code = -1
            hit = variant.names.by_last.get(last, variant.names.default)
            if hit is not None:
                found = hit[0](name, 0)
                if found is not None:
                    code = hit[1][found.lastindex or 0]
            hit = variant.paths.by_last.get(last, variant.paths.default)
            if hit is not None:
                found = hit[0](path, start)
                if found is not None:
                    code = max(code, hit[1][found.lastindex or 0])
            if code >= 0:
                return bool(code & 1)
        return False


__all__ = ["IgnoreRules"]
