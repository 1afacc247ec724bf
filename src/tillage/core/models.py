"""The values the engine passes around: tree entries, trees, snapshot records, changes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class EntryKind(enum.IntEnum):
    FILE = 1
    DIR = 2
    SYMLINK = 3
    SPECIAL = 4  # FIFO, socket or device: declared, never captured (grade partial)


class ContentKind(enum.IntEnum):
    NONE = 0
    CHUNK = 1  # a small file stored whole: content is a ChunkId
    BLOB = 2  # a large file: content is a BlobId (its chunk list)
    TREE = 3  # a directory: content is a TreeId
    TARGET = 4  # a symlink: content is the link's target bytes


class EntryFlag(enum.IntFlag):
    NONE = 0
    SQLITE_IMAGE = 1  # content is a consistent SQLite image; rewind drops stale -wal/-shm files
    HARDLINK = 2  # another name of a file seen earlier in the walk: `link` is that first name


# A chunk reference with this ID is a hole of `length` zero bytes in a sparse file: nothing is
# stored for it, and a rewind seeks over it instead of writing zeros (docs/design/format.md).
HOLE_ID = bytes(32)


@dataclass(frozen=True, slots=True)
class Entry:
    """One name in a directory, with everything needed to put it back byte-exact."""

    name: bytes
    kind: EntryKind
    mode: int
    size: int
    mtime_ns: int
    content_kind: ContentKind
    content: bytes
    xattrs: tuple[tuple[bytes, bytes], ...] = ()
    flags: EntryFlag = EntryFlag.NONE
    # With EntryFlag.HARDLINK: the workspace path (file-system bytes) of the first name of the
    # same inode in walk order; that entry holds the same content. Empty otherwise.
    link: bytes = b""


@dataclass(frozen=True, slots=True)
class ChunkRef:
    id: bytes
    length: int


def is_hole(ref: ChunkRef) -> bool:
    """Tells whether a chunk reference is a hole of a sparse file: `ref.length` zero bytes that
    are not stored, so a reader must not ask the store for them (HOLE_ID)."""
    return ref.id == HOLE_ID


@dataclass(frozen=True)
class FidelityNote:
    """A path that could not be captured exactly, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class SnapshotRecord:
    """What a snapshot says about itself; its canonical encoding is what its ID hashes."""

    workspace: str
    tree: str
    parent: str | None
    sealed_at_ns: int
    trigger: str
    label: str | None
    files: int
    bytes: int
    grade: str
    agent: str | None = None
    turn: str | None = None
    session: str | None = None
    fidelity: tuple[FidelityNote, ...] = field(default=())
    # The second parent of a snapshot sealed by a merge of a stored snapshot (CONTRACT.md:
    # `merged_from`), so it descends from both sides; None for every other snapshot.
    merged_from: str | None = None


class ChangeKind(enum.StrEnum):
    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"
    TYPE_CHANGED = "type_changed"
    MODE_CHANGED = "mode_changed"


@dataclass(frozen=True, slots=True)
class Change:
    """One path that differs between two states, from the first to the second."""

    path: str
    kind: ChangeKind
    old_size: int | None
    new_size: int | None


TRIGGERS = (
    "initial",
    "manual",
    "watch",
    "pre_rewind",
    "pre_merge",
    "merge",
    "fork_base",
    "fork",
    "try_before",
    "try_after",
    "hook",
    "session",
    "sync",
)
