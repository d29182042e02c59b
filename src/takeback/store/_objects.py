"""Store layer: content-addressed objects (blobs and trees), packed as rows of one SQLite file.

An object is named by the SHA-256 of its content, written once, compressed with zstd, and
checked against its name on every read. Packing small objects into one database avoids the
cost of one file per object (slow to write, and very slow to delete, on big trees).

Deltas, as git's packs have them: a new version of a file or a folder's tree may be
compressed with the previous version (its *base*) as a zstd dictionary, when that comes
out smaller. A tree that changed in one entry then costs tens of bytes instead of a
kilobyte of hashes that do not compress. Reading such an object reads its base first;
chains are at most ``MAX_DEPTH`` long, and the hash check is on the full content, so a
damaged base is caught like any damaged object. Only ``gc`` deletes objects, through
:meth:`PackedObjects.delete`; it first rewrites whole (:meth:`PackedObjects.rewrite_whole`)
every kept object whose base it removes, or keeps that base.

A first snapshot reads every file: :meth:`PackedObjects.pack` compresses on any thread (one
compressor per thread; zstd and SHA-256 release the GIL), and :meth:`PackedObjects.put_packed`
adds what the threads packed from the one thread that writes, without asking SQLite
about each one (``INSERT OR IGNORE`` keeps an object stored already). Within
:meth:`PackedObjects.write_behind`, each full batch is committed by one writer thread while
the scan goes on (one batch in flight at most, still readable until it is committed).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import StoreCorruptError, StoreError
from ..model import Tree, changed_entries, decode_tree

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

_BATCH_BYTES = 32 << 20
_TREE_CACHE = 4096
_RAW_CACHE = 256
#: The most bytes ``_raw`` keeps, whatever the count.
_RAW_MAX_BYTES = 128 << 20
#: The longest chain of deltas a read may have to follow.
MAX_DEPTH = 16
#: Below this size a delta saves too little to be worth a base read.
_MIN_DELTA = 256
#: Above this size a base is not read back to compress against (memory and time).
_MAX_DELTA = 4 << 20


#: The bytes of objects this process stored or read back lately, by id: the next
#: snapshot's delta bases (a changed folder's tree, a file edited again) and the last
#: trees of the folders above a change, had without reading their chain of deltas back.
#: A process that snapshots again and again (the watching service, which runs the
#: snapshots handed to it) gains most. The least recently used go first when the bytes
#: pass ``_RECENT_MAX_BYTES`` (a dict keeps its order: one used again is put last). An id
#: names the same bytes in any store, and a base is used only once its row says it is
#: stored (``_depth``).
_RECENT: dict[str, bytes] = {}
_RECENT_SIZE = [0]
_RECENT_MAX_BYTES = 32 << 20


def _keep_recent(oid: str, data: bytes) -> None:
    recent, size = _RECENT, _RECENT_SIZE
    was = recent.pop(oid, None)
    if was is not None:
        size[0] -= len(was)
    recent[oid] = data
    size[0] += len(data)
    while size[0] > _RECENT_MAX_BYTES and len(recent) > 1:
        size[0] -= len(recent.pop(next(iter(recent))))
    if len(recent) == 1:
        size[0] = len(data)


def _recent(oid: str) -> bytes | None:
    """Return an object's bytes if this process keeps them (now the most recently used)."""
    data = _RECENT.pop(oid, None)
    if data is not None:
        _RECENT[oid] = data
    return data


def may_delta(size: int) -> bool:
    """Whether an object of ``size`` bytes is ever stored as a delta against a base."""
    return _MIN_DELTA <= size <= _MAX_DELTA


class _Pending(NamedTuple):
    """An object put but not yet committed, as its row will hold it."""

    kind: str
    size: int
    data: bytes
    base: str | None
    depth: int


class PackedObjects:
    """Blobs and trees by id, packed as rows; writes are batched, ``flush()`` commits them.

    What every store's objects share (zstd, deltas, the batch, the caches, the hash check
    on read); a store's rows are read and written by the five ``_row*`` methods its
    subclass gives (``_sqlite_objects.ObjectStore``, SQLite; ``_pg_meta.PgObjects``).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        # zstandard loads on first use: an unchanged snapshot neither writes nor reads an
        # object, and start-up time is paid on every hook call.
        self._zstd: Any = None
        self._cctx: Any = None
        self._dctx: Any = None
        self._pending: dict[str, _Pending] = {}
        self._pending_bytes = 0
        self._trees: OrderedDict[str, Tree] = OrderedDict()
        self._raw: OrderedDict[str, bytes] = OrderedDict()
        self._raw_bytes = 0
        #: the bytes of the trees put since the last commit: once committed, they join
        #: ``_raw`` (a step's changes are worked out from the trees its snapshot just
        #: stored, and reading one back would follow its chain of deltas)
        self._fresh: dict[str, bytes] = {}
        #: how many objects' bytes are kept once read (gc, which reads every kept tree
        #: and so walks each delta chain many times, raises it)
        self.raw_cache = _RAW_CACHE
        self._local = threading.local()
        #: pending objects added without asking whether the store has them already
        self._unchecked: set[str] = set()
        #: the batch the writer thread is committing (write-behind), and its unchecked ids
        self._inflight: dict[str, _Pending] = {}
        self._inflight_unchecked: set[str] = set()
        self._writer: ThreadPoolExecutor | None = None
        #: inside :meth:`write_behind`: batches go to the writer thread (made on first use)
        self._behind = False
        self._writing: Future[None] | None = None

    # -- rows (one store's dialect) --------------------------------------------------

    #: whether a batch may be committed on a writer thread while this one reads (a
    #: store whose connection is not shared safely across threads says no)
    write_behind_ok = True

    def _row_exists(self, oid: str) -> bool:
        raise NotImplementedError

    def _rewrite_rows(self, batch: list[tuple[bytes, str]]) -> None:
        """Replace rows' data by whole packed bytes: (packed, id); StoreError if not."""
        raise NotImplementedError

    def _row_depth(self, oid: str) -> int | None:
        raise NotImplementedError

    def _row(self, oid: str) -> tuple[bytes, str | None] | None:
        """Return an object's stored bytes and base (None: no such row)."""
        raise NotImplementedError

    def _row_full(self, oid: str) -> tuple[bytes, str | None, int] | None:
        """Return an object's stored bytes, base and depth (None: no such row)."""
        row = self._row(oid)
        depth = self._row_depth(oid)
        return None if row is None or depth is None else (row[0], row[1], depth)

    def _insert_rows(self, rows: list[tuple[str, str, int, bytes, str | None, int]]) -> None:
        """Insert rows in one transaction; a row whose id exists is left as it is."""
        raise NotImplementedError

    def _replace_row(self, oid: str, kind: str, size: int, packed: bytes) -> bool:
        """Write a whole (not delta) row over whatever is there; return whether it was."""
        raise NotImplementedError

    def entries(self) -> list[tuple[str, str, str | None]]:
        """Return every committed object: (id, kind, base), each base before its deltas."""
        raise NotImplementedError

    def _z(self) -> Any:
        if self._zstd is None:
            import zstandard

            self._zstd = zstandard
            self._cctx = zstandard.ZstdCompressor(level=3)
            self._dctx = zstandard.ZstdDecompressor()
        return self._zstd

    # -- writing ---------------------------------------------------------------------

    def pack(self, data: bytes) -> bytes:
        """Return ``data`` compressed as a whole object is stored (safe on any thread)."""
        cctx = getattr(self._local, "cctx", None)
        if cctx is None:
            # A compressor is not safe for concurrent use: one per thread.
            cctx = self._local.cctx = self._z().ZstdCompressor(level=3)
        packed: bytes = cctx.compress(data)
        return packed

    def put_packed(self, items: Sequence[tuple[str, str, int, bytes]]) -> None:
        """Add objects that :meth:`pack` compressed (kind, SHA-256, size, packed bytes).

        The ids must be the SHA-256 of the content. Nothing is asked of SQLite: the
        insert leaves an object already stored as it is, and until then such an object
        is known as *unchecked* (see :meth:`_depth`).
        """
        for kind, oid, size, packed in items:
            if oid in self._pending or oid in self._inflight:
                continue
            self._pending[oid] = _Pending(kind, size, packed, None, 0)
            self._unchecked.add(oid)
            self._pending_bytes += len(packed)
        if self._pending_bytes >= _BATCH_BYTES:
            self._send()

    def has(self, oid: str) -> bool:
        """Return whether the object exists (committed or pending)."""
        return oid in self._pending or oid in self._inflight or self._row_exists(oid)

    def put(
        self,
        kind: str,
        data: bytes,
        oid: str | None = None,
        base: str | None = None,
        *,
        base_bytes: Callable[[], bytes | None] | None = None,
    ) -> str:
        """Add an object (if new) and return its id.

        Args:
            kind: ``blob`` or ``tree``.
            data: the content.
            oid: its SHA-256, when the caller has it already.
            base: the id of an earlier version, to store this one as a delta against.
            base_bytes: makes what the caller believes are ``base``'s bytes, asked only
                when they are not in memory here; used only if they hash to ``base``
                (else ``base`` is read back from the store, as without it).
        """
        if oid is None:
            oid = hashlib.sha256(data).hexdigest()
        if oid in self._pending or oid in self._inflight:
            return oid
        # A tree put is a folder that changed: its tree is new all but always, so the
        # store is not asked (the insert keeps one it has; see ``_unchecked``). A blob
        # may well be stored already (a file put back as it was, a checkout).
        unchecked = kind == "tree"
        if not unchecked and self._row_exists(oid):
            return oid
        z = self._z()
        packed: bytes | None = None
        used: str | None = None
        depth = 0
        if base is not None and base != oid and may_delta(len(data)):
            try:
                found = self._base(base, base_bytes)
            except StoreCorruptError:
                found = None
            if found is not None and len(found[1]) <= _MAX_DELTA:
                base_depth, base_data = found
                d = z.ZstdCompressionDict(base_data, dict_type=z.DICT_TYPE_RAWCONTENT)
                delta = z.ZstdCompressor(level=3, dict_data=d).compress(data)
                # A delta an eighth of the bytes or less is kept without compressing the
                # whole to compare (a folder's tree with an entry changed, an edited file).
                whole = None if len(delta) * 8 <= len(data) else self._cctx.compress(data)
                if whole is None or len(delta) < len(whole):
                    packed, used, depth = delta, base, base_depth + 1
                else:
                    packed = whole
        if packed is None:
            packed = self._cctx.compress(data)
        self._pending[oid] = _Pending(kind, len(data), packed, used, depth)
        if unchecked:
            self._unchecked.add(oid)
        self._pending_bytes += len(packed)
        if kind == "tree":
            self._fresh[oid] = data
        if may_delta(len(data)):
            _keep_recent(oid, data)
        if self._pending_bytes >= _BATCH_BYTES:
            self._send()
        return oid

    def _uncommitted(self, oid: str) -> _Pending | None:
        pending = self._pending.get(oid)
        return pending if pending is not None else self._inflight.get(oid)

    def _base(
        self, oid: str, made: Callable[[], bytes | None] | None = None
    ) -> tuple[int, bytes] | None:
        """Return a delta base's depth and bytes (None: missing, empty, or too deep).

        Too deep: as deep as a chain may go. A base that is neither pending nor kept in
        memory comes from ``made`` when that makes bytes with the base's id: only its
        depth is read (a scan makes a folder's last tree from its cache, and reading it
        back would decode its chain of deltas). Else it is read with its depth in one
        query: its row is read once, not once for the depth and again for the bytes.
        """
        data = _recent(oid) or self._raw.get(oid)
        if data is None and self._uncommitted(oid) is None:
            data = made() if made is not None else None
            if data and hashlib.sha256(data).hexdigest() == oid:
                # The row is trusted to hold these bytes, as it is when they are in memory.
                depth = self._row_depth(oid)
                if depth is None:
                    return None
                # Kept: what replaces a base is compared with it next (a step's changes
                # are the old trees against the new), and reading it back would follow
                # its chain of deltas.
                self._keep_raw(oid, data)
                return None if depth >= MAX_DEPTH else (depth, data)
            row = self._row_full(oid)
            if row is None or row[2] >= MAX_DEPTH:
                return None
            data = self._unpack(oid, row[0], row[1], 0)
            return (row[2], data) if data else None
        depth = self._depth(oid)
        if depth is None or depth >= MAX_DEPTH:
            return None
        if data is not None and self._uncommitted(oid) is None and oid not in self._raw:
            self._keep_raw(oid, data)  # stored (its row has a depth): as above
        data = data or self.get(oid)
        return (depth, data) if data else None

    def _depth(self, oid: str) -> int | None:
        pending = self._uncommitted(oid)
        if pending is not None and (oid in self._unchecked or oid in self._inflight_unchecked):
            # Stored already, perhaps as a delta: the insert will keep that row, so a
            # delta built on it would sit one deeper than the stored chain.
            stored = self._row_depth(oid)
            if stored is not None:
                return stored
            self._unchecked.discard(oid)
            self._inflight_unchecked.discard(oid)
        if pending is not None:
            return pending.depth
        return self._row_depth(oid)

    def flush(self) -> None:
        """Commit pending objects (in put order: a base comes first); wait for the writer.

        Raises:
            StoreError: a batch could not be written (the snapshot that put it fails).
        """
        self._send()
        self._settle()

    @contextmanager
    def write_behind(self) -> Iterator[None]:
        """Within the block, full batches are committed by a writer thread meanwhile.

        Batches are committed in the order they fill, one at a time, so a base still
        comes before its deltas and blobs before the trees that name them; a batch that
        fails is raised at the next batch or at :meth:`flush`. On leaving, what is in
        flight is waited for (what is pending stays pending) and the thread ends, so the
        process may fork again.
        """
        if self._behind or not self.write_behind_ok:
            yield
            return
        # The thread is made when the first batch is sent: a snapshot that stores
        # nothing new (nothing changed) neither starts it nor loads concurrent.futures.
        self._behind = True
        try:
            yield
        finally:
            try:
                self._settle()
            finally:
                self._behind = False
                if self._writer is not None:
                    self._writer.shutdown(wait=True)
                    self._writer = None

    def _send(self) -> None:
        """Hand the pending batch to the writer (or commit it here, without one)."""
        if not self._pending:
            return
        rows = [(oid, *p) for oid, p in self._pending.items()]
        batch, unchecked = self._pending, self._unchecked
        self._pending, self._unchecked, self._pending_bytes = {}, set(), 0
        fresh, self._fresh = self._fresh, {}
        if self._writer is None and self._behind:
            from concurrent.futures import ThreadPoolExecutor  # and logging: when used

            self._writer = ThreadPoolExecutor(1, thread_name_prefix="takeback-write")
        if self._writer is None:
            # Written or not, these are dropped: a failed batch fails its snapshot, and
            # nothing may refer to objects that were never committed.
            self._commit(rows)
            for oid, data in fresh.items():
                self._keep_raw(oid, data)
            return
        self._settle()  # one batch in flight at most: memory stays bounded
        self._inflight, self._inflight_unchecked = batch, unchecked
        self._writing = self._writer.submit(self._commit, rows)

    def _settle(self) -> None:
        """Wait for the batch in flight; raise its failure."""
        writing, self._writing = self._writing, None
        try:
            if writing is not None:
                writing.result()
        finally:
            self._inflight, self._inflight_unchecked = {}, set()

    def _commit(self, rows: list[tuple[str, str, int, bytes, str | None, int]]) -> None:
        self._insert_rows(rows)

    def repair(self, kind: str, data: bytes) -> bool:
        """Store ``data`` again, whole, over a damaged copy of the same object.

        Deltas built on the object stay valid: they need its bytes, which are the same.

        Returns:
            Whether it was written.
        """
        oid = hashlib.sha256(data).hexdigest()
        self.flush()
        self._drop_raw(oid)
        self._trees.pop(oid, None)
        self._z()
        return self._replace_row(oid, kind, len(data), self._cctx.compress(data))

    # -- gc ------------------------------------------------------------------------

    def bases(self, oids: Iterable[str]) -> dict[str, str | None]:
        """Return the delta base of each stored object named (None: whole); absent ones left out.

        One row at a time (its data is read too): for the few objects written since gc
        read the whole index, whose bases gc must then keep.
        """
        out: dict[str, str | None] = {}
        for oid in oids:
            pending = self._uncommitted(oid)
            if pending is not None:
                out[oid] = pending.base
                continue
            row = self._row(oid)
            if row is not None:
                out[oid] = row[1]
        return out

    def rewrite_whole(self, oids: Iterable[str]) -> list[str]:
        """Store objects again whole (not as deltas), so that their bases may go.

        Each batch is its own transaction: an object is either its old delta or whole,
        and both give the same bytes, so a crash in between loses nothing.

        Returns:
            The ids that could not be rewritten (a full disk, a damaged chain); the
            caller keeps their bases instead.
        """
        self.flush()
        failed: list[str] = []
        batch: list[tuple[bytes, str]] = []
        size = 0

        def commit() -> None:
            nonlocal size
            try:
                self._rewrite_rows(batch)
            except StoreError:
                failed.extend(oid for _d, oid in batch)
            batch.clear()
            size = 0

        for oid in oids:
            try:
                data = self.get(oid)
            except StoreCorruptError:
                failed.append(oid)
                continue
            packed = self.pack(data)
            batch.append((packed, oid))
            size += len(packed)
            if size >= _BATCH_BYTES:
                commit()
        if batch:
            commit()
        return failed

    # -- reading ---------------------------------------------------------------------

    def get(self, oid: str, *, _depth: int = 0) -> bytes:
        """Return an object's bytes, checked against its id.

        Raises:
            StoreCorruptError: missing, undecodable, or its hash differs from its id.
        """
        cached = self._raw.get(oid)
        if cached is not None:
            self._raw.move_to_end(oid)
            return cached
        pending = self._uncommitted(oid)
        if pending is not None:
            packed, base = pending.data, pending.base
        else:
            row = self._row(oid)
            if row is None:
                raise StoreCorruptError(
                    f"store object {oid[:12]} is missing", path=self.path, expected=oid
                )
            packed, base = row
        return self._unpack(oid, packed, base, _depth)

    def _unpack(self, oid: str, packed: bytes, base: str | None, _depth: int) -> bytes:
        """Return an object's bytes from its stored form, checked against its id."""
        z = self._z()
        try:
            if base is None:
                data: bytes = self._dctx.decompress(packed)
            else:
                if _depth > MAX_DEPTH:
                    raise StoreCorruptError(
                        f"store object {oid[:12]} has a delta loop", path=self.path, expected=oid
                    )
                d = z.ZstdCompressionDict(
                    self.get(base, _depth=_depth + 1), dict_type=z.DICT_TYPE_RAWCONTENT
                )
                data = z.ZstdDecompressor(dict_data=d).decompress(packed)
        except z.ZstdError as e:
            raise StoreCorruptError(
                f"store object {oid[:12]} is damaged: {e}", path=self.path, expected=oid
            ) from e
        actual = hashlib.sha256(data).hexdigest()
        if actual != oid:
            raise StoreCorruptError(
                f"store object {oid[:12]} fails its hash check (got {actual[:12]})",
                path=self.path,
                expected=oid,
                actual=actual,
            )
        if base is not None or len(data) <= _MIN_DELTA * 64:
            # Bases of deltas are read again and again along a chain: keep a few.
            self._keep_raw(oid, data)
        return data

    def _keep_raw(self, oid: str, data: bytes) -> None:
        """Keep an object's bytes (committed ones only), the oldest going first."""
        self._drop_raw(oid)
        self._raw[oid] = data
        self._raw_bytes += len(data)
        while self._raw and (len(self._raw) > self.raw_cache or self._raw_bytes > _RAW_MAX_BYTES):
            _old, gone = self._raw.popitem(last=False)
            self._raw_bytes -= len(gone)

    def _drop_raw(self, oid: str) -> None:
        gone = self._raw.pop(oid, None)
        if gone is not None:
            self._raw_bytes -= len(gone)

    def tree_changes(self, old: str | None, new: str | None) -> tuple[Tree, Tree]:
        """Return the entries of two trees (None: empty) whose records differ, each side's.

        Only those are decoded: two versions of a folder with one file changed decode
        two records, where decoding both trees whole decodes them all.

        Raises:
            StoreCorruptError: either is missing, damaged or not a tree.
        """
        old_bytes = self.get(old) if old else b""
        new_bytes = self.get(new) if new else b""
        try:
            return changed_entries(old_bytes, new_bytes)
        except ValueError as e:
            bad = new
            if old is not None:
                try:
                    decode_tree(old_bytes)
                except ValueError:
                    bad = old
            raise StoreCorruptError(
                f"store tree {(bad or '')[:12]} is malformed", path=self.path
            ) from e

    def get_stored(self, oid: str) -> bytes:
        """Return the bytes of an object the caller knows is stored (a cache names it).

        From what this process stored lately when it has them (a folder's last tree,
        written by the snapshot before): read back, the tree of a folder that changes on
        every snapshot (the root) follows a chain of deltas as long as the store allows.
        Else as :meth:`get`, and the bytes read are kept so: the folder above a change is
        above the next change too (the root, a top folder of a monorepo).
        """
        data = _recent(oid)
        if data is None:
            data = self.get(oid)
            if len(data) <= _MAX_DELTA:
                _keep_recent(oid, data)
            return data
        if oid not in self._raw:
            self._keep_raw(oid, data)  # compared with its next version next
        return data

    def read_ahead(self, oids: Iterable[str], budget: int = _RECENT_MAX_BYTES // 2) -> int:
        """Keep in memory the bytes of stored objects that snapshots will read back.

        The watching service reads the last trees of the folders that hold others ahead,
        in its idle time: a change far below them then reads none back, however many
        folders the workspace has. Objects missing or damaged are passed over (a read
        that needs one raises then, as without this).

        Args:
            oids: the objects, the most wanted first.
            budget: stop once this many bytes are kept (those kept already count too).

        Returns:
            How many were read.
        """
        read = 0
        for oid in oids:
            if _RECENT_SIZE[0] >= budget:
                break
            if oid in _RECENT:
                continue
            try:
                self.get_stored(oid)  # which keeps what it reads
            except StoreError:
                continue
            read += 1
        return read

    def get_tree(self, oid: str) -> Tree:
        """Return a decoded tree (cached; trees are immutable)."""
        tree = self._trees.get(oid)
        if tree is not None:
            self._trees.move_to_end(oid)
            return tree
        try:
            tree = decode_tree(self.get(oid))
        except ValueError as e:
            raise StoreCorruptError(f"store tree {oid[:12]} is malformed", path=self.path) from e
        self._trees[oid] = tree
        if len(self._trees) > _TREE_CACHE:
            self._trees.popitem(last=False)
        return tree
