"""Ops layer: the watching service checks itself against a full scan (an audit).

A fast path proves itself now and then. In idle time the service asks its own watcher
what it would vouch for since the mark the store's scan cache was saved at, scans the
workspace the way a snapshot fed by it would (only those folders listed, the rest taken
from the cache), and scans it again in full, every folder listed and its entries' stats
compared with the cache, as a snapshot without the service does. Neither scan stores
anything: objects are only hashed. The two root trees must be the same; when they are
not, the service's view is wrong somewhere, and it stops vouching for anything.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from .._service_client import Mark
from ..scan import Scanner
from ..store import Store
from ._snapshot import MARK_KEY, stored_cache

#: How many folders whose trees differ an audit names.
NAMED = 20

#: What the service's watcher answers for a mark: the folders changed since it (None:
#: it cannot vouch for any), and whether git's index changed since.
Ask = Callable[[Mark | None], tuple[list[str] | None, bool]]


@dataclass(frozen=True)
class AuditResult:
    """What an audit found.

    Attributes:
        agreed: True when the two scans have the same tree; False when they differ;
            None when there was nothing to compare (``why`` says why).
        why: why nothing was compared, or what differed, in words.
        folders: the folders whose trees differ (up to ``NAMED``, the deepest first).
    """

    agreed: bool | None
    why: str = ""
    folders: tuple[str, ...] = ()


def _hash_only(
    kind: str,
    data: bytes,
    oid: str | None = None,
    base: str | None = None,
    /,
    *,
    base_bytes: Callable[[], bytes | None] | None = None,
) -> str:
    """Name an object as the store would, and keep nothing."""
    return oid or hashlib.sha256(data).hexdigest()


def audit(store: Store, ask: Ask) -> AuditResult:
    """Compare what the service would vouch for now with a full scan of the workspace.

    Args:
        store: the workspace's open store (read only: nothing is written).
        ask: asks the service's watcher what changed since a mark.
    """
    meta = store.meta
    raw = meta.get_kv(MARK_KEY)
    _token, cache = stored_cache(meta)
    if cache is None or not cache.token or not raw:
        return AuditResult(None, "no scan cache with a mark to audit")
    mark_raw, _bar, tail = raw.partition(b"|")
    try:
        size, env = (int(x) for x in tail.split(b"|"))
    except ValueError:
        return AuditResult(None, "the mark was not understood")
    dirs, index = ask(Mark.decode(mark_raw))
    if dirs is None:
        return AuditResult(None, "the service vouches for nothing now: a full scan is due")

    def scanner() -> Scanner:
        return Scanner(
            store.root,
            put=_hash_only,
            cache=cache,
            dircache_get=meta.get_dircache,
            max_file_bytes=size,
            exclude_env=bool(env),
            exclude=[store.path],
            forks=0,
            get=store.objects.get_stored,
        )

    vouched = scanner()
    seen = vouched.scan(hint=dirs, recheck_index=index)
    if vouched.not_vouched:
        return AuditResult(None, f"{vouched.not_vouched}: a full scan is due")
    # The full scan checks every folder's listing and stats against the same cache (as
    # every snapshot without the service does): what the service missed differs there.
    full = scanner()
    truth = full.scan()
    if seen.tree == truth.tree:
        return AuditResult(True)
    differ = _differing(vouched.folders, full.folders)
    return AuditResult(
        False,
        f"{len(differ)} folder(s) differ from a full scan: "
        + ", ".join(repr(d) for d in differ[:NAMED]),
        tuple(differ[:NAMED]),
    )


def _differing(a: dict[str, tuple[object, ...]], b: dict[str, tuple[object, ...]]) -> list[str]:
    """The folders whose tree ids differ (or that only one side has), deepest first."""
    from ..scan._cache import _TREE

    def tree(side: dict[str, tuple[object, ...]], d: str) -> object:
        fast = side.get(d)
        return None if fast is None else fast[_TREE]

    out = [d for d in set(a) | set(b) if tree(a, d) != tree(b, d)]
    return sorted(out, key=lambda d: (-d.count("/"), d))
