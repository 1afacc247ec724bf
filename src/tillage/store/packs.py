"""Append-only pack files of self-verifying records (layout in docs/design/format.md).

A record carries its object's kind, ID and lengths, the (usually zstd-compressed) payload and a
CRC over all of it, so a scan can cut a torn tail at the last whole record (INV-3) and a read can
prove what it returns is the object asked for (INV-4).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import threading
import weakref
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tillage.core.format import (
    SMALL_OBJECT_MAX,
    SMALL_ZSTD_PARAMS,
    TINY_OBJECT_MAX,
    ZSTD_LEVEL,
    ZSTD_LEVEL_TINY,
)
from tillage.core.ids import object_hash
from tillage.errors import IntegrityError
from tillage.platform import failpoints
from tillage.platform.fs import fd_budget, fsync_dir, raise_if_disk_full
from tillage.platform.locks import is_held
from tillage.platform.names import random_hex

# zstandard (and the typing it imports) costs 4 ms: a command that reads or writes no object
# (`till status`) does not pay it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import zstandard

PACK_MAGIC = b"TILLPAK1"
NEW_SUFFIX = ".new"  # a pack being created, before it is locked and named
RECORD_MAGIC = b"TRC1"
_HEADER = struct.Struct("<4sBBH32sQI")  # magic, kind, flags, reserved, id, raw_len, stored_len
_CRC = struct.Struct("<I")
HEADER_SIZE = _HEADER.size
TRAILER_SIZE = _CRC.size
FLAG_ZSTD = 1
KNOWN_KINDS = frozenset((1, 2, 3, 4))
MAX_STORED = 1 << 30  # a sanity bound for scans; chunks are at most 2 MiB
_IOV_MAX = 1024  # buffers one writev takes (POSIX's least IOV_MAX)
# Records a pack writer holds before writing them out: a seal's peak memory (measured on the
# standard workload: 8 MiB cost 6 MiB of RSS over 2 MiB, for no time).
WRITE_BUFFER = 2 * 1024 * 1024
# How much a pack grows between the write-behind fdatasyncs (PackWriter._write_behind).
WRITE_BEHIND = 16 * 1024 * 1024

_local = threading.local()


def _size_class(size: int) -> str:
    if size <= TINY_OBJECT_MAX:
        return "tiny"
    return "small" if size <= SMALL_OBJECT_MAX else "large"


def _compressor(size: int) -> zstandard.ZstdCompressor:
    # One compressor per thread: sharing one between threads crashes the interpreter.
    # Small objects are squeezed harder (core.format): cheap to do, and most of a source tree.
    attr = _size_class(size)
    c: zstandard.ZstdCompressor | None = getattr(_local, attr, None)
    if c is None:
        import zstandard

        if attr == "small":
            params = zstandard.ZstdCompressionParameters(
                strategy=zstandard.STRATEGY_GREEDY, write_content_size=False, **SMALL_ZSTD_PARAMS
            )
            c = zstandard.ZstdCompressor(compression_params=params)
        else:
            level = ZSTD_LEVEL_TINY if attr == "tiny" else ZSTD_LEVEL
            c = zstandard.ZstdCompressor(level=level, write_content_size=False)
        setattr(_local, attr, c)
    return c


def _decompressor() -> zstandard.ZstdDecompressor:
    d: zstandard.ZstdDecompressor | None = getattr(_local, "d", None)
    if d is None:
        import zstandard

        d = _local.d = zstandard.ZstdDecompressor()
    return d


@dataclass(frozen=True, slots=True)
class Location:
    """Where a record lives: pack name, byte offset of its header, and its total length."""

    pack: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class ScannedRecord:
    kind: int
    id: bytes
    raw_len: int
    location: Location


def encode_record(kind: int, object_id: bytes, raw: bytes | memoryview) -> bytes:
    """Returns one whole record for `raw`, compressed when that makes it smaller."""
    return _record(kind, object_id, raw, _compressor(len(raw)).compress(raw))


def _record(
    kind: int, object_id: bytes, raw: bytes | memoryview, packed: bytes | memoryview
) -> bytes:
    flags = FLAG_ZSTD
    if len(packed) >= len(raw):
        packed, flags = raw, 0
    header = _HEADER.pack(RECORD_MAGIC, kind, flags, 0, object_id, len(raw), len(packed))
    crc = zlib.crc32(packed, zlib.crc32(header))
    return b"".join((header, packed, _CRC.pack(crc)))


# An ObjectWriter's queued object: kind, ID, raw bytes (or its whole record, already encoded and
# proven), the raw size, whether it is encoded.
Pending = tuple[int, bytes, bytes, int, bool]


def encode_batch(batch: list[Pending]) -> list[bytes]:
    """The records of a batch (what is encoded already passes as it is).

    Its small objects are compressed in one call, which lets go of the interpreter lock once
    for all of them rather than once each: the walk on the other core needs that lock between
    its system calls, and each hand-over put a thread to sleep (measured on the standard
    workload: 2,300 sleeps per compressing thread in one cold seal).
    """
    classes: dict[str, list[int]] = {}
    for i, (_kind, _oid, data, _n, done) in enumerate(batch):
        if not done and len(data) <= SMALL_OBJECT_MAX:
            classes.setdefault(_size_class(len(data)), []).append(i)
    packed: dict[int, bytes | memoryview] = {}
    for members in classes.values():
        # python-zstandard calls this call experimental: where it is gone, one call per object.
        together = getattr(_compressor(len(batch[members[0]][2])), "multi_compress_to_buffer", None)
        if len(members) > 1 and together is not None:
            frames = together([batch[i][2] for i in members], threads=1)
            packed.update((i, memoryview(frames[n])) for n, i in enumerate(members))
    records = []
    for i, (kind, oid, data, _n, done) in enumerate(batch):
        if done:
            records.append(data)
            continue
        squeezed = packed.get(i)
        if squeezed is None:
            squeezed = _compressor(len(data)).compress(data)
        records.append(_record(kind, oid, data, squeezed))
    return records


def record_whole(data: bytes, length: int, object_id: bytes | None = None) -> bool:
    """Tells whether `data`, read as a record of `length` bytes (its index location's), is
    exactly one whole record (of `object_id`, when given) whose CRC-32 over header and payload
    holds: what damage breaks (a flipped byte, a torn or missing pack), proven without
    decompressing."""
    if len(data) != length or len(data) < HEADER_SIZE + TRAILER_SIZE:
        return False
    magic, _kind, _flags, _r, stored_id, _raw_len, stored_len = _HEADER.unpack_from(data, 0)
    if magic != RECORD_MAGIC or len(data) != HEADER_SIZE + stored_len + TRAILER_SIZE:
        return False
    if object_id is not None and stored_id != object_id:
        return False
    (crc,) = _CRC.unpack_from(data, len(data) - TRAILER_SIZE)
    return bool(zlib.crc32(memoryview(data)[: len(data) - TRAILER_SIZE]) == crc)


def decode_record(data: bytes, expect_id: bytes | None = None) -> tuple[int, bytes, bytes]:
    """Returns (kind, id, raw bytes) of one whole record, proving its CRC and its ID."""
    if len(data) < HEADER_SIZE + TRAILER_SIZE:
        raise IntegrityError("pack record is truncated")
    magic, kind, flags, _r, object_id, raw_len, stored_len = _HEADER.unpack_from(data, 0)
    if magic != RECORD_MAGIC or len(data) != HEADER_SIZE + stored_len + TRAILER_SIZE:
        raise IntegrityError("pack record header is damaged")
    payload = memoryview(data)[HEADER_SIZE : HEADER_SIZE + stored_len]
    (crc,) = _CRC.unpack_from(data, HEADER_SIZE + stored_len)
    if zlib.crc32(payload, zlib.crc32(memoryview(data)[:HEADER_SIZE])) != crc:
        raise IntegrityError(f"pack record {object_id.hex()[:12]} fails its checksum")
    if kind not in KNOWN_KINDS:
        raise IntegrityError(f"pack record {object_id.hex()[:12]} has unknown kind {kind}")
    if flags & FLAG_ZSTD:
        import zstandard

        try:
            raw = _decompressor().decompress(payload, max_output_size=raw_len)
        except zstandard.ZstdError as exc:
            raise IntegrityError(f"pack record {object_id.hex()[:12]} does not decompress") from exc
    else:
        raw = bytes(payload)
    if len(raw) != raw_len or object_hash(kind, raw) != object_id:
        raise IntegrityError(f"object {object_id.hex()[:12]} does not match its ID")
    if expect_id is not None and object_id != expect_id:
        raise IntegrityError(f"index points {expect_id.hex()[:12]} at another object")
    return kind, object_id, raw


def _datasync_quietly(fd: int) -> None:
    # Only a head start: an error here (a full disk, EIO) is the final fsync's to raise.
    with contextlib.suppress(OSError):
        os.fdatasync(fd)


class PackWriter:
    """Appends records to one new pack file owned by this writer alone."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.name = f"{random_hex(8)}.pack"
        self.path = directory / self.name
        self._fd = -1
        self._size = 0
        self._pending: list[bytes | memoryview] = []
        self._pending_bytes = 0
        # Write-back started ahead of the fsync: see _write_behind.
        self._flushing: threading.Thread | None = None
        self._flushed_to = 0

    def _open(self) -> None:
        try:
            # Locked before it gets its name, and held until close: a pack nobody holds and
            # nothing indexes is a dead writer's leftover, which verify reclaims.
            fresh = self.directory / f".{self.name}{NEW_SUFFIX}"
            self._fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o444)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            os.rename(fresh, self.path)
            os.write(self._fd, PACK_MAGIC)
        except OSError as exc:
            raise_if_disk_full(exc)
            raise
        self._size = len(PACK_MAGIC)
        fsync_dir(self.directory)

    @property
    def size(self) -> int:
        return self._size + self._pending_bytes

    def append(self, record: bytes) -> Location:
        """Buffers one encoded record and returns where it will live."""
        if self._fd < 0:
            self._open()
        loc = Location(self.name, self.size, len(record))
        self._pending.append(record)
        self._pending_bytes += len(record)
        if self._pending_bytes >= WRITE_BUFFER:
            self._write_pending()
        return loc

    def _write_pending(self) -> None:
        if not self._pending:
            return
        # Written as they are (writev), not joined first: a join would hold a second copy.
        pending = self._pending
        first = 0
        try:
            while first < len(pending):
                n = os.writev(self._fd, pending[first : first + _IOV_MAX])
                while n and n >= len(pending[first]):
                    n -= len(pending[first])
                    first += 1
                if n:  # a short write: the rest of that record goes next
                    pending[first] = memoryview(pending[first])[n:]
        except OSError as exc:
            raise_if_disk_full(exc)
            raise
        self._size += self._pending_bytes
        self._pending.clear()
        self._pending_bytes = 0
        failpoints.hit("pack.after_write")
        self._write_behind()

    def _write_behind(self) -> None:
        """Every WRITE_BEHIND bytes, an fdatasync on a thread of its own: the disk writes the
        pack while the seal goes on reading and compressing, instead of all of it at the fsync
        that makes it durable (which still runs, and alone decides durability)."""
        if self._size - self._flushed_to < WRITE_BEHIND:
            return
        if self._flushing is not None and self._flushing.is_alive():
            return
        self._flushed_to = self._size
        self._flushing = threading.Thread(
            target=_datasync_quietly, args=(self._fd,), name="tillage-pack-writeback"
        )
        self._flushing.start()

    def _settle(self) -> None:
        """Waits for the write-behind, if one runs: before the fsync, and before the close."""
        if self._flushing is not None:
            self._flushing.join()
            self._flushing = None

    def sync(self) -> None:
        """Makes every appended record durable (INV-2: before anything may reference it)."""
        if self._fd < 0:
            return
        self._write_pending()
        self._settle()
        os.fsync(self._fd)
        failpoints.hit("pack.after_fsync")

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self._write_pending()
            finally:
                self._settle()
                os.close(self._fd)
                self._fd = -1

    def discard(self) -> None:
        """Deletes this pack: only for a writer whose records nothing references yet."""
        self._pending.clear()
        self._pending_bytes = 0
        if self._fd >= 0:
            self._settle()
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class PackFiles:
    """Open pack files for reading, at most `limit` at a time (least recently used closed
    first), safe to share between threads: a store is thousands of packs (one per seal), and a
    process may open only so many files.

    The lock guards only the table: reads run outside it, several at a time, and an fd a read
    is using is closed by the last reader to finish with it, never under its feet (a number
    closed under a read could be reused by another open and read the wrong file)."""

    def __init__(self, directory: Path, limit: int | None = None) -> None:
        self.directory = directory
        self.limit = limit if limit is not None else fd_budget(64, 8)
        self._fds: dict[str, int] = {}
        self._readers: dict[int, int] = {}  # fd -> reads using it now
        self._retired: set[int] = set()  # fds out of the table, closed when their reads end
        self._lock = threading.Lock()
        # A store a library caller never closed must not keep its packs open: the fds are
        # plain ints, so nothing else would close them when the store is collected.
        weakref.finalize(self, _close_all, self._fds)

    def pread(self, pack: str, length: int, offset: int) -> bytes:
        """Reads `length` bytes at `offset` of `pack`; integrity error when the pack is gone."""
        fd = self._borrow(pack)
        try:
            return os.pread(fd, length, offset)
        finally:
            self._give_back(fd)

    def _borrow(self, pack: str) -> int:
        with self._lock:
            fd = self._fds.pop(pack, None)
            if fd is None:
                try:
                    fd = os.open(self.directory / pack, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError as exc:
                    raise IntegrityError(f"pack {pack} is missing from the store") from exc
                while len(self._fds) >= self.limit:
                    self._retire(self._fds.pop(next(iter(self._fds))))
            self._fds[pack] = fd  # most recently used last
            self._readers[fd] = self._readers.get(fd, 0) + 1
            return fd

    def _give_back(self, fd: int) -> None:
        with self._lock:
            left = self._readers.pop(fd) - 1
            if left:
                self._readers[fd] = left
            elif fd in self._retired:
                self._retired.discard(fd)
                os.close(fd)

    def _retire(self, fd: int) -> None:
        """Closes an fd taken out of the table now, or when the reads using it end."""
        if fd in self._readers:
            self._retired.add(fd)
        else:
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                self._retire(fd)
            self._fds.clear()


def _close_all(fds: dict[str, int]) -> None:
    for fd in fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


class PackReader:
    """Reads records by location through a bounded pool of open pack files."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._files = PackFiles(directory)

    def read(self, loc: Location, expect_id: bytes | None = None) -> tuple[int, bytes]:
        """Returns (kind, raw bytes) of the record at `loc`, verified."""
        data = self._files.pread(loc.pack, loc.length, loc.offset)
        kind, _id, raw = decode_record(data, expect_id)
        return kind, raw

    def read_raw(self, loc: Location) -> bytes:
        """The record's bytes at `loc`, unchecked (the caller proves them)."""
        return self._files.pread(loc.pack, loc.length, loc.offset)

    def intact(self, loc: Location) -> bool:
        """Tells whether the record at `loc` is whole and passes its checksum (no decompress)."""
        try:
            data = self._files.pread(loc.pack, loc.length, loc.offset)
        except (OSError, IntegrityError):
            return False
        return record_whole(data, loc.length)

    def close(self) -> None:
        self._files.close()


@dataclass(frozen=True)
class PackScan:
    """What a scan of one pack found: its whole records and the byte ranges that are not."""

    records: list[ScannedRecord]
    damaged: list[tuple[int, int]]


def _record_at(data: mmap.mmap, offset: int) -> tuple[int, bytes, int, int] | None:
    """Returns (kind, id, raw_len, length) of a whole, checksummed record at `offset`."""
    end = len(data)
    if offset + HEADER_SIZE + TRAILER_SIZE > end:
        return None
    magic, kind, _flags, _r, object_id, raw_len, stored_len = _HEADER.unpack_from(data, offset)
    if magic != RECORD_MAGIC or stored_len > MAX_STORED:
        return None
    length = HEADER_SIZE + stored_len + TRAILER_SIZE
    if offset + length > end:
        return None
    (crc,) = _CRC.unpack_from(data, offset + HEADER_SIZE + stored_len)
    header = data[offset : offset + HEADER_SIZE]
    payload = data[offset + HEADER_SIZE : offset + HEADER_SIZE + stored_len]
    if zlib.crc32(payload, zlib.crc32(header)) != crc:
        return None
    return kind, object_id, raw_len, length


def scan_pack(path: Path) -> PackScan:
    """Returns every whole record of a pack, resynchronising past damage.

    A torn tail (a crash mid-append) or a damaged record is skipped to the next record that
    verifies on its own, so one bad byte never hides the good records after it (INV-3).
    """
    name = path.name
    records: list[ScannedRecord] = []
    damaged: list[tuple[int, int]] = []
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < len(PACK_MAGIC):
            return PackScan([], [(0, size)] if size else [])
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data[: len(PACK_MAGIC)] != PACK_MAGIC:
                return PackScan([], [(0, size)])
            offset = len(PACK_MAGIC)
            while offset < size:
                found = _record_at(data, offset)
                if found is not None:
                    kind, object_id, raw_len, length = found
                    records.append(
                        ScannedRecord(kind, object_id, raw_len, Location(name, offset, length))
                    )
                    offset += length
                    continue
                nxt = data.find(RECORD_MAGIC, offset + 1)
                while nxt != -1 and _record_at(data, nxt) is None:
                    nxt = data.find(RECORD_MAGIC, nxt + 1)
                stop = size if nxt == -1 else nxt
                damaged.append((offset, stop))
                offset = stop
    return PackScan(records, damaged)


def being_written(path: Path) -> bool:
    """Tells whether a live writer still holds the pack (its flock); False when it is free or
    gone."""
    return is_held(path)


def iter_packs(directory: Path) -> Iterator[Path]:
    """Yields the store's pack files in name order."""
    if directory.is_dir():
        yield from sorted(p for p in directory.iterdir() if p.name.endswith(".pack"))
