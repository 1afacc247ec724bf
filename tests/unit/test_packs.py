"""Pack records verify on their own, and a scan finds every whole record past any damage."""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.hypothesis_profiles import examples

from tillage.core.ids import object_hash
from tillage.errors import IntegrityError
from tillage.store.packs import (
    FLAG_ZSTD,
    HEADER_SIZE,
    PACK_MAGIC,
    TRAILER_SIZE,
    Location,
    PackFiles,
    PackReader,
    PackWriter,
    Pending,
    decode_record,
    encode_batch,
    encode_record,
    scan_pack,
)

kinds = st.integers(1, 4)
payloads = st.binary(max_size=2000) | st.builds(
    lambda piece, times: piece * times, st.binary(min_size=1, max_size=8), st.integers(1, 500)
)


def _record(kind: int, raw: bytes) -> bytes:
    return encode_record(kind, object_hash(kind, raw), raw)


def _flags(record: bytes) -> int:
    return record[5]


def _write_pack(path: Path, records: list[bytes], junk: dict[int, bytes] | None = None) -> None:
    """Writes a pack of `records`, with `junk[i]` bytes just before record i."""
    parts = [PACK_MAGIC]
    for i, rec in enumerate(records):
        parts.append((junk or {}).get(i, b""))
        parts.append(rec)
    path.write_bytes(b"".join(parts))


def _offsets(records: list[bytes]) -> list[int]:
    out, pos = [], len(PACK_MAGIC)
    for rec in records:
        out.append(pos)
        pos += len(rec)
    return out


def _some_records(n: int, seed: int = 0) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        raw = rnd.randbytes(rnd.randint(0, 3000)) if i % 2 else b"text %d " % i * rnd.randint(1, 99)
        out.append(_record(1 + i % 4, raw))
    return out


# -- one record ----------------------------------------------------------------------------


def test_a_compressible_object_is_stored_compressed_and_decodes_to_its_bytes() -> None:
    raw = b"all work and no play " * 500
    record = _record(1, raw)
    assert _flags(record) & FLAG_ZSTD
    assert len(record) < len(raw)
    assert decode_record(record) == (1, object_hash(1, raw), raw)


def test_an_incompressible_object_is_stored_raw_and_decodes_to_its_bytes() -> None:
    raw = random.Random(1).randbytes(4096)
    record = _record(3, raw)
    assert _flags(record) == 0
    assert record[HEADER_SIZE : HEADER_SIZE + len(raw)] == raw
    assert len(record) == HEADER_SIZE + len(raw) + TRAILER_SIZE
    assert decode_record(record) == (3, object_hash(3, raw), raw)


@examples(100)
@given(kinds, payloads)
def test_any_object_decodes_from_its_record_to_its_kind_id_and_bytes(kind: int, raw: bytes) -> None:
    oid = object_hash(kind, raw)
    record = encode_record(kind, oid, raw)
    assert decode_record(record) == (kind, oid, raw)
    assert decode_record(record, expect_id=oid) == (kind, oid, raw)


def test_an_empty_object_has_a_record_too() -> None:
    assert decode_record(_record(1, b""))[2] == b""


def test_a_record_asked_for_under_another_id_is_refused() -> None:
    record = _record(1, b"mine")
    with pytest.raises(IntegrityError):
        decode_record(record, expect_id=object_hash(1, b"yours"))


def test_a_record_whose_id_is_not_the_hash_of_its_bytes_is_refused() -> None:
    with pytest.raises(IntegrityError):
        decode_record(encode_record(1, object_hash(1, b"other"), b"mine"))
    with pytest.raises(IntegrityError):
        decode_record(encode_record(2, object_hash(1, b"mine"), b"mine"))  # right bytes, wrong kind


def test_a_checksummed_record_of_an_unknown_kind_is_refused_as_an_integrity_error() -> None:
    for kind in (0, 5, 255):
        with pytest.raises(IntegrityError):
            decode_record(encode_record(kind, object_hash(1, b"x"), b"x"))


@pytest.mark.parametrize("raw", [b"squeeze me " * 20, bytes(range(64))], ids=["zstd", "raw"])
def test_every_single_flipped_bit_of_a_record_is_detected(raw: bytes) -> None:
    record = _record(1, raw)
    for bit in range(len(record) * 8):
        damaged = bytearray(record)
        damaged[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(IntegrityError):
            decode_record(bytes(damaged))


@examples(150)
@given(kinds, payloads, st.data())
def test_a_flipped_bit_anywhere_in_any_record_is_refused(
    kind: int, raw: bytes, data: st.DataObject
) -> None:
    record = bytearray(_record(kind, raw))
    bit = data.draw(st.integers(0, len(record) * 8 - 1))
    record[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(IntegrityError):
        decode_record(bytes(record))


@examples(60)
@given(kinds, payloads, st.data())
def test_a_record_cut_short_or_run_on_is_refused(
    kind: int, raw: bytes, data: st.DataObject
) -> None:
    record = _record(kind, raw)
    cut = data.draw(st.integers(0, len(record) - 1))
    with pytest.raises(IntegrityError):
        decode_record(record[:cut])
    with pytest.raises(IntegrityError):
        decode_record(record + data.draw(st.binary(min_size=1, max_size=8)))


# -- scanning a pack -----------------------------------------------------------------------


def test_a_scan_finds_every_record_of_a_whole_pack_where_it_lies(tmp_path: Path) -> None:
    records = _some_records(7)
    pack = tmp_path / "0123456789abcdef.pack"
    _write_pack(pack, records)
    scan = scan_pack(pack)
    assert scan.damaged == []
    assert [r.location for r in scan.records] == [
        Location(pack.name, off, len(rec))
        for off, rec in zip(_offsets(records), records, strict=True)
    ]
    data = pack.read_bytes()
    for found, rec in zip(scan.records, records, strict=True):
        kind, oid, raw = decode_record(rec)
        assert (found.kind, found.id, found.raw_len) == (kind, oid, len(raw))
        loc = found.location
        assert data[loc.offset : loc.offset + loc.length] == rec


@pytest.mark.parametrize("keep", [1, HEADER_SIZE - 1, HEADER_SIZE + 5, -1])
def test_a_torn_tail_is_reported_damaged_and_the_records_before_it_are_found(
    tmp_path: Path, keep: int
) -> None:
    records = _some_records(4)
    pack = tmp_path / "torn.pack"
    *whole, last = records
    _write_pack(pack, [*whole, last[:keep]])
    scan = scan_pack(pack)
    assert [r.location.offset for r in scan.records] == _offsets(whole)
    size = pack.stat().st_size
    assert scan.damaged == [(_offsets(records)[-1], size)]


@pytest.mark.parametrize("where", ["magic", "header", "payload", "crc"])
def test_a_damaged_middle_record_is_skipped_and_the_records_after_it_are_found(
    tmp_path: Path, where: str
) -> None:
    records = _some_records(5)
    spot = {"magic": 0, "header": 20, "payload": HEADER_SIZE + 3, "crc": len(records[2]) - 1}
    bad = bytearray(records[2])
    bad[spot[where]] ^= 0x40
    pack = tmp_path / "middle.pack"
    _write_pack(pack, [*records[:2], bytes(bad), *records[3:]])
    scan = scan_pack(pack)
    offsets = _offsets(records)
    assert [r.location.offset for r in scan.records] == offsets[:2] + offsets[3:]
    assert scan.damaged == [(offsets[2], offsets[3])]


@examples(40)
@given(st.integers(2, 6), st.integers(0, 2**32 - 1), st.data())
def test_one_damaged_byte_in_any_record_hides_only_that_record(
    tmp_path_factory: pytest.TempPathFactory, n: int, seed: int, data: st.DataObject
) -> None:
    records = _some_records(n, seed)
    victim = data.draw(st.integers(0, n - 1))
    at = data.draw(st.integers(0, len(records[victim]) - 1))
    bad = bytearray(records[victim])
    bad[at] ^= data.draw(st.integers(1, 255))
    pack = tmp_path_factory.mktemp("scan") / "p.pack"
    _write_pack(pack, [*records[:victim], bytes(bad), *records[victim + 1 :]])
    scan = scan_pack(pack)
    offsets = _offsets(records)
    assert [r.location.offset for r in scan.records] == offsets[:victim] + offsets[victim + 1 :]
    end = offsets[victim + 1] if victim + 1 < n else pack.stat().st_size
    assert scan.damaged == [(offsets[victim], end)]


def test_junk_between_records_is_reported_and_every_record_is_found(tmp_path: Path) -> None:
    records = _some_records(3)
    pack = tmp_path / "junk.pack"
    _write_pack(pack, records, junk={1: b"TRC1 not a record", 2: b"\0" * 100})
    scan = scan_pack(pack)
    assert [decode_record(r)[1] for r in records] == [r.id for r in scan.records]
    first = len(PACK_MAGIC) + len(records[0])
    second = first + 17 + len(records[1])
    assert scan.damaged == [(first, first + 17), (second, second + 100)]


@pytest.mark.parametrize(
    ("content", "damaged"),
    [
        (b"", []),
        (b"TILL", [(0, 4)]),
        (PACK_MAGIC, []),
        (b"NOTAPACK" + _record(1, b"x"), [(0, 8 + len(_record(1, b"x")))]),
    ],
    ids=["empty", "short", "magic-only", "bad-magic"],
)
def test_a_pack_without_a_whole_magic_has_no_records(
    tmp_path: Path, content: bytes, damaged: list[tuple[int, int]]
) -> None:
    pack = tmp_path / "odd.pack"
    pack.write_bytes(content)
    scan = scan_pack(pack)
    assert scan.records == []
    assert scan.damaged == damaged


def test_records_a_writer_appends_are_found_by_a_scan_and_read_back(tmp_path: Path) -> None:
    raws = [(1, b"chunk " * 100), (3, b"tree bytes"), (4, random.Random(2).randbytes(500))]
    writer = PackWriter(tmp_path)
    locations = [writer.append(_record(kind, raw)) for kind, raw in raws]
    writer.sync()
    writer.close()
    scan = scan_pack(writer.path)
    assert scan.damaged == []
    assert [r.location for r in scan.records] == locations
    reader = PackReader(tmp_path)
    try:
        for (kind, raw), loc in zip(raws, locations, strict=True):
            assert reader.read(loc, expect_id=object_hash(kind, raw)) == (kind, raw)
    finally:
        reader.close()


def _packs_of(directory: Path, count: int) -> list[tuple[Location, bytes]]:
    """`count` packs of one record each, and what each record holds."""
    out = []
    for n in range(count):
        record = _record(1, f"pack {n} ".encode() * 50)
        writer = PackWriter(directory)
        loc = writer.append(record)
        writer.sync()
        writer.close()
        out.append((loc, record))
    return out


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_threads_reading_more_packs_than_may_be_open_each_read_their_own_bytes(
    tmp_path: Path,
) -> None:
    import threading

    packs = _packs_of(tmp_path, 6)
    files = PackFiles(tmp_path, limit=2)
    before = _open_fds()
    wrong: list[int] = []

    def read(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(300):
            loc, record = rng.choice(packs)
            if files.pread(loc.pack, loc.length, loc.offset) != record:
                wrong.append(seed)

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    files.close()
    assert wrong == []
    assert _open_fds() <= before


def test_a_pack_closed_for_room_while_a_read_uses_it_is_closed_when_that_read_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow read of one pack while others push it out of the table: its fd is not closed
    (and its number reused by the next open) under the read, and is not left open after."""
    import threading

    (slow_loc, slow_record), *others = _packs_of(tmp_path, 4)
    files = PackFiles(tmp_path, limit=1)
    before = _open_fds()
    reading, release = threading.Event(), threading.Event()
    real_pread = os.pread
    slow_fds: list[int] = []

    def pread(fd: int, length: int, offset: int) -> bytes:
        if not slow_fds and length == slow_loc.length:
            slow_fds.append(fd)
            reading.set()
            assert release.wait(10)
        return real_pread(fd, length, offset)

    monkeypatch.setattr(os, "pread", pread)
    got: list[bytes] = []
    slow = threading.Thread(
        target=lambda: got.append(files.pread(slow_loc.pack, slow_loc.length, slow_loc.offset))
    )
    slow.start()
    assert reading.wait(10)
    for loc, record in others:  # each takes the only place in the table
        assert files.pread(loc.pack, loc.length, loc.offset) == record
    os.fstat(slow_fds[0])  # still open under the slow read
    release.set()
    slow.join()
    assert got == [slow_record]
    files.close()
    assert _open_fds() <= before


def test_a_writer_writes_out_what_it_holds_without_a_second_copy_of_it(tmp_path: Path) -> None:
    """Thousands of small records (more than one writev takes) and one large one: every record
    lands where append said, and writing them out costs no copy of the buffered bytes."""
    rng = random.Random(5)
    raws = [(1, rng.randbytes(40)) for _ in range(3000)] + [(1, rng.randbytes(1 << 20))]
    records = [_record(kind, raw) for kind, raw in raws]
    writer = PackWriter(tmp_path)
    locations = [writer.append(record) for record in records]
    held = sum(len(r) for r in records)
    tracemalloc.start()
    try:
        writer.sync()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    writer.close()
    assert peak < held // 4, (peak, held)
    scan = scan_pack(writer.path)
    assert scan.damaged == []
    assert [r.location for r in scan.records] == locations


def test_records_cut_by_short_writes_land_whole_where_append_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.writev

    def short(fd: int, buffers: list[bytes]) -> int:
        return real(fd, [memoryview(b"".join(bytes(b) for b in buffers))[:777]])

    monkeypatch.setattr(os, "writev", short)
    rng = random.Random(6)
    raws = [(1, rng.randbytes(rng.randrange(1, 3000))) for _ in range(200)]
    writer = PackWriter(tmp_path)
    locations = [writer.append(_record(kind, raw)) for kind, raw in raws]
    writer.sync()
    writer.close()
    scan = scan_pack(writer.path)
    assert scan.damaged == []
    assert [r.location for r in scan.records] == locations


def test_a_batch_encodes_to_the_records_each_object_would_have_alone() -> None:
    """Small objects are compressed together (one call per size class), the rest one by one,
    and a record already encoded passes as it is: whichever way, each record is the one
    encode_record makes."""
    rng = random.Random(9)
    objects = [
        (1, b""),
        (1, b"source line\n" * 300),
        (1, rng.randbytes(2000)),  # incompressible: stored raw
        (3, b"tree entry" * 10),
        (1, b"a source file of ten kilobytes\n" * 330),  # above the tiny size
        (1, b"another source file\n" * 800),
        (1, b"log line of a big chunk\n" * 20000),  # above the small-object size
    ]
    batch: list[Pending] = [(k, object_hash(k, raw), raw, len(raw), False) for k, raw in objects]
    ready = _record(2, b"a blob")
    batch.append((2, object_hash(2, b"a blob"), ready, 6, True))
    expected = [encode_record(k, oid, raw) for k, oid, raw, _n, _e in batch[:-1]] + [ready]
    assert encode_batch(batch) == expected
    assert encode_batch(batch[1:2]) == expected[1:2]  # one small object alone


def test_a_batch_encodes_the_same_where_zstandard_has_no_batch_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """python-zstandard calls its batch call experimental: without it, the same records."""
    from tillage.store import packs

    real = packs._compressor

    class OneByOne:
        def __init__(self, size: int) -> None:
            self.compress = real(size).compress

    raws = [b"first file\n" * 40, b"second file\n" * 50, b"x"]
    batch: list[Pending] = [(1, object_hash(1, r), r, len(r), False) for r in raws]
    expected = encode_batch(batch)
    monkeypatch.setattr(packs, "_compressor", OneByOne)
    assert encode_batch(batch) == expected
