"""Scan layer: the folder cache a scan keeps between runs, saved in shards.

The cache holds one short record per folder (see ``_Fast``). It is saved in the store's
key-value rows, split into shards by a hash of the folder's path, under a header row
(``CACHE_KEY``) that holds the cache's *token*: 16 random bytes, new with every saved
cache, then the number of shards when it is not ``SHARDS``. A scan that changed a few
folders rewrites only their shards and the header (tens of kilobytes) instead of the
whole cache (about 10 bytes per file: a megabyte at 100,000 files, written and synced on
every snapshot).

The number of shards follows the number of folders (about ``PER_SHARD`` records in each,
``SHARDS`` at the least): with a fixed number, a shard of a million files' cache held 50
records, and each changed folder rewrote them all. A cache that outgrows its shards four
times over (or shrinks to a quarter) is saved whole in the new number once.

Rules that keep the shards one cache:

- **Read in one statement.** The header and every shard are read by one query, so they
  are one committed state (a writer's header is never read with another's shards).
- **Written only over the cache they came from.** A scan saves its shards only if the
  header still holds the token of the cache it started from (checked in the write
  transaction); otherwise another scan saved meanwhile, and its cache stays whole.
- **A token names one content.** The process keeps the last cache it read or made,
  by token; a header with that token is that content, so the shards are not read again.
"""

from __future__ import annotations

import marshal
import os
from binascii import crc32
from collections.abc import Iterable
from typing import Any

#: The header row's key; the shards are ``CACHE_KEY + "/" + 3 hex digits``.
CACHE_KEY = "dirs-v8"
#: The format before linked folders were marked: the same shards (read, never written).
#: Its stat keys are dropped when read, so every folder is listed again once.
OLDER_KEY = "dirs-v7"
#: The format before shards: one row holding the whole cache (read, never written).
LEGACY_KEY = "dirs-v6"
#: The fewest shards (a cache of up to 4,096 folders), and the number a header of 16
#: bytes (the format's first) means.
SHARDS = 1024
#: The most shards (a cache of over 262,144 folders has more records in each).
MAX_SHARDS = 1 << 16
#: About how many folders' records a shard holds.
PER_SHARD = 4
_PREFIX = CACHE_KEY + "/"
#: How many skipped (too large) files, and how many unreadable paths, a snapshot names.
SKIPPED_NAMED = 20

#: What the cache keeps of one folder (a plain tuple: marshal stores it fast):
#: listing key, names left out, ignored folders holding tracked files, stat key, subfolder
#: names, subfolder tree ids ("" for one that could not be read), tree id, own kept-file
#: count, own too-large file names, whether its ignore decisions consulted git's index,
#: own unreadable entries (path, reason).
_Fast = tuple[Any, ...]
(_LISTING, _SKIP, _PARTIAL, _STAT, _NAMES, _IDS, _TREE, _FILES, _LARGE, _USES_INDEX, _UNREAD) = (
    range(11)
)
_FAST_LEN = 11

#: A folder holding a file with more than one hard link saves this, and a digest of its
#: linked files' inodes and link counts, as its stat key. It never equals a listing's key,
#: so every scan lists such a folder again, the watching service's too: a write through
#: the file's other name, in a folder whose watch saw nothing, is found.
LINKED_PREFIX = b"links:"


def is_linked(stat_key: bytes) -> bool:
    """Whether a saved stat key says its folder holds a file with several hard links."""
    return stat_key[:6] == LINKED_PREFIX


def shard_of(rel: str, count: int = SHARDS) -> int:
    """Return the shard that holds a folder's record, of ``count`` shards."""
    return crc32(os.fsencode(rel)) % count


def shard_count(folders: int) -> int:
    """Return how many shards a cache of ``folders`` records is saved in (a power of 2)."""
    count = SHARDS
    while count < MAX_SHARDS and count * PER_SHARD < folders:
        count *= 2
    return count


def _new_token(count: int) -> bytes:
    """Return a new header value: 16 random bytes, and the number of shards if not 1,024."""
    return os.urandom(16) + (b"" if count == SHARDS else count.to_bytes(4, "big"))


def _count_of(token: bytes) -> int | None:
    """Return the number of shards a header value names (None: not a header)."""
    if len(token) == 16:
        return SHARDS
    if len(token) == 20:
        count = int.from_bytes(token[16:], "big")
        if SHARDS <= count <= MAX_SHARDS and count & (count - 1) == 0:
            return count
    return None


class FolderCache:
    """One scan's folder cache: its token, its records, and the same records by shard.

    Never changed once made (a scan that changes folders makes a new one), so a process
    may keep it and hand it to the next scan. ``counts`` is the one exception: the sums a
    scan took of it, kept so that the next scan need not add them up again.
    """

    __slots__ = ("_linked", "counts", "folders", "shards", "token")

    def __init__(
        self, token: bytes, folders: dict[str, _Fast], shards: list[dict[str, _Fast]] | None
    ) -> None:
        self.token = token
        self.folders = folders
        #: None for a cache read in the format before shards (grouped when first needed)
        self.shards = shards
        self.counts: tuple[Any, ...] | None = None
        self._linked: frozenset[str] | None = None

    @property
    def linked(self) -> frozenset[str]:
        """The folders that hold a file with several hard links (listed by every scan)."""
        if self._linked is None:
            self._linked = frozenset(r for r, f in self.folders.items() if is_linked(f[_STAT]))
        return self._linked

    def derive(
        self, folders: dict[str, _Fast], touched: Iterable[str] | None = None
    ) -> tuple[FolderCache, dict[str, bytes | None]]:
        """Return the cache that holds ``folders`` and the rows that save it over this one.

        ``touched`` names every folder whose record was replaced, added or dropped (None:
        compare every record). The rows are the header and the shards that differ (None
        for a shard left empty).
        """
        if self.shards is None:
            return new_cache(folders)
        count = len(self.shards)
        wanted = shard_count(len(folders))
        if wanted >= 4 * count or 4 * wanted <= count:
            return new_cache(folders, was=count)
        if touched is None:
            old = self.folders
            touched = [k for k, v in folders.items() if old.get(k) is not v]
            touched.extend(k for k in old if k not in folders)
        else:
            touched = list(touched)
        shards = list(self.shards)
        copied: set[int] = set()
        for rel in touched:
            i = shard_of(rel, count)
            if i not in copied:
                shards[i] = dict(shards[i])
                copied.add(i)
            fast = folders.get(rel)
            if fast is None:
                shards[i].pop(rel, None)
            else:
                shards[i][rel] = fast
        cache = FolderCache(_new_token(count), folders, shards)
        if self._linked is not None:
            # Only the touched records can have changed: no pass over every folder.
            linked = set(self._linked).difference(touched)
            linked.update(r for r in touched if r in folders and is_linked(folders[r][_STAT]))
            cache._linked = frozenset(linked)
        rows: dict[str, bytes | None] = {CACHE_KEY: cache.token}
        for i in sorted(copied):
            rows[shard_key(i)] = marshal.dumps(shards[i]) if shards[i] else None
        remember(cache)
        return cache, rows

    def sums(self) -> tuple[Any, ...]:
        """Return what a scan that finds every folder as recorded counts (see ``Tally``).

        Summed once and kept in ``counts``: a process that scans again and again adds
        them up only when the cache changed.
        """
        if self.counts is not None:
            return self.counts
        files = n_large = n_unread = 0
        large: list[str] = []
        unread: list[tuple[str, str]] = []
        for fast in self.folders.values():
            files += fast[_FILES]
            n_large += len(fast[_LARGE])
            n_unread += len(fast[_UNREAD])
            if fast[_LARGE] and len(large) < SKIPPED_NAMED:
                large.extend(fast[_LARGE][: SKIPPED_NAMED - len(large)])
            if fast[_UNREAD] and len(unread) < SKIPPED_NAMED:
                unread.extend(fast[_UNREAD][: SKIPPED_NAMED - len(unread)])
        self.counts = (files, n_large, tuple(large), n_unread, tuple(unread))
        return self.counts


class Tally:
    """What a scan counts of its folders: kept files, files too large, unreadable paths.

    The first ``SKIPPED_NAMED`` too-large files and unreadable paths are named, in the
    order their folders are counted.

    Args:
        sums: counts to start from, as ``sums()`` gives them (None: from nothing).
    """

    __slots__ = ("files", "large", "large_count", "unread", "unread_count")

    def __init__(self, sums: tuple[Any, ...] | None = None) -> None:
        self.files = 0
        self.large_count = 0
        self.large: list[str] = []
        self.unread_count = 0
        self.unread: list[tuple[str, str]] = []
        if sums is not None:
            self.files, self.large_count, large, self.unread_count, unread = sums
            self.large, self.unread = list(large), list(unread)

    def add(self, files: int, large: tuple[str, ...], unread: tuple[tuple[str, str], ...]) -> None:
        """Count one folder: its kept files, its files too large, its unreadable paths."""
        self.files += files
        self.large_count += len(large)
        room = SKIPPED_NAMED - len(self.large)
        if room > 0 and large:
            self.large.extend(large[:room])
        self.unread_count += len(unread)
        room = SKIPPED_NAMED - len(self.unread)
        if room > 0 and unread:
            self.unread.extend(unread[:room])

    def sums(self) -> tuple[Any, ...]:
        """Return the counts as a cache keeps them (``FolderCache.counts``)."""
        return (
            self.files,
            self.large_count,
            tuple(self.large),
            self.unread_count,
            tuple(self.unread),
        )

    @classmethod
    def changed(
        cls, cache: FolderCache, folders: dict[str, _Fast], touched: Iterable[str]
    ) -> Tally:
        """Count a scan that started from ``cache`` and replaced the ``touched`` records.

        The cache's sums, with what changed; paths to name are found where they are, in
        the records' order, only when there are some.
        """
        files, n_large, _large, n_unread, _unread = cache.sums()
        old = cache.folders
        for rel in touched:
            was, now = old.get(rel), folders.get(rel)
            for fast, sign in ((was, -1), (now, 1)):
                if fast is not None:
                    files += sign * fast[_FILES]
                    n_large += sign * len(fast[_LARGE])
                    n_unread += sign * len(fast[_UNREAD])
        tally = cls()
        if n_large or n_unread:
            for fast in folders.values():
                tally.add(fast[_FILES], fast[_LARGE], fast[_UNREAD])
        else:
            tally.files = files
        return tally


def shard_key(i: int) -> str:
    """Return the key of shard ``i``."""
    return f"{_PREFIX}{i:03x}"


def new_cache(
    folders: dict[str, _Fast], was: int = SHARDS
) -> tuple[FolderCache, dict[str, bytes | None]]:
    """Return a cache of ``folders`` made afresh, and every row that saves it.

    Shards left empty are deleted, and so are those of the cache it replaces (of ``was``
    shards) beyond its own number, so rows of an earlier cache do not linger.
    """
    count = shard_count(len(folders))
    shards: list[dict[str, _Fast]] = [{} for _ in range(count)]
    for rel, fast in folders.items():
        shards[shard_of(rel, count)][rel] = fast
    cache = FolderCache(_new_token(count), folders, shards)
    rows: dict[str, bytes | None] = {CACHE_KEY: cache.token}
    for i, part in enumerate(shards):
        rows[shard_key(i)] = marshal.dumps(part) if part else None
    for i in range(count, was):
        rows[shard_key(i)] = None
    remember(cache)
    return cache, rows


def _records(raw: bytes) -> dict[str, _Fast] | None:
    """Decode a shard (or a whole legacy cache); None when it is not one."""
    try:
        folders = marshal.loads(raw)
    except (ValueError, EOFError, TypeError):
        return None
    if type(folders) is not dict:
        return None
    for k, v in folders.items():
        if type(k) is not str or type(v) is not tuple or len(v) != _FAST_LEN:
            return None
    return folders


def load_cache(
    rows: Iterable[tuple[str, bytes]], key: str = CACHE_KEY
) -> tuple[bytes | None, FolderCache | None]:
    """Return the header's token and the cache that rows read in one statement hold.

    ``rows`` are the store's key-value rows whose key starts with ``CACHE_KEY`` (the
    header and the shards). The cache is None when there is none, or when a shard is
    damaged: a scan without a cache is slower, never wrong, and saves a whole new one
    over the token it read.
    """
    token: bytes | None = None
    found: dict[int, bytes] = {}
    damaged = False
    prefix = key + "/"
    for name, value in rows:
        if name == key:
            token = bytes(value)
        elif name.startswith(prefix):
            try:
                found[int(name[len(prefix) :], 16)] = bytes(value)
            except ValueError:
                damaged = True
    count = _count_of(token) if token is not None else None
    if token is None or damaged or count is None:
        return token, None
    shards: list[dict[str, _Fast]] = [{} for _ in range(count)]
    for i, raw in found.items():
        if not 0 <= i < count:
            # Left by a cache of more shards that a takeback knowing only 1,024 replaced.
            continue
        part = _records(raw)
        if part is None:
            return token, None
        shards[i] = part
    last = _LAST
    if key == CACHE_KEY and last is not None and last.token == token:
        return token, last  # the same content: keep the decoded one, and its sums
    folders: dict[str, _Fast] = {}
    for part in shards:
        folders.update(part)
    if key != CACHE_KEY:
        return token, _untrusted(folders)
    cache = FolderCache(token, folders, shards)
    remember(cache)
    return token, cache


def load_legacy_cache(raw: bytes | None) -> FolderCache | None:
    """Return the cache saved whole before shards (its token is empty: never saved)."""
    folders = _records(raw) if raw else None
    return None if folders is None else _untrusted(folders)


def _untrusted(folders: dict[str, _Fast]) -> FolderCache:
    """A cache of an older format: its records, every stat key dropped.

    The older formats did not mark folders with hard-linked files, so no stat key of
    theirs is trusted: the next scan lists every folder again (a file whose stat its
    detailed row vouches for is not read again) and saves the cache in this format.
    """
    return FolderCache(
        b"",
        {rel: (*fast[:_STAT], b"", *fast[_STAT + 1 :]) for rel, fast in folders.items()},
        None,
    )


def known_cache(token: bytes | None) -> FolderCache | None:
    """Return the cache this process last read or made, if ``token`` names it."""
    last = _LAST
    if token and last is not None and last.token == token:
        return last
    return None


#: The cache this process last read or made. A process that scans again and again (the
#: watching service, which runs the snapshots handed to it) reads a header row and
#: nothing more while the cache is its own.
_LAST: FolderCache | None = None


def remember(cache: FolderCache) -> None:
    """Keep ``cache`` as this process's last (replaced whole: a thread sees one)."""
    global _LAST
    _LAST = cache


def cached_folders() -> int:
    """Return how many folders the cache this process last read or made holds (0: none)."""
    last = _LAST
    return 0 if last is None else len(last.folders)


def inner_trees() -> list[str]:
    """Return the tree ids of the folders that hold others, in this process's last cache.

    A snapshot fed by the watching service makes a folder above a change from its last
    tree (read back from the store), so these are what it reads however few files
    changed; shallowest first (the root is above every change). Empty without a cache.
    """
    last = _LAST
    if last is None:
        return []
    inner = [
        (rel.count("/") if rel else -1, str(v[_TREE]))
        for rel, v in last.folders.items()
        if v[_NAMES] and v[_TREE]
    ]
    inner.sort()
    return [oid for _depth, oid in inner]


def cached_ids(cache: FolderCache | None, details: Iterable[bytes]) -> tuple[set[str], set[str]]:
    """Return the tree ids and blob ids the scan cache names.

    The next scan reuses them without writing them again (a folder whose stats are
    unchanged keeps its tree id; a file whose stat is unchanged keeps its blob), so a
    store that removes objects (gc) must keep every one of them, or forget the cache.

    Args:
        cache: the folder cache (None: there is none).
        details: every detailed row (the ``dircache`` table).
    """
    from ..model import FILE, LINK

    trees: set[str] = set()
    blobs: set[str] = set()
    if cache is not None:
        for v in cache.folders.values():
            trees.add(str(v[_TREE]))
            trees.update(str(i) for i in v[_IDS] if i)
    for raw in details:
        try:
            rows = marshal.loads(raw)
        except (ValueError, EOFError, TypeError):
            continue
        if not isinstance(rows, dict):
            continue
        for v in rows.values():
            try:
                kind, _mode, oid, _size = v[1]
            except (TypeError, ValueError, IndexError):
                continue
            if kind in (FILE, LINK) and oid:
                blobs.add(bytes(oid).hex())
    return trees, blobs
