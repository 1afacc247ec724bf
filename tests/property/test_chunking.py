"""Chunking file content (content.store_content): whole small files, content-defined cuts above.

The cuts define dedup identity (docs/design/format.md), so a small edit near the start of a large
file must leave almost every chunk, and so almost every stored byte, shared with the old version.
"""

from __future__ import annotations

import os
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core import codec
from tillage.core.codec import Kind
from tillage.core.format import CDC_MAX, CDC_MIN, WHOLE_FILE_MAX
from tillage.core.ids import blob_id, chunk_id
from tillage.core.models import ChunkRef, ContentKind
from tillage.workspace.content import store_content

MIB = 1024 * 1024


@dataclass
class CollectingWriter:
    """Stands in for the store's ObjectWriter: keeps a copy of every object put to it."""

    objects: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)
    order: list[bytes] = field(default_factory=list)

    def put(self, kind: int, object_id: bytes, raw: bytes | memoryview) -> bool:
        # A chunk's memoryview is only valid until the next chunk is cut: copy it now.
        self.order.append(object_id)
        if object_id in self.objects:
            return False
        self.objects[object_id] = (kind, bytes(raw))
        return True


@dataclass(frozen=True)
class Stored:
    kind: int
    content: bytes
    chunks: list[ChunkRef]
    writer: CollectingWriter


def _store(data: bytes) -> Stored:
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        writer = CollectingWriter()
        kind, content, size = store_content(f.fileno(), writer)
        assert size == len(data)
        assert store_content(f.fileno(), None) == (kind, content, size)  # no writer: same IDs
    if kind == ContentKind.CHUNK:
        return Stored(kind, content, [ChunkRef(content, len(data))], writer)
    assert kind == ContentKind.BLOB
    blob_kind, encoded = writer.objects[content]
    assert blob_kind == Kind.BLOB
    assert blob_id(encoded) == content
    blob_size, refs = codec.decode_blob(encoded)
    assert blob_size == len(data)
    return Stored(kind, content, refs, writer)


def _random_bytes(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


seeds = st.integers(0, 2**32 - 1)
large_sizes = st.integers(WHOLE_FILE_MAX + 1, 4 * MIB)


@examples(30)
@given(st.integers(0, WHOLE_FILE_MAX), seeds)
def test_a_file_of_at_most_the_whole_file_limit_is_one_chunk_whose_id_hashes_its_bytes(
    size: int, seed: int
) -> None:
    data = _random_bytes(seed, size)
    stored = _store(data)
    assert stored.kind == ContentKind.CHUNK
    assert stored.content == chunk_id(data)
    assert stored.writer.objects == {chunk_id(data): (Kind.CHUNK, data)}


@pytest.mark.parametrize("size", [0, 1, WHOLE_FILE_MAX - 1, WHOLE_FILE_MAX])
def test_files_up_to_and_at_the_whole_file_limit_are_stored_whole(size: int) -> None:
    data = _random_bytes(size, size)
    stored = _store(data)
    assert (stored.kind, stored.content) == (ContentKind.CHUNK, chunk_id(data))


def test_a_file_one_byte_over_the_whole_file_limit_is_cut_into_a_chunk_list() -> None:
    data = _random_bytes(7, WHOLE_FILE_MAX + 1)
    stored = _store(data)
    assert stored.kind == ContentKind.BLOB
    assert b"".join(stored.writer.objects[c.id][1] for c in stored.chunks) == data


@examples(12)
@given(large_sizes, seeds)
def test_the_chunks_of_a_large_file_concatenate_to_exactly_its_bytes(size: int, seed: int) -> None:
    data = _random_bytes(seed, size)
    stored = _store(data)
    assert stored.kind == ContentKind.BLOB
    pieces = []
    for ref in stored.chunks:
        kind, raw = stored.writer.objects[ref.id]
        assert kind == Kind.CHUNK
        assert chunk_id(raw) == ref.id
        assert len(raw) == ref.length
        pieces.append(raw)
    assert b"".join(pieces) == data
    # Every chunk is put before the chunk list that names it.
    assert stored.writer.order[-1] == stored.content


@examples(12)
@given(large_sizes, seeds, st.booleans())
def test_every_chunk_but_the_last_is_between_the_minimum_and_maximum_size(
    size: int, seed: int, zeros: bool
) -> None:
    data = bytes(size) if zeros else _random_bytes(seed, size)
    lengths = [c.length for c in _store(data).chunks]
    assert all(CDC_MIN <= n <= CDC_MAX for n in lengths[:-1])
    assert 0 < lengths[-1] <= CDC_MAX
    assert sum(lengths) == size


# Large enough that even maximal chunks make at least four of them.
LARGE = st.integers(4 * CDC_MAX, 4 * CDC_MAX + MIB)


@examples(10)
@given(
    LARGE,
    seeds,
    st.integers(0, 64 * 1024),
    st.binary(min_size=1, max_size=16),
)
def test_inserting_a_few_bytes_near_the_start_of_a_large_file_changes_only_a_chunk_or_two(
    size: int, seed: int, at: int, inserted: bytes
) -> None:
    data = _random_bytes(seed, size)
    before = [c.id for c in _store(data).chunks]
    after = [c.id for c in _store(data[:at] + inserted + data[at:]).chunks]
    assert len(before) >= 4
    assert len(set(after) - set(before)) <= 2
    # The cuts resynchronise: past the edit, the chunk lists are the same.
    assert after[2:] == before[-len(after[2:]) :]
    assert len(after) - 2 >= len(before) - 3


@examples(8)
@given(LARGE, seeds, st.integers(0, 64 * 1024), st.integers(1, 16))
def test_deleting_a_few_bytes_near_the_start_of_a_large_file_changes_only_a_chunk_or_two(
    size: int, seed: int, at: int, count: int
) -> None:
    data = _random_bytes(seed, size)
    before = [c.id for c in _store(data).chunks]
    after = [c.id for c in _store(data[:at] + data[at + count :]).chunks]
    assert len(set(after) - set(before)) <= 2
    assert after[2:] == before[-len(after[2:]) :]


def test_the_same_content_always_gets_the_same_chunks_and_id() -> None:
    data = _random_bytes(3, 2 * MIB)
    first, second = _store(data), _store(data)
    assert (first.kind, first.content, first.chunks) == (second.kind, second.content, second.chunks)


def test_store_content_reads_from_the_start_whatever_the_file_offset() -> None:
    data = _random_bytes(5, WHOLE_FILE_MAX + 4096)
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        reference = store_content(f.fileno(), None)
        os.lseek(f.fileno(), 12345, os.SEEK_SET)
        assert store_content(f.fileno(), None) == reference


def test_an_appended_file_resumes_chunking_and_cuts_exactly_as_a_full_pass(
    tmp_path: Path,
) -> None:
    rng = random.Random(7)
    path = tmp_path / "grows.log"
    path.write_bytes(rng.randbytes(4 * CDC_MAX))
    writer = CollectingWriter()
    with open(path, "rb") as f:
        _kind, first_id, _size = store_content(f.fileno(), writer)
    _s, refs = codec.decode_blob(writer.objects[first_id][1])
    assert len(refs) >= 3
    with open(path, "ab") as f:
        f.write(rng.randbytes(MIB))
    resumed = CollectingWriter()
    with open(path, "rb") as f:
        resumed_result = store_content(f.fileno(), resumed, refs[:-1])
    with open(path, "rb") as f:
        assert resumed_result == store_content(f.fileno(), None)
    # Only the last old chunk and the new bytes were cut and stored again.
    assert not {r.id for r in refs[:-1]} & set(resumed.objects)


@pytest.mark.parametrize("where", [10, 3 * CDC_MAX])  # in each half of a parallel proof
def test_a_resume_whose_prefix_changed_falls_back_to_a_full_pass(
    tmp_path: Path, where: int
) -> None:
    rng = random.Random(8)
    path = tmp_path / "edited.log"
    path.write_bytes(rng.randbytes(4 * CDC_MAX))
    writer = CollectingWriter()
    with open(path, "rb") as f:
        _kind, first_id, _size = store_content(f.fileno(), writer)
    _s, refs = codec.decode_blob(writer.objects[first_id][1])
    data = bytearray(path.read_bytes())
    data[where] ^= 0xFF  # an edit inside the old prefix ...
    path.write_bytes(bytes(data) + rng.randbytes(MIB))  # ... and an append
    with open(path, "rb") as f:
        resumed_result = store_content(f.fileno(), None, refs[:-1])
    with open(path, "rb") as f:
        assert resumed_result == store_content(f.fileno(), None)
