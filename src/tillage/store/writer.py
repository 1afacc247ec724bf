"""A seal's object writer: new objects into the writer's own packs, indexed only once durable.

Its memory is bounded whatever the seal's object count: a pack is closed (synced, then indexed)
past a byte size or a record count, and only what is not yet indexed is remembered; the index
answers for the rest.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from pathlib import Path
from typing import Protocol, Self

from tillage.core.format import PACK_TARGET_BYTES
from tillage.platform import failpoints
from tillage.store import index as ix
from tillage.store.packs import Location, PackWriter, Pending, encode_batch

# A seal's compression pool is imported only by a seal.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor


class Objects(Protocol):
    """What a writer needs of its store (store.Store): where objects live, and the index."""

    packs_dir: Path

    @property
    def conn(self) -> sqlite3.Connection: ...

    def locations(self, ids: list[bytes]) -> dict[bytes, Location]: ...

    def intact(self, object_id: bytes, loc: Location) -> bool: ...


class PackingWriter:
    """Writes new objects into this writer's own pack; nothing is referenced before `commit`.

    Compression runs on a small thread pool (zstd releases the GIL). Small objects travel in
    batches so dispatch does not cost more than compressing them; batches are appended in
    submission order, so a pack's layout does not depend on timing.
    """

    # Batches compressed ahead of the one being appended: two keep both cores busy, more only
    # hold more bytes in memory (measured on the standard workload: 6 cost 16 MiB of peak RSS
    # for no time).
    WINDOW = 2
    BATCH_BYTES = 1 << 20
    BATCH_COUNT = 512
    # A pack is also closed past this many records, so that the index rows and IDs a writer
    # holds stay bounded: small files never fill a pack by size (a million of them would keep
    # a million rows in memory until the commit).
    PACK_RECORDS = 1 << 15
    # IDs found already stored are remembered up to this many (a cache: the index answers).
    KNOWN_MAX = 1 << 15

    def __init__(self, store: Objects) -> None:
        self.store = store
        self._pack: PackWriter | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._batch: list[Pending] = []
        self._batch_bytes = 0
        self._inflight: deque[tuple[list[Pending], Future[list[bytes]]]] = deque()
        self._rows: list[ix.ObjectRow] = []  # the current pack's records, not yet indexed
        self._seen: set[bytes] = set()  # queued and not yet indexed
        self._known: set[bytes] = set()  # found stored and intact
        self._uncommitted: list[PackWriter] = []

    def _intact(self, object_id: bytes, loc: Location) -> bool:
        if not self.store.intact(object_id, loc):
            return False  # never dedup against a damaged copy of bytes we hold: write them again
        self._seen.discard(object_id)
        if len(self._known) >= self.KNOWN_MAX:
            self._known.clear()
        self._known.add(object_id)
        return True

    def put(self, kind: int, object_id: bytes, raw: bytes | memoryview) -> None:
        """Stores `raw` under `object_id` unless the store already holds it.

        Whether it does is asked once per batch, not once per object: a source tree is
        thousands of small objects.
        """
        self._queue((kind, object_id, bytes(raw), len(raw), False))

    def put_record(self, kind: int, object_id: bytes, record: bytes, raw_size: int) -> None:
        """Stores a record the caller proved (decode_record) as it is: not compressed again."""
        self._queue((kind, object_id, record, raw_size, True))

    def _queue(self, pending: Pending) -> None:
        if pending[1] in self._seen or pending[1] in self._known:
            return
        self._seen.add(pending[1])
        self._batch.append(pending)
        self._batch_bytes += len(pending[2])
        if self._batch_bytes >= self.BATCH_BYTES or len(self._batch) >= self.BATCH_COUNT:
            self._submit()

    def _submit(self) -> None:
        if not self._batch:
            return
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        # What this writer indexed already (a closed pack) is found here too, like any object.
        stored = self.store.locations([p[1] for p in batch])
        batch = [p for p in batch if p[1] not in stored or not self._intact(p[1], stored[p[1]])]
        if not batch:
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tillage-zstd")
        self._inflight.append((batch, self._pool.submit(encode_batch, batch)))
        if len(self._inflight) > self.WINDOW:
            self._drain(1)

    def _drain(self, n: int | None = None) -> None:
        while self._inflight and (n is None or n > 0):
            batch, future = self._inflight.popleft()
            for (kind, object_id, _d, size, _e), record in zip(batch, future.result(), strict=True):
                loc = self._current_pack().append(record)
                self._rows.append((object_id, kind, loc.pack, loc.offset, loc.length, size))
            if n is not None:
                n -= 1

    def _current_pack(self) -> PackWriter:
        pack = self._pack
        if pack is not None and (
            pack.size >= PACK_TARGET_BYTES or len(self._rows) >= self.PACK_RECORDS
        ):
            # INV-3: a pack's lock is released only once its objects are indexed (after the
            # fsync, INV-2): a pack nobody holds and nothing indexes is a dead writer's, and
            # verify reclaims it. Indexed, it is referenced, so a failed seal keeps it.
            pack.sync()
            failpoints.hit("objects.after_rotate_fsync")
            self._index_rows()
            self._uncommitted.remove(pack)
            pack.close()
            self._pack = None
        if self._pack is None:
            self._pack = PackWriter(self.store.packs_dir)
            self._uncommitted.append(self._pack)
        return self._pack

    def _index_rows(self) -> None:
        """Records where the objects written so far live (their packs are synced already);
        from now on the index answers for them, so they are forgotten here."""
        if self._rows:
            with ix.write_txn(self.store.conn):
                ix.insert_objects(self.store.conn, self._rows)
            self._seen.difference_update(row[0] for row in self._rows)
            self._rows.clear()

    def commit(self) -> None:
        """Makes every new object durable, then visible in the index (INV-2)."""
        self._submit()
        self._drain()
        if self._pack is not None:
            self._pack.sync()
        failpoints.hit("objects.after_pack_fsync")
        self._index_rows()
        # Committed packs are referenced now: later objects go to a new pack, so that an
        # abandoned writer only ever deletes packs nothing points at.
        if self._pack is not None:
            self._pack.close()
            self._pack = None
        self._uncommitted.clear()

    def close(self) -> None:
        """Ends the writer; packs written since the last commit are deleted (nothing references
        them), so a seal that failed, e.g. on a full disk, gives its space back."""
        for _batch, future in self._inflight:
            future.cancel()
        self._inflight.clear()
        self._batch.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for pack in self._uncommitted:
            pack.discard()
        self._uncommitted.clear()
        self._pack = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
