"""The remote's pack and index formats on their own (no `till` process): Padmé sizes, a pack
read back blob by blob by ranged reads and rebuilt from its own header, a pack's size hiding
its blobs', an index document's round trip, and the index cache following what the remote
lists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tillage.crypto import OVERHEAD, MasterKey, open_object, seal_object
from tillage.errors import IntegrityError
from tillage.features.sync import remote_index
from tillage.features.sync.packs import MIN_PACK, PackBuilder, padme
from tillage.features.sync.remote_index import IndexedPack
from tillage.remote.memory import MemoryRemote


def test_padme_rounds_up_by_at_most_twelve_percent_and_keeps_order() -> None:
    last = 0
    for size in sorted({*range(1, 5000), *(int(1.37**k) for k in range(20, 60))}):
        padded = padme(size)
        assert size <= padded <= size * 1.125 + 1, size
        assert padded >= last
        last = padded
    # Sizes in one bucket look alike: 300,000 and 300,097 bytes give one padded size.
    assert padme(300_000 + 1000) == padme(300_097 + 1000)


def built(master: MasterKey, blobs: list[bytes]) -> tuple[PackBuilder, bytes, list[bytes]]:
    builder = PackBuilder()
    ids = [os.urandom(32) for _ in blobs]
    for oid, blob in zip(ids, blobs, strict=True):
        builder.add(oid, 1, seal_object(master, oid, blob))
    return builder, builder.finish(master), ids


def test_a_pack_reads_back_blob_by_blob_and_from_its_own_header() -> None:
    master = MasterKey.generate()
    blobs = [os.urandom(n) for n in (10, 5000, 70_000, 1)]
    builder, body, ids = built(master, blobs)
    assert len(body) == max(MIN_PACK, padme(len(body)))
    remote = MemoryRemote()
    remote.put(builder.name, body)
    pack = remote_index.read_pack_entries(remote, master, builder.name)
    assert pack.size == len(body) and [e.id for e in pack.entries] == ids
    for entry, blob in zip(pack.entries, blobs, strict=True):
        sealed = remote.get_range(builder.name, entry.offset, entry.length)
        assert open_object(master, entry.id, sealed) == blob
    # Another pack's name, another key, a byte of the trailer: nothing opens.
    remote.put("packs/" + "0" * 64, body)
    with pytest.raises(IntegrityError):
        remote_index.read_pack_entries(remote, master, "packs/" + "0" * 64)
    with pytest.raises(IntegrityError):
        remote_index.read_pack_entries(remote, MasterKey.generate(), builder.name)
    remote.put(builder.name, body[:-1] + bytes([body[-1] ^ 1]))
    with pytest.raises(IntegrityError):
        remote_index.read_pack_entries(remote, master, builder.name)


def test_a_pack_of_one_small_file_says_little_of_its_size() -> None:
    master = MasterKey.generate()
    sizes = {len(built(master, [os.urandom(n)])[1]) for n in range(100, 30_000, 997)}
    assert sizes == {MIN_PACK}  # every small file: one size
    near = {len(built(master, [os.urandom(n)])[1]) for n in range(295_500, 302_500, 500)}
    assert len(near) == 1


def test_an_index_round_trips_and_its_cache_follows_the_remote(tmp_path: Path) -> None:
    master = MasterKey.generate()
    remote = MemoryRemote()
    builder, body, ids = built(master, [b"a", b"bb", b"ccc"])
    remote.put(builder.name, body)
    pack = IndexedPack(builder.name, len(body), tuple(builder.entries))
    cache = tmp_path / "cache"
    name = remote_index.write_index(remote, master, [pack], cache)
    assert len(remote.get(name)) >= remote_index.MIN_INDEX + OVERHEAD
    fresh = remote_index.load(remote, master, None)
    assert set(fresh.blobs) == set(ids) and fresh.packs[builder.name].size == len(body)
    assert (cache / name.rpartition("/")[2]).exists()
    # A cached index is read from the cache: the remote's copy is not fetched again...
    remote.put(name, b"damaged, but never read again")
    assert set(remote_index.load(remote, master, cache).blobs) == set(ids)
    # ...and one the remote no longer lists is forgotten.
    remote.delete(name)
    assert remote_index.load(remote, master, cache).blobs == {}
    assert list(cache.iterdir()) == []
    # A pack no index names is adopted by its own header.
    index = remote_index.load(remote, master, cache)
    adopted = remote_index.adopt_unindexed(remote, master, index)
    assert [p.name for p in adopted] == [builder.name] and set(index.blobs) == set(ids)


def test_many_index_documents_are_replaced_by_one_naming_everything(tmp_path: Path) -> None:
    master = MasterKey.generate()
    remote = MemoryRemote()
    packs = []
    for _ in range(remote_index.COMPACT_AT):
        builder, body, _ids = built(master, [os.urandom(100)])
        remote.put(builder.name, body)
        pack = IndexedPack(builder.name, len(body), tuple(builder.entries))
        remote_index.write_index(remote, master, [pack], tmp_path)
        packs.append(pack)
    index = remote_index.load(remote, master, tmp_path)
    before = set(index.blobs)
    written = remote_index.write_superseding(remote, master, index, [], tmp_path)
    assert remote.list("index/") == [written]
    assert set(remote_index.load(remote, master, tmp_path).blobs) == before
    assert len(list(tmp_path.iterdir())) == 1
