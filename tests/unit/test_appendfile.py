"""A block appender leaves exactly the bytes appended, whether the file system takes direct
I/O, refuses it, or gives up on it halfway; and a write that fails on its thread is raised."""

from __future__ import annotations

import errno
import fcntl
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tillage.platform import appendfile
from tillage.platform.appendfile import BLOCK, BlockAppender
from tillage.platform.errors import DiskFullError

CAPACITY = 4 * BLOCK


@pytest.fixture
def target(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    path = tmp_path / "out.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        yield fd, path
    finally:
        os.close(fd)


def _pieces(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    # Tiny ones, ones around a block, and ones longer than the whole buffer.
    sizes = (1, 7, BLOCK - 1, BLOCK, BLOCK + 1, 3 * CAPACITY + 5)
    return [rng.randbytes(rng.choice(sizes)) for _ in range(count)]


def _append_all(out: BlockAppender, pieces: list[bytes], flush_every: int = 0) -> bytes:
    expected = bytearray()
    for n, piece in enumerate(pieces, 1):
        out.append(piece)
        expected += piece
        assert out.size == len(expected)
        if flush_every and n % flush_every == 0:
            assert out.flush()
            # Flushed: the file is exactly what was appended, no padding past it.
            assert os.fstat(out.fd).st_size == len(expected)
    out.flush()
    return bytes(expected)


def test_what_is_appended_is_what_the_file_holds(target: tuple[int, Path]) -> None:
    fd, path = target
    out = BlockAppender(fd, CAPACITY)
    try:
        expected = _append_all(out, _pieces(1, 60))
    finally:
        out.close()
    assert path.read_bytes() == expected


def test_flushing_between_appends_leaves_no_padding_and_loses_nothing(
    target: tuple[int, Path],
) -> None:
    """A flush writes the partial last block padded and cuts the file back; the appends after
    it rewrite that block with what follows."""
    fd, path = target
    out = BlockAppender(fd, CAPACITY)
    try:
        expected = _append_all(out, _pieces(2, 80), flush_every=3)
        assert out.flush() is False  # nothing left to write
    finally:
        out.close()
    assert path.read_bytes() == expected


def test_a_file_system_that_refuses_direct_io_is_written_through_the_cache(
    target: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = fcntl.fcntl

    def no_direct(fd: int, cmd: int, arg: int = 0) -> int:
        if cmd == fcntl.F_SETFL and arg & appendfile._O_DIRECT:
            raise OSError(errno.EINVAL, "direct I/O not supported")
        return real(fd, cmd, arg)

    monkeypatch.setattr(fcntl, "fcntl", no_direct)
    fd, path = target
    out = BlockAppender(fd, CAPACITY)
    try:
        assert out.direct is False
        expected = _append_all(out, _pieces(3, 40), flush_every=4)
    finally:
        out.close()
    assert path.read_bytes() == expected


@pytest.mark.skipif(not appendfile._O_DIRECT, reason="no O_DIRECT on this platform")
def test_a_direct_write_refused_halfway_goes_on_through_the_cache(
    target: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some file systems take the flag and refuse the writes (EINVAL): the refused write and
    every one after it go through the page cache, and no byte is lost."""
    real = os.pwrite
    refused: list[int] = []

    def refuse_direct(fd: int, data: memoryview, offset: int) -> int:
        direct = fcntl.fcntl(fd, fcntl.F_GETFL) & appendfile._O_DIRECT
        if direct and not refused and offset > 0:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", refuse_direct)
    fd, path = target
    out = BlockAppender(fd, CAPACITY)
    if not out.direct:
        out.close()
        pytest.skip("this file system refuses direct I/O from the start")
    try:
        expected = _append_all(out, _pieces(4, 60), flush_every=5)
        assert refused and out.direct is False
    finally:
        out.close()
    assert path.read_bytes() == expected


def test_short_writes_land_every_byte_where_it_belongs(
    target: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short write leaves the rest unaligned: the appender writes it through the cache."""
    real = os.pwrite

    def short(fd: int, data: memoryview, offset: int) -> int:
        return real(fd, data[: max(1, min(len(data), 777))], offset)

    monkeypatch.setattr(os, "pwrite", short)
    fd, path = target
    out = BlockAppender(fd, CAPACITY)
    try:
        expected = _append_all(out, _pieces(5, 30), flush_every=7)
    finally:
        out.close()
    assert path.read_bytes() == expected


def test_a_full_disk_on_the_writing_thread_is_raised_to_the_appender(
    target: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, data: memoryview, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    fd, _path = target
    out = BlockAppender(fd, CAPACITY)
    try:
        out.append(bytes(CAPACITY))  # fills the buffer: it goes out on its own thread
        with pytest.raises(DiskFullError):
            out.flush()
    finally:
        out.close()


def test_a_full_disk_when_flushing_is_raised_as_disk_full(
    target: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, data: memoryview, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    fd, _path = target
    out = BlockAppender(fd, CAPACITY)
    try:
        out.append(b"a few bytes")
        with pytest.raises(DiskFullError):
            out.flush()
    finally:
        out.close()


def test_a_parked_appender_frees_its_buffers_and_goes_on_where_it_was(
    target: tuple[int, Path],
) -> None:
    fd, path = target
    out = BlockAppender(fd, CAPACITY)
    expected = bytearray()
    try:
        for n, piece in enumerate(_pieces(6, 40)):
            out.append(piece)
            expected += piece
            if n % 3 == 0:
                out.park()
                assert out._view is None and not out._maps
                assert os.fstat(fd).st_size == len(expected)
        out.flush()
    finally:
        out.close()
    assert path.read_bytes() == bytes(expected)
