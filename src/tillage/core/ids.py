"""Content IDs: BLAKE3 keyed by a per-domain key, so equal bytes of different kinds never collide.

Each kind of object has its own ID type; a TreeId is never accepted where a ChunkId is meant.
"""

from __future__ import annotations

from blake3 import blake3

# `typing` costs 2 ms at import, and `till` starts hundreds of times a session: the ID types
# exist for the type checker; at run time NewType is the identity, as typing's own is.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NewType
else:

    def NewType(_name, _tp):  # noqa: N802 - stands in for typing.NewType
        return _identity

    def _identity(value):
        return value


ChunkId = NewType("ChunkId", bytes)
BlobId = NewType("BlobId", bytes)
TreeId = NewType("TreeId", bytes)
SnapshotId = NewType("SnapshotId", bytes)

SHORT_HEX = 12


def _domain_key(domain: str) -> bytes:
    return blake3(f"tillage 2026 {domain} v1".encode()).digest()


_CHUNK_KEY = _domain_key("chunk")
_BLOB_KEY = _domain_key("blob")
_TREE_KEY = _domain_key("tree")
_SNAPSHOT_KEY = _domain_key("snapshot")
_LOG_KEY = _domain_key("publication-log")
_COMMIT_KEY = _domain_key("session-commit")


def chunk_id(data: bytes | memoryview) -> ChunkId:
    """Returns the ID of a chunk of file content."""
    return ChunkId(blake3(data, key=_CHUNK_KEY).digest())


def blob_id(encoded_manifest: bytes) -> BlobId:
    """Returns the ID of a large file's chunk list (its canonical encoding)."""
    return BlobId(blake3(encoded_manifest, key=_BLOB_KEY).digest())


def tree_id(encoded_tree: bytes) -> TreeId:
    """Returns the ID of a directory's canonical encoding."""
    return TreeId(blake3(encoded_tree, key=_TREE_KEY).digest())


def snapshot_id(encoded_snapshot: bytes) -> SnapshotId:
    """Returns the ID of a snapshot record's canonical encoding."""
    return SnapshotId(blake3(encoded_snapshot, key=_SNAPSHOT_KEY).digest())


def commit_id(encoded_commit: bytes) -> str:
    """Returns the hex ID of a session commit's canonical encoding (docs/design/format.md)."""
    return blake3(encoded_commit, key=_COMMIT_KEY).hexdigest()


def log_link(previous_hex: str, body: bytes) -> str:
    """Returns the hash that chains one publication-log record to the one before it."""
    return blake3(previous_hex.encode() + b"\n" + body, key=_LOG_KEY).hexdigest()


def object_hash(kind: int, data: bytes | memoryview) -> bytes:
    """Returns the ID an object of `kind` (see codec.Kind) must have, for verification."""
    key = {1: _CHUNK_KEY, 2: _BLOB_KEY, 3: _TREE_KEY, 4: _SNAPSHOT_KEY}[kind]
    return blake3(data, key=key).digest()


def short(hex_id: str) -> str:
    """Returns the 12-character form of an ID, for people."""
    return hex_id[:SHORT_HEX]
