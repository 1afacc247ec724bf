"""Reclaiming the bytes no kept snapshot needs (INV-14).

The caller names every object that must stay (the mark, `features/lifecycle/gc.py`) and holds the
store's maintenance lock exclusively. A pack with nothing live is deleted first (the index
forgets its objects, then the file goes: that needs no space, so a nearly full disk gets it
back even when no record can be copied); a pack whose garbage reaches the threshold is
rewritten: its live records are copied verbatim (they verify on their own, INV-3) into new
packs, the new packs are made durable, the index is moved to them in one durable transaction,
and only then are the old packs deleted. That is restic's prune and borg's
compact order: at every instant each live object is in a pack the index or a rebuild finds, so
a gc killed anywhere loses nothing, and the next gc (or `verify`) deletes what it left.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from tillage.core.format import PACK_TARGET_BYTES
from tillage.core.progress import ProgressFn, meter
from tillage.platform import failpoints
from tillage.platform.fs import fsync_dir
from tillage.platform.names import random_hex
from tillage.store import index as ix
from tillage.store.packs import HEADER_SIZE, PACK_MAGIC, TRAILER_SIZE, PackWriter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.store.store import Store

# A pack is rewritten when at least this share of its bytes is garbage (borg compact's default
# threshold; restic prune's is 5 %, but a rewrite here copies a whole pack, up to 256 MiB, to
# free a tenth of it). Budget enforcement sweeps with 0: every garbage byte goes.
REWRITE_THRESHOLD = 0.10


@dataclass
class _Pack:
    """One pack as the index knows it: its size on disk, its live records, its dead objects."""

    name: str
    size: int
    live: list[tuple[bytes, int, int]] = field(default_factory=list)  # id, offset, length
    dead: list[bytes] = field(default_factory=list)

    @property
    def live_bytes(self) -> int:
        return sum(length for _id, _off, length in self.live)

    @property
    def garbage(self) -> int:
        return max(0, self.size - len(PACK_MAGIC) - self.live_bytes)


@dataclass(frozen=True)
class SweepReport:
    """What a sweep removed (or, dry, would remove): objects no longer in the store, packs
    rewritten or deleted, and the bytes given back to the disk."""

    objects_removed: int
    packs_rewritten: int
    bytes_reclaimed: int
    skipped_damaged: tuple[str, ...] = ()


def _packs(store: Store, live: set[bytes]) -> dict[str, _Pack]:
    packs: dict[str, _Pack] = {}
    rows = store.conn.execute("SELECT id, pack, offset, length FROM objects ORDER BY pack, offset")
    for object_id, pack, offset, length in rows:
        entry = packs.get(pack)
        if entry is None:
            try:
                size = (store.packs_dir / pack).stat().st_size
            except FileNotFoundError:
                size = -1  # indexed but gone: nothing to reclaim, and nothing to copy from
            entry = packs[pack] = _Pack(pack, size)
        oid = bytes(object_id)
        if oid in live:
            entry.live.append((oid, offset, length))
        else:
            entry.dead.append(oid)
    return packs


def _choose(packs: dict[str, _Pack], threshold: float) -> tuple[list[_Pack], list[_Pack]]:
    """(packs to delete whole, packs to rewrite)."""
    delete, rewrite = [], []
    for pack in packs.values():
        if pack.size < 0:
            continue
        if not pack.live:
            delete.append(pack)
        elif pack.garbage > 0 and pack.garbage >= threshold * pack.size:
            rewrite.append(pack)
    return delete, rewrite


def plan(store: Store, live: set[bytes], *, threshold: float = REWRITE_THRESHOLD) -> SweepReport:
    """What `sweep` would do, doing nothing (a dry run)."""
    packs = _packs(store, live)
    delete, rewrite = _choose(packs, threshold)
    dead = sum(len(p.dead) for p in packs.values())
    freed = sum(p.size for p in delete) + sum(p.garbage for p in rewrite)
    if rewrite:
        freed -= len(PACK_MAGIC)  # the new pack's own header
    return SweepReport(dead, len(delete) + len(rewrite), max(0, freed))


def sweep(
    store: Store,
    live: set[bytes],
    *,
    threshold: float = REWRITE_THRESHOLD,
    on_progress: ProgressFn | None = None,
) -> SweepReport:
    """Removes every object not in `live` from the store's view, deletes packs with nothing
    live and rewrites packs whose garbage reaches `threshold` (`on_progress` hears each pack
    rewritten); the caller holds the store's maintenance lock exclusively."""
    from tillage.store.check import reclaim_abandoned_packs

    # A killed writer's or a killed gc's leftovers first: nothing references them.
    _count, reclaimed = reclaim_abandoned_packs(store)
    packs = _packs(store, live)
    delete, rewrite = _choose(packs, threshold)
    # What needs no space next: packs with nothing live go before any record is copied, so a
    # gc on a nearly full disk gives their bytes back even when it cannot copy (issue 26).
    reclaimed += _delete_dead_packs(store, delete)
    damaged: list[str] = []
    writers: list[PackWriter] = []
    moves: list[tuple[str, int, int, bytes]] = []
    old: list[_Pack] = []
    total = sum(p.size for p in rewrite)
    tally = meter(on_progress, "rewriting packs", len(rewrite), total, unit="pack")
    try:
        for pack in rewrite:
            if tally is not None:
                tally.add(1, pack.size)
            copied = _copy_live(store, pack, writers)
            if copied is None:
                damaged.append(pack.name)  # left as it is, for `verify --repair`
                continue
            moves.extend(copied)
            old.append(pack)
        failpoints.hit("gc.after_copy")
        for writer in writers:
            writer.sync()
        failpoints.hit("gc.after_pack_fsync")
        gone = {p.name for p in delete}  # forgotten already
        dead = [oid for p in packs.values() if p.name not in gone for oid in p.dead]
        _move_index(store, moves, dead)
    except BaseException:
        for writer in writers:
            if not _indexed(store, writer.name):
                writer.discard()  # nothing points into it
            else:
                writer.close()  # the index moved to it: it holds live objects now
        raise
    failpoints.hit("gc.after_index")
    new_bytes = 0
    for writer in writers:
        new_bytes += writer.size
        writer.close()  # indexed: the lock may go (INV-3)
    for n, pack in enumerate(old):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(store.packs_dir / pack.name)
        if n == 0 and not delete:
            failpoints.hit("gc.after_first_delete")
    if old:
        fsync_dir(store.packs_dir)
    freed = reclaimed + sum(p.size for p in old) - new_bytes
    removed = len(dead) + sum(len(p.dead) for p in delete)
    return SweepReport(removed, len(delete) + len(old), max(0, freed), tuple(damaged))


def _delete_dead_packs(store: Store, delete: list[_Pack]) -> int:
    """Forgets every object of packs with nothing live (one durable transaction, a few pages
    of the index's log), then deletes the packs; returns their bytes. Killed between the two,
    the packs are ones no index row points into: the next gc (or `verify`) reclaims them."""
    if not delete:
        return 0
    _move_index(store, [], [oid for p in delete for oid in p.dead])
    failpoints.hit("gc.after_dead_index")
    for n, pack in enumerate(delete):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(store.packs_dir / pack.name)
        if n == 0:
            failpoints.hit("gc.after_first_delete")
    fsync_dir(store.packs_dir)
    return sum(p.size for p in delete)


def _copy_live(
    store: Store, pack: _Pack, writers: list[PackWriter]
) -> list[tuple[str, int, int, bytes]] | None:
    """Copies a pack's live records, verbatim and checked, to the newest writer; returns the
    index moves (new pack, offset, length, id), or None when a live record does not verify
    (the pack is then left alone: copying would not mend it, deleting would lose it)."""
    moves: list[tuple[str, int, int, bytes]] = []
    fd = os.open(store.packs_dir / pack.name, os.O_RDONLY | os.O_CLOEXEC)
    try:
        records = []
        for object_id, offset, length in pack.live:
            data = os.pread(fd, length, offset)
            if not _whole(data, object_id):
                return None
            records.append((object_id, data))
    finally:
        os.close(fd)
    for object_id, data in records:
        if not writers or writers[-1].size >= PACK_TARGET_BYTES:
            writers.append(PackWriter(store.packs_dir))
        loc = writers[-1].append(data)
        moves.append((loc.pack, loc.offset, loc.length, object_id))
    return moves


def _indexed(store: Store, pack: str) -> bool:
    """Tells whether any index row points into `pack` (when in doubt: yes, keep it)."""
    try:
        row = store.conn.execute("SELECT 1 FROM objects WHERE pack=? LIMIT 1", (pack,))
        return row.fetchone() is not None
    except Exception:  # an index that cannot answer: a kept pack costs bytes, a lost one data
        return True


def _whole(data: bytes, object_id: bytes) -> bool:
    """Tells whether `data` is one whole record of `object_id` whose CRC holds."""
    if len(data) < HEADER_SIZE + TRAILER_SIZE or data[8:40] != object_id:
        return False
    crc = int.from_bytes(data[-TRAILER_SIZE:], "little")
    return zlib.crc32(memoryview(data)[:-TRAILER_SIZE]) == crc


def _move_index(store: Store, moves: list[tuple[str, int, int, bytes]], dead: list[bytes]) -> None:
    """Points the index at the new packs and forgets the dead objects, in one transaction made
    durable before any old pack is deleted (a lost commit after a delete would point the index
    at a pack that is gone)."""
    conn = store.conn
    conn.execute("PRAGMA synchronous=FULL")
    try:
        with ix.write_txn(conn):
            conn.executemany("UPDATE objects SET pack=?, offset=?, length=? WHERE id=?", moves)
            for start in range(0, len(dead), 500):
                batch = dead[start : start + 500]
                conn.execute(
                    f"DELETE FROM objects WHERE id IN ({','.join('?' * len(batch))})", batch
                )
            ix.set_meta(conn, "packs_epoch", random_hex(8))
    finally:
        conn.execute("PRAGMA synchronous=NORMAL")


def store_bytes(home: Path) -> int:
    """The store's size on disk, as `du -b` counts it (every file under its folder)."""
    total = 0
    stack = [home]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
    return total
