"""A seal's object writer keeps its memory bounded whatever the object count (issue 26): it
closes a pack past a record count as it does past a size, and forgets what the index holds."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from tillage.core.codec import Kind
from tillage.core.ids import object_hash
from tillage.store.packs import iter_packs, scan_pack
from tillage.store.store import ObjectWriter, Store


def _object(i: int) -> tuple[bytes, bytes]:
    raw = b"small file %d\n" % i + os.urandom(24)
    return object_hash(Kind.CHUNK, raw), raw


@pytest.fixture
def small_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ObjectWriter, "PACK_RECORDS", 64, raising=False)
    monkeypatch.setattr(ObjectWriter, "KNOWN_MAX", 64, raising=False)
    monkeypatch.setattr(ObjectWriter, "BATCH_COUNT", 16)


def _peak_while_writing(home: Path, count: int) -> int:
    store = Store.open(home)
    try:
        with store.writer() as writer:
            tracemalloc.start()
            try:
                for i in range(count):
                    writer.put(Kind.CHUNK, *_object(i))
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            writer.commit()
    finally:
        store.close()
    return peak


@pytest.mark.usefixtures("small_packs")
def test_a_writer_of_many_small_objects_holds_no_more_memory_than_one_of_few(
    tmp_path: Path,
) -> None:
    few = _peak_while_writing(tmp_path / "few", 2_000)
    many = _peak_while_writing(tmp_path / "many", 8_000)
    assert many < 1.5 * few, (few, many)


@pytest.mark.usefixtures("small_packs")
def test_objects_of_a_writer_that_filled_many_packs_are_stored_once_and_read_back(
    tmp_path: Path,
) -> None:
    objects = [_object(i) for i in range(1_000)]
    store = Store.open(tmp_path)
    try:
        with store.writer() as writer:
            for object_id, raw in objects:
                writer.put(Kind.CHUNK, object_id, raw)
            for object_id, raw in objects[:300]:  # again, after their packs were indexed
                writer.put(Kind.CHUNK, object_id, raw)
            writer.commit()
        for object_id, raw in objects:
            assert store.read(object_id) == raw
    finally:
        store.close()
    packs = list(iter_packs(tmp_path / "packs"))
    assert len(packs) >= 1_000 // 64
    assert sum(len(scan_pack(p).records) for p in packs) == len(objects)


@pytest.mark.usefixtures("small_packs")
def test_a_writer_that_fails_after_closing_packs_keeps_exactly_the_packs_it_indexed(
    tmp_path: Path,
) -> None:
    objects = [_object(i) for i in range(1_000)]
    store = Store.open(tmp_path)
    try:
        with store.writer() as writer:
            for object_id, raw in objects:
                writer.put(Kind.CHUNK, object_id, raw)
        # No commit: the writer is closed as a failed seal's is.
        packs = list(iter_packs(tmp_path / "packs"))
        assert packs, "the packs closed on the way are indexed, so they are kept"
        kept = 0
        for pack in packs:
            for record in scan_pack(pack).records:
                assert store.location(record.id) == record.location
                assert store.read(record.id) == dict(objects)[record.id]
                kept += 1
        assert 0 < kept < len(objects)
    finally:
        store.close()
