"""The canonical encodings whose hashes are IDs (byte layouts in docs/design/format.md).

Encodings are deterministic: the same value always yields the same bytes, so equal directories
have equal tree IDs across workspaces and machines.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

from tillage.core.models import (
    ChunkRef,
    ContentKind,
    Entry,
    EntryFlag,
    EntryKind,
    FidelityNote,
    SnapshotRecord,
    is_hole,
)
from tillage.errors import IntegrityError

TREE_MAGIC = b"TTR1"
BLOB_MAGIC = b"TBL1"
SNAPSHOT_MAGIC = b"TSN1"

_ENTRY = struct.Struct("<BBIQqB")  # kind, flags, mode, size, mtime_ns, content_kind
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_CHUNK = struct.Struct("<32sI")
_BLOB_HEAD = struct.Struct("<4sQI")
_HARDLINK = int(EntryFlag.HARDLINK)


class Kind:
    """Object kinds as stored in pack records."""

    CHUNK = 1
    BLOB = 2
    TREE = 3
    SNAPSHOT = 4


def encode_tree(entries: Sequence[Entry]) -> bytes:
    """Encodes a directory; entries are sorted by name bytes so the encoding is canonical."""
    out = [TREE_MAGIC, _U32.pack(len(entries))]
    for e in sorted(entries, key=lambda x: x.name):
        flags = int(e.flags)  # plain int arithmetic: IntFlag operators cost a call each
        out.append(_U16.pack(len(e.name)))
        out.append(e.name)
        out.append(_ENTRY.pack(e.kind, flags, e.mode, e.size, e.mtime_ns, e.content_kind))
        if e.content_kind is ContentKind.TARGET:
            out.append(_U32.pack(len(e.content)))
            out.append(e.content)
        elif e.content_kind is not ContentKind.NONE:
            out.append(e.content)
        out.append(_U16.pack(len(e.xattrs)))
        for key, value in sorted(e.xattrs):
            out += [_U16.pack(len(key)), key, _U32.pack(len(value)), value]
        if flags & _HARDLINK:
            out += [_U32.pack(len(e.link)), e.link]
    return b"".join(out)


def decode_tree(data: bytes) -> list[Entry]:
    """Decodes a directory; raises IntegrityError on bytes that are not a tree."""
    try:
        return _decode_tree(memoryview(data))
    except (struct.error, ValueError, IndexError) as exc:
        raise IntegrityError(f"tree object does not decode: {exc}") from exc


_RawEntry = tuple[
    bytes, int, int, int, int, int, int, bytes, tuple[tuple[bytes, bytes], ...], bytes
]
_TARGET, _NONE = int(ContentKind.TARGET), int(ContentKind.NONE)
_CONTENT_KINDS = frozenset(int(k) for k in ContentKind)


def _raw_entries(view: memoryview) -> list[_RawEntry]:
    """The entries of a tree as plain values: (name, kind, flags, mode, size, mtime_ns,
    content_kind, content, xattrs, link), checked but not yet made into enums."""
    if bytes(view[:4]) != TREE_MAGIC:
        raise ValueError("bad tree magic")
    (count,) = _U32.unpack_from(view, 4)
    pos = 8
    entries: list[_RawEntry] = []
    for _ in range(count):
        (name_len,) = _U16.unpack_from(view, pos)
        pos += 2
        name = bytes(view[pos : pos + name_len])
        pos += name_len
        if len(name) != name_len or name in (b"", b".", b"..") or b"/" in name or b"\0" in name:
            raise ValueError(f"bad entry name {name!r}")
        kind, flags, mode, size, mtime_ns, ck = _ENTRY.unpack_from(view, pos)
        pos += _ENTRY.size
        if ck not in _CONTENT_KINDS:
            raise ValueError(f"unknown content kind {ck}")
        if ck == _TARGET:
            (n,) = _U32.unpack_from(view, pos)
            content = bytes(view[pos + 4 : pos + 4 + n])
            pos += 4 + n
        elif ck == _NONE:
            content = b""
        else:
            content = bytes(view[pos : pos + 32])
            pos += 32
        (nx,) = _U16.unpack_from(view, pos)
        pos += 2
        xattrs = []
        for _ in range(nx):
            (kl,) = _U16.unpack_from(view, pos)
            key = bytes(view[pos + 2 : pos + 2 + kl])
            pos += 2 + kl
            (vl,) = _U32.unpack_from(view, pos)
            value = bytes(view[pos + 4 : pos + 4 + vl])
            pos += 4 + vl
            xattrs.append((key, value))
        link = b""
        if flags & _HARDLINK:
            (ll,) = _U32.unpack_from(view, pos)
            link = bytes(view[pos + 4 : pos + 4 + ll])
            pos += 4 + ll
            if len(link) != ll or not link or link.startswith(b"/") or b"\0" in link:
                raise ValueError(f"bad hard link path {link!r}")
        entries.append((name, kind, flags, mode, size, mtime_ns, ck, content, tuple(xattrs), link))
    if pos != len(view):
        raise ValueError("trailing bytes after tree")
    return entries


# Enum members by value: calling an enum class per entry cost a watcher's delta seal more
# than reading the tree (an unknown value still goes through the call, which rejects it).
_ENTRY_KIND_OF = {int(k): k for k in EntryKind}
_CONTENT_KIND_OF = {int(k): k for k in ContentKind}
_FLAGS_OF = {int(f): f for f in (EntryFlag.NONE, EntryFlag.SQLITE_IMAGE, EntryFlag.HARDLINK)}


def _decode_tree(view: memoryview) -> list[Entry]:
    kinds, contents, flag_sets = _ENTRY_KIND_OF, _CONTENT_KIND_OF, _FLAGS_OF
    return [
        Entry(
            name=name,
            kind=kinds[kind] if kind in kinds else EntryKind(kind),
            mode=mode,
            size=size,
            mtime_ns=mtime_ns,
            content_kind=contents[ck] if ck in contents else ContentKind(ck),
            content=content,
            xattrs=xattrs,
            flags=flag_sets[flags] if flags in flag_sets else EntryFlag(flags),
            link=link,
        )
        for name, kind, flags, mode, size, mtime_ns, ck, content, xattrs, link in _raw_entries(view)
    ]


TreeRef = tuple[bytes, int, int, int, bytes]  # name, kind, flags, content kind, content


def tree_refs(data: bytes) -> list[TreeRef]:
    """What a walk over stored trees needs of each entry (name, kind, flags, content kind,
    content), as plain ints: a gc's mark visits millions of entries, and making enums for each
    cost it more than the decoding. Raises IntegrityError like decode_tree."""
    try:
        return [(e[0], e[1], e[2], e[6], e[7]) for e in _raw_entries(memoryview(data))]
    except (struct.error, ValueError, IndexError) as exc:
        raise IntegrityError(f"tree object does not decode: {exc}") from exc


_DIR, _TREE = int(EntryKind.DIR), int(ContentKind.TREE)
_CHUNK_CK, _BLOB_CK = int(ContentKind.CHUNK), int(ContentKind.BLOB)
_ENTRY_KINDS = frozenset(int(k) for k in EntryKind)


def children(raw: bytes, kind: int) -> list[tuple[bytes, int]]:
    """The (ID, kind) of the objects a stored object reaches directly, from its bytes: a
    snapshot its tree, a tree its folders' trees and its files' chunks and chunk lists, a chunk
    list its chunks but holes (nothing is stored for them); a chunk reaches nothing. What a
    copy or a check of a snapshot's closure walks. Raises IntegrityError when the bytes do not
    decode as `kind`, as decode_snapshot, decode_tree and decode_blob do."""
    if kind == Kind.SNAPSHOT:
        return [(bytes.fromhex(decode_snapshot(raw).tree), Kind.TREE)]
    if kind == Kind.TREE:
        refs = tree_refs(raw)
        for ref in refs:
            if ref[1] not in _ENTRY_KINDS:
                raise IntegrityError(
                    f"tree object does not decode: {ref[1]} is not a valid EntryKind"
                )
        found: list[tuple[bytes, int]] = []
        for _name, entry_kind, _flags, content_kind, content in refs:
            if content_kind == _TREE:
                if entry_kind == _DIR:
                    found.append((content, Kind.TREE))
            elif content_kind == _CHUNK_CK:
                found.append((content, Kind.CHUNK))
            elif content_kind == _BLOB_CK:
                found.append((content, Kind.BLOB))
        return found
    if kind == Kind.BLOB:
        _size, chunks = decode_blob(raw)
        return [(c.id, Kind.CHUNK) for c in chunks if not is_hole(c)]
    return []


def encode_blob(size: int, chunks: Sequence[ChunkRef]) -> bytes:
    """Encodes a large file's chunk list."""
    parts = [_BLOB_HEAD.pack(BLOB_MAGIC, size, len(chunks))]
    parts.extend(_CHUNK.pack(c.id, c.length) for c in chunks)
    return b"".join(parts)


def decode_blob(data: bytes) -> tuple[int, list[ChunkRef]]:
    """Decodes a chunk list into (size, chunks); raises IntegrityError when malformed."""
    try:
        magic, size, count = _BLOB_HEAD.unpack_from(data, 0)
        if magic != BLOB_MAGIC or len(data) != _BLOB_HEAD.size + count * _CHUNK.size:
            raise ValueError("bad blob header")
        chunks = [
            ChunkRef(*_CHUNK.unpack_from(data, _BLOB_HEAD.size + i * _CHUNK.size))
            for i in range(count)
        ]
    except (struct.error, ValueError) as exc:
        raise IntegrityError(f"blob object does not decode: {exc}") from exc
    if sum(c.length for c in chunks) != size:
        raise IntegrityError("blob chunk lengths do not add up to its size")
    return size, chunks


def snapshot_summary(record: SnapshotRecord) -> dict[str, Any]:
    """The snapshot's fields but its fidelity notes: what the publication log repeats."""
    body = {
        "workspace": record.workspace,
        "tree": record.tree,
        "parent": record.parent,
        "sealed_at_ns": record.sealed_at_ns,
        "trigger": record.trigger,
        "label": record.label,
        "files": record.files,
        "bytes": record.bytes,
        "grade": record.grade,
        "agent": record.agent,
        "turn": record.turn,
        "session": record.session,
    }
    # Only a merge's snapshot carries the key, so every other snapshot keeps the encoding (and
    # so the ID) it had before the field existed.
    if record.merged_from is not None:
        body["merged_from"] = record.merged_from
    return body


def encode_snapshot(record: SnapshotRecord) -> bytes:
    """Encodes a snapshot record as canonical JSON (sorted keys, no spaces) behind a magic."""
    body = snapshot_summary(record)
    body["fidelity"] = [{"path": n.path, "reason": n.reason} for n in record.fidelity]
    return SNAPSHOT_MAGIC + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def decode_snapshot(data: bytes) -> SnapshotRecord:
    """Decodes a snapshot record; raises IntegrityError when malformed."""
    try:
        if data[:4] != SNAPSHOT_MAGIC:
            raise ValueError("bad snapshot magic")
        body = json.loads(data[4:])
        return SnapshotRecord(
            workspace=body["workspace"],
            tree=body["tree"],
            parent=body["parent"],
            sealed_at_ns=body["sealed_at_ns"],
            trigger=body["trigger"],
            label=body["label"],
            files=body["files"],
            bytes=body["bytes"],
            grade=body["grade"],
            agent=body.get("agent"),
            turn=body.get("turn"),
            session=body.get("session"),
            fidelity=tuple(FidelityNote(f["path"], f["reason"]) for f in body["fidelity"]),
            merged_from=body.get("merged_from"),
        )
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise IntegrityError(f"snapshot object does not decode: {exc}") from exc
