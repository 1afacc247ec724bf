"""A file's bytes into the store: one chunk for a small file, content-defined chunks and a
chunk list above (FastCDC), holes kept as holes, and an appended file's earlier chunks reused
once each is proven by hashing it, so a growing log is not cut again."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.core.format import CDC_AVG, CDC_MAX, CDC_MIN, HOLE_MAX, WHOLE_FILE_MAX
from tillage.core.ids import blob_id, chunk_id
from tillage.core.models import (
    HOLE_ID,
    ChunkRef,
    ContentKind,
)
from tillage.store.store import ObjectWriter
from tillage.workspace.sqlite_image import SIDECAR_SUFFIXES

# A file modified this close to the start of a capture may change again within the file
# system's timestamp granularity without its facts changing: it is re-read next time. Linux
# file systems with nanosecond timestamps tick with the coarse clock (at most 10 ms); a file
# whose timestamps have no sub-second part is on a file system that keeps whole seconds.


def store_content(
    fd: int,
    writer: ObjectWriter | None,
    resume: list[ChunkRef] | None = None,
    head: bytes | None = None,
    st: os.stat_result | None = None,
) -> tuple[int, bytes, int]:
    """Returns (content kind, ID, size) of the bytes in `fd`, storing them via `writer`.

    Small files are one chunk; larger ones are cut into content-defined chunks and a chunk list,
    streamed so memory stays bounded whatever the file size. `resume` is the chunk list of an
    earlier version but its last chunk: when the file still starts with exactly those chunks
    (each re-hashed to its ID), chunking restarts after them, which cuts exactly as a full pass
    would, since FastCDC's state resets at every cut, and saves re-cutting an appended log.
    `head` is the file's first bytes when the caller has read them already, `st` its stat.

    A sparse file (fewer blocks allocated than its size says, and a hole the file system can
    point at) is read by its data extents only: each is chunked on its own and each hole becomes
    a HOLE_ID reference, so its zeros are neither read nor stored; it is a chunk list whatever
    its size, so a rewind can leave its holes unallocated.
    """
    if head is None:
        if st is None:
            st = os.fstat(fd)
        if maybe_sparse(st):
            sparse = _store_sparse(fd, writer, st.st_size)
            if sparse is not None:
                return sparse
        head = read_up_to(fd, WHOLE_FILE_MAX + 1, st.st_size)
    if len(head) <= WHOLE_FILE_MAX:
        cid = chunk_id(head)
        if writer is not None:
            writer.put(Kind.CHUNK, cid, head)
        return int(ContentKind.CHUNK), cid, len(head)
    refs = list(resume) if resume and _starts_with(fd, resume) else []
    size = sum(r.length for r in refs)
    size += _store_range(fd, writer, size, None, refs)
    return _store_blob(writer, size, refs)


def _store_blob(
    writer: ObjectWriter | None, size: int, refs: list[ChunkRef]
) -> tuple[int, bytes, int]:
    encoded = codec.encode_blob(size, refs)
    bid = blob_id(encoded)
    if writer is not None:
        writer.put(Kind.BLOB, bid, encoded)
    return int(ContentKind.BLOB), bid, size


def _store_range(
    fd: int, writer: ObjectWriter | None, start: int, end: int | None, refs: list[ChunkRef]
) -> int:
    """Cuts the bytes of `fd` from `start` to `end` (None: the end of the file) into chunks,
    appends their references to `refs`, and returns how many bytes they hold."""
    from pyfastcdc import FastCDC

    cdc = FastCDC(CDC_AVG, min_size=CDC_MIN, max_size=CDC_MAX)
    done = 0
    for chunk in cdc.cut_stream(_Range(fd, start, end)):
        data = chunk.data
        cid = chunk_id(data)
        if writer is not None:
            writer.put(Kind.CHUNK, cid, data)
        refs.append(ChunkRef(cid, chunk.length))
        done += chunk.length
    return done


class _Range:
    """A read-only stream over part of a file, read with pread (the offset is ours alone)."""

    def __init__(self, fd: int, start: int, end: int | None) -> None:
        self.fd = fd
        self.pos = start
        self.end = end

    def readinto(self, buf: memoryview) -> int:
        want = len(buf) if self.end is None else min(len(buf), self.end - self.pos)
        if want <= 0:
            return 0
        got = os.preadv(self.fd, [buf[:want]], self.pos)
        self.pos += got
        return got


def maybe_sparse(st: os.stat_result) -> bool:
    """Tells whether a regular file may have holes: fewer 512-byte blocks than its size needs."""
    return st.st_size > 0 and st.st_blocks * 512 < st.st_size


def _next_data(fd: int, pos: int, size: int) -> int:
    try:
        return min(os.lseek(fd, pos, os.SEEK_DATA), size)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return size  # nothing but a hole up to the end
        raise


def _store_sparse(fd: int, writer: ObjectWriter | None, size: int) -> tuple[int, bytes, int] | None:
    """Stores a file by its data extents and holes; None when the file system shows no hole
    (it cannot seek by holes, or the blocks are fewer only because it compresses them)."""
    try:
        first = _next_data(fd, 0, size)
        if first == 0 and min(os.lseek(fd, 0, os.SEEK_HOLE), size) >= size:
            return None
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return None
        raise
    refs: list[ChunkRef] = []
    pos = 0
    while pos < size:
        data = _next_data(fd, pos, size)
        while pos < data:
            length = min(data - pos, HOLE_MAX)
            refs.append(ChunkRef(HOLE_ID, length))
            pos += length
        if pos >= size:
            break
        end = min(os.lseek(fd, pos, os.SEEK_HOLE), size)
        got = _store_range(fd, writer, pos, end, refs)
        if got < end - pos:
            break  # the file shrank while we read it: the caller's stat check retries
        pos = end
    return _store_blob(writer, sum(r.length for r in refs), refs)


def _starts_with(fd: int, refs: list[ChunkRef]) -> bool:
    """Tells whether the file's first bytes are exactly these chunks (each hashed to its ID).

    A growing log is proven unchanged up to its old end this way on every seal: past a few
    MiB the two halves are read and hashed on two threads (pread and BLAKE3 release the GIL),
    which nearly halves the cost of a seal after an append to a large file."""
    spans: list[tuple[int, ChunkRef]] = []
    offset = 0
    for ref in refs:
        spans.append((offset, ref))
        offset += ref.length
    if offset < PARALLEL_PROOF_MIN:
        return _spans_hold(fd, spans)
    from concurrent.futures import ThreadPoolExecutor

    half = len(spans) // 2
    with ThreadPoolExecutor(1, thread_name_prefix="tillage-prefix") as pool:
        first = pool.submit(_spans_hold, fd, spans[:half])
        second = _spans_hold(fd, spans[half:])
        return first.result() and second


PARALLEL_PROOF_MIN = 8 << 20


def _spans_hold(fd: int, spans: list[tuple[int, ChunkRef]]) -> bool:
    for offset, ref in spans:
        data = os.pread(fd, ref.length, offset)
        if len(data) != ref.length or chunk_id(data) != ref.id:
            return False
    return True


def read_up_to(fd: int, limit: int, size_hint: int) -> bytes:
    """Reads at most `limit` bytes from the start of `fd`, sized by the file's expected size: a
    read buffer of `limit` bytes for every small file would cost more than the reading."""
    want = min(limit, size_hint + 1)
    first = os.pread(fd, max(want, 1), 0)  # by offset: one system call, no seek
    if len(first) < want or len(first) >= limit:
        return first[:limit]
    parts = [first]
    done = len(first)
    while done < limit:  # the file grew while we read it
        piece = os.pread(fd, min(limit - done, 1 << 20), done)
        if not piece:
            break
        parts.append(piece)
        done += len(piece)
    return b"".join(parts)


def store_sqlite_image(
    fd: int, db_path: Path, tmp_dir: Path, writer: ObjectWriter | None
) -> tuple[int, bytes, int]:
    """Stores (or, with no writer, only hashes) the consistent image of the live SQLite
    database at `db_path`, whose file `fd` is open: a byte-exact image is read through `fd`,
    already open, because closing another descriptor of the database would drop the locks
    SQLite holds for the read (POSIX locks); a copied image from its temporary file. Raises
    SqliteBusy, SqliteUnreadable or OSError as consistent_image does."""
    from tillage.workspace.sqlite_image import consistent_image

    with consistent_image(db_path, tmp_dir) as image:
        if image.byte_exact:
            return store_content(fd, writer)
        img_fd = os.open(image.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return store_content(img_fd, writer)
        finally:
            os.close(img_fd)


def sqlite_image_id(db_path: Path, tmp_dir: Path) -> tuple[bytes, int] | None:
    """The content ID and size a seal would give the live SQLite database at `db_path` (its
    consistent image, database and journal together), stored nowhere; None when it cannot be
    read as one (busy, unreadable, gone): a caller comparing it must treat that as changed."""
    from tillage.workspace.sqlite_image import SqliteBusy, SqliteUnreadable

    try:
        # One descriptor, opened before the read transaction and closed after it.
        fd = os.open(db_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        _kind, content, size = store_sqlite_image(fd, db_path, tmp_dir, None)
    except (SqliteBusy, SqliteUnreadable, OSError):
        return None
    finally:
        os.close(fd)
    return content, size


def user_xattrs(target: str | int) -> tuple[tuple[bytes, bytes], ...]:
    """The `user.*` extended attributes of a path (never followed) or an open file."""
    follow = isinstance(target, int)  # an fd is the file itself; a path must not be followed
    try:
        names = os.listxattr(target, follow_symlinks=follow)
    except OSError:
        return ()
    out = []
    for key in names:
        if key.startswith("user."):
            try:
                out.append((key.encode(), os.getxattr(target, key, follow_symlinks=follow)))
            except OSError:
                continue
    return tuple(sorted(out))


def sidecar_facts(dir_fd: int, name: str) -> str:
    """Facts of a file's SQLite sidecars, so a change only to `db-wal` re-reads `db`."""
    facts = []
    for suffix in SIDECAR_SUFFIXES[:1] + SIDECAR_SUFFIXES[2:]:
        try:
            st = os.stat(name + suffix, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        facts.append(f"{suffix}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}")
    return ";".join(facts)
