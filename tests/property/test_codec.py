"""The canonical encodings (trees, blobs, snapshot records) and the IDs that hash them.

Round trips, canonical bytes, and the promise that a decoder answers anything that is not one of
its objects with IntegrityError and never with another exception type.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core import codec
from tillage.core.codec import Kind
from tillage.core.ids import blob_id, chunk_id, object_hash, snapshot_id, tree_id
from tillage.core.models import (
    ChunkRef,
    ContentKind,
    Entry,
    EntryFlag,
    EntryKind,
    FidelityNote,
    SnapshotRecord,
)
from tillage.core.paths import fs_decode
from tillage.errors import IntegrityError

U32 = 2**32 - 1
U64 = 2**64 - 1
I64 = 2**63

object_ids = st.binary(min_size=32, max_size=32)
names = st.binary(min_size=1, max_size=24).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)
xattr_lists = st.dictionaries(
    st.binary(max_size=12).map(lambda k: b"user." + k), st.binary(max_size=24), max_size=3
).map(lambda d: tuple(sorted(d.items())))


@st.composite
def entries(draw: st.DrawFn) -> Entry:
    """An entry whose kind, content kind and content agree, as a capture would produce them."""
    kind = draw(st.sampled_from(EntryKind))
    size = 0
    flags = EntryFlag.NONE
    link = b""
    if kind is EntryKind.DIR:
        content_kind, content = ContentKind.TREE, draw(object_ids)
    elif kind is EntryKind.FILE:
        content_kind = draw(st.sampled_from([ContentKind.CHUNK, ContentKind.BLOB]))
        content = draw(object_ids)
        size = draw(st.integers(0, U64))
        flags = draw(st.sampled_from(EntryFlag))
        if flags & EntryFlag.HARDLINK:
            link = draw(names) + b"/" + draw(names)
    elif kind is EntryKind.SYMLINK:
        content_kind, content = ContentKind.TARGET, draw(st.binary(max_size=64))
        size = len(content)
    else:
        content_kind, content = ContentKind.NONE, b""
    return Entry(
        name=draw(names),
        kind=kind,
        mode=draw(st.integers(0, 0o7777)),
        size=size,
        mtime_ns=draw(st.integers(-I64, I64 - 1)),
        content_kind=content_kind,
        content=content,
        xattrs=draw(xattr_lists) if kind is not EntryKind.SYMLINK else (),
        flags=flags,
        link=link,
    )


trees = st.lists(entries(), max_size=8, unique_by=lambda e: e.name)
chunk_lists = st.lists(st.builds(ChunkRef, object_ids, st.integers(0, U32)), max_size=8)
# Workspace paths and free text as capture produces them: file-system bytes decoded with
# surrogateescape, so lone low surrogates appear.
fs_text = st.binary(max_size=24).map(fs_decode)
optional_text = st.none() | st.text(max_size=16)


@st.composite
def snapshot_records(draw: st.DrawFn) -> SnapshotRecord:
    return SnapshotRecord(
        workspace=draw(st.text(max_size=16)),
        tree=draw(object_ids).hex(),
        parent=draw(st.none() | object_ids.map(bytes.hex)),
        sealed_at_ns=draw(st.integers(0, I64 - 1)),
        trigger=draw(st.sampled_from(["initial", "manual", "watch", "pre_rewind"])),
        label=draw(optional_text),
        files=draw(st.integers(0, U64)),
        bytes=draw(st.integers(0, U64)),
        grade=draw(st.sampled_from(["complete", "partial"])),
        agent=draw(optional_text),
        turn=draw(optional_text),
        session=draw(optional_text),
        fidelity=tuple(
            draw(st.lists(st.builds(FidelityNote, fs_text, st.text(max_size=24)), max_size=3))
        ),
    )


def _by_name(es: list[Entry]) -> list[Entry]:
    return sorted(es, key=lambda e: e.name)


def _decodes_or_refuses(decode: Callable[[bytes], Any], data: bytes) -> None:
    """Runs `decode`; IntegrityError is an answer, any other exception fails the test."""
    with contextlib.suppress(IntegrityError):
        decode(data)


DECODERS: dict[str, Callable[[bytes], Any]] = {
    "tree": codec.decode_tree,
    "blob": codec.decode_blob,
    "snapshot": codec.decode_snapshot,
}
decoder_names = st.sampled_from(sorted(DECODERS))


@st.composite
def valid_encodings(draw: st.DrawFn) -> tuple[str, bytes]:
    """A decoder's name and one valid encoding of its kind of object."""
    which = draw(decoder_names)
    if which == "tree":
        return which, codec.encode_tree(draw(trees))
    if which == "blob":
        chunks = draw(chunk_lists)
        return which, codec.encode_blob(sum(c.length for c in chunks), chunks)
    return which, codec.encode_snapshot(draw(snapshot_records()))


# -- trees ---------------------------------------------------------------------------------


@examples(150)
@given(trees)
def test_a_tree_decodes_to_exactly_the_entries_it_was_encoded_from(es: list[Entry]) -> None:
    assert codec.decode_tree(codec.encode_tree(es)) == _by_name(es)


@examples(80)
@given(trees.flatmap(lambda es: st.tuples(st.just(es), st.permutations(es))))
def test_the_order_of_the_entries_given_does_not_change_a_trees_bytes_or_id(
    pair: tuple[list[Entry], list[Entry]],
) -> None:
    es, shuffled = pair
    assert codec.encode_tree(shuffled) == codec.encode_tree(es)
    assert tree_id(codec.encode_tree(shuffled)) == tree_id(codec.encode_tree(es))


@examples(60)
@given(trees, st.randoms(use_true_random=False))
def test_the_order_of_extended_attributes_given_does_not_change_a_trees_bytes(
    es: list[Entry], rnd: Any
) -> None:
    shuffled = []
    for e in es:
        xattrs = list(e.xattrs)
        rnd.shuffle(xattrs)
        shuffled.append(replace(e, xattrs=tuple(xattrs)))
    assert codec.encode_tree(shuffled) == codec.encode_tree(es)


@examples(60)
@given(trees, st.data())
def test_trees_with_equal_bytes_have_equal_entries_and_others_have_different_ids(
    a: list[Entry], data: st.DataObject
) -> None:
    b = data.draw(st.permutations(a) | trees)
    same = _by_name(a) == _by_name(b)
    assert (codec.encode_tree(a) == codec.encode_tree(b)) == same
    assert (tree_id(codec.encode_tree(a)) == tree_id(codec.encode_tree(b))) == same


def test_an_empty_tree_is_the_magic_and_a_zero_count() -> None:
    assert codec.encode_tree([]) == b"TTR1\0\0\0\0"
    assert codec.decode_tree(b"TTR1\0\0\0\0") == []


def test_a_tree_naming_an_entry_that_could_leave_its_directory_is_refused() -> None:
    for name in (b"", b".", b"..", b"a/b", b"a\0b"):
        entry = Entry(name, EntryKind.SPECIAL, 0o644, 0, 0, ContentKind.NONE, b"")
        with pytest.raises(IntegrityError):
            codec.decode_tree(codec.encode_tree([entry]))


# -- blobs ---------------------------------------------------------------------------------


@examples(100)
@given(chunk_lists)
def test_a_blob_decodes_to_the_size_and_chunks_it_was_encoded_from(
    chunks: list[ChunkRef],
) -> None:
    size = sum(c.length for c in chunks)
    assert codec.decode_blob(codec.encode_blob(size, chunks)) == (size, chunks)


@examples(60)
@given(chunk_lists, st.integers(0, U64))
def test_a_blob_whose_chunk_lengths_do_not_add_up_to_its_size_is_refused(
    chunks: list[ChunkRef], size: int
) -> None:
    if size == sum(c.length for c in chunks):
        size = (size + 1) % (U64 + 1)
    with pytest.raises(IntegrityError):
        codec.decode_blob(codec.encode_blob(size, chunks))


@examples(40)
@given(chunk_lists, st.integers(-3, 3).filter(bool))
def test_a_blob_whose_count_disagrees_with_its_length_is_refused(
    chunks: list[ChunkRef], delta: int
) -> None:
    data = bytearray(codec.encode_blob(sum(c.length for c in chunks), chunks))
    count = int.from_bytes(data[12:16], "little")
    data[12:16] = ((count + delta) % 2**32).to_bytes(4, "little")
    with pytest.raises(IntegrityError):
        codec.decode_blob(bytes(data))


# -- snapshot records ----------------------------------------------------------------------


@examples(100)
@given(snapshot_records())
def test_a_snapshot_record_decodes_to_the_record_it_was_encoded_from(
    record: SnapshotRecord,
) -> None:
    assert codec.decode_snapshot(codec.encode_snapshot(record)) == record


@examples(60)
@given(snapshot_records())
def test_a_snapshot_record_is_canonical_json_behind_its_magic(record: SnapshotRecord) -> None:
    data = codec.encode_snapshot(record)
    assert data[:4] == b"TSN1"
    body = json.loads(data[4:])
    assert json.dumps(body, sort_keys=True, separators=(",", ":")).encode() == data[4:]
    assert set(body) == {
        "workspace",
        "tree",
        "parent",
        "sealed_at_ns",
        "trigger",
        "label",
        "files",
        "bytes",
        "grade",
        "agent",
        "turn",
        "session",
        "fidelity",
    }
    assert snapshot_id(codec.encode_snapshot(record)) == snapshot_id(data)


def test_a_snapshot_record_without_the_optional_agent_fields_still_decodes() -> None:
    record = SnapshotRecord("ws", "00" * 32, None, 1, "manual", None, 0, 0, "complete")
    body = json.loads(codec.encode_snapshot(record)[4:])
    for key in ("agent", "turn", "session"):
        del body[key]
    data = b"TSN1" + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    assert codec.decode_snapshot(data) == record


def test_a_snapshot_record_of_deeply_nested_json_is_refused_as_an_integrity_error() -> None:
    with pytest.raises(IntegrityError):
        codec.decode_snapshot(b"TSN1" + b"[" * 100_000)


# -- garbage -------------------------------------------------------------------------------


@examples(200)
@given(decoder_names, st.binary(max_size=200))
def test_random_bytes_are_refused_with_an_integrity_error(which: str, data: bytes) -> None:
    magic = {"tree": b"TTR1", "blob": b"TBL1", "snapshot": b"TSN1"}[which]
    if data[:4] != magic:
        with pytest.raises(IntegrityError):
            DECODERS[which](data)
    _decodes_or_refuses(DECODERS[which], magic + data)


SNAPSHOT_KEYS = sorted(
    json.loads(
        codec.encode_snapshot(
            SnapshotRecord("ws", "00" * 32, None, 1, "manual", None, 0, 0, "complete")
        )[4:]
    )
)


@examples(150)
@given(
    st.sampled_from(SNAPSHOT_KEYS),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=8,
    ),
)
def test_json_of_the_wrong_shape_is_refused_with_an_integrity_error(key: str, junk: Any) -> None:
    record = SnapshotRecord("ws", "00" * 32, None, 1, "manual", None, 0, 0, "complete")
    body = json.loads(codec.encode_snapshot(record)[4:])
    for doc in (junk, {**body, key: junk}, {**body, "fidelity": junk}):
        _decodes_or_refuses(codec.decode_snapshot, b"TSN1" + json.dumps(doc).encode())


@examples(120)
@given(valid_encodings(), st.data())
def test_every_truncation_of_a_valid_encoding_is_refused(
    valid: tuple[str, bytes], data: st.DataObject
) -> None:
    which, encoded = valid
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(IntegrityError):
        DECODERS[which](encoded[:cut])


@examples(80)
@given(valid_encodings(), st.binary(min_size=1, max_size=40))
def test_trailing_bytes_after_a_tree_or_blob_are_refused(
    valid: tuple[str, bytes], extra: bytes
) -> None:
    which, encoded = valid
    if which == "snapshot":
        return  # JSON may be followed by whitespace; the record's ID still pins its bytes
    with pytest.raises(IntegrityError):
        DECODERS[which](encoded + extra)


@examples(200)
@given(valid_encodings(), st.data())
def test_a_flipped_bit_in_a_valid_encoding_decodes_or_is_refused_but_never_crashes(
    valid: tuple[str, bytes], data: st.DataObject
) -> None:
    which, encoded = valid
    flipped = bytearray(encoded)
    for _ in range(data.draw(st.integers(1, 3))):
        bit = data.draw(st.integers(0, len(flipped) * 8 - 1))
        flipped[bit // 8] ^= 1 << (bit % 8)
    _decodes_or_refuses(DECODERS[which], bytes(flipped))


# -- IDs -----------------------------------------------------------------------------------

ID_FUNCTIONS: dict[int, Callable[[bytes], bytes]] = {
    Kind.CHUNK: chunk_id,
    Kind.BLOB: blob_id,
    Kind.TREE: tree_id,
    Kind.SNAPSHOT: snapshot_id,
}


@examples(100)
@given(st.binary(max_size=300))
def test_the_same_bytes_as_different_kinds_of_object_have_different_ids(data: bytes) -> None:
    ids = [fn(data) for fn in ID_FUNCTIONS.values()]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 for i in ids)


@examples(100)
@given(st.sampled_from(sorted(ID_FUNCTIONS)), st.binary(max_size=300))
def test_object_hash_agrees_with_the_id_function_of_each_kind(kind: int, data: bytes) -> None:
    assert object_hash(kind, data) == ID_FUNCTIONS[kind](data)
    assert object_hash(kind, memoryview(data)) == ID_FUNCTIONS[kind](data)


def test_the_record_kinds_are_the_numbers_the_format_gives_them() -> None:
    assert (Kind.CHUNK, Kind.BLOB, Kind.TREE, Kind.SNAPSHOT) == (1, 2, 3, 4)
