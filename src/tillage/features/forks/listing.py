"""Describing a workspace's universes: each live fork with its head, what it costs on disk (bytes
not shared with its parent) and how many paths it changed since its base (from sealed trees)."""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from tillage.core import codec
from tillage.core.models import Entry
from tillage.core.paths import CONTROL_DIR
from tillage.core.treediff import diff_entry
from tillage.core.treewalk import walk
from tillage.features.forks.fork import finish_pending, fork_index, is_fork_folder
from tillage.platform.folders import regular_files
from tillage.store.rows import ForkRow, SnapshotRow
from tillage.store.store import Store
from tillage.workspace.attach import Workspace

_FS_IOC_FIEMAP = 0xC020660B
_FIEMAP_HEADER = struct.Struct("=QQIIII")  # fm_start, fm_length, flags, mapped, count, reserved
_FIEMAP_EXTENT = struct.Struct("=QQQQQIIII")  # logical, physical, length, 2 reserved, flags, 3
_FIEMAP_EXTENT_LAST = 0x1
_FIEMAP_EXTENT_SHARED = 0x2000
_EXTENTS_PER_CALL = 128
_MAX_OFFSET = (1 << 64) - 1


@dataclass(frozen=True)
class ForkListing:
    """One live fork as `till forks` shows it; `missing` when its folder is gone (or is not
    the fork any more), then `disk_bytes` is None."""

    row: ForkRow
    head: SnapshotRow | None
    missing: bool
    disk_bytes: int | None
    changed_paths: int
    index: int


def unshared_bytes(fd: int) -> int | None:
    """The bytes of the open file `fd` held in extents it shares with no other file (FIEMAP:
    a reflinked copy shares all of them until written); None where FIEMAP is not supported."""
    start = 0
    total = 0
    size = _FIEMAP_HEADER.size + _FIEMAP_EXTENT.size * _EXTENTS_PER_CALL
    while True:
        buf = bytearray(size)
        _FIEMAP_HEADER.pack_into(buf, 0, start, _MAX_OFFSET - start, 0, 0, _EXTENTS_PER_CALL, 0)
        try:
            fcntl.ioctl(fd, _FS_IOC_FIEMAP, buf, True)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EINVAL, errno.ENOSYS):
                return None
            raise
        mapped = _FIEMAP_HEADER.unpack_from(buf, 0)[3]
        if mapped == 0:
            return total
        end = start
        for i in range(mapped):
            logical, _phys, length, _r1, _r2, flags, *_ = _FIEMAP_EXTENT.unpack_from(
                buf, _FIEMAP_HEADER.size + i * _FIEMAP_EXTENT.size
            )
            if not flags & _FIEMAP_EXTENT_SHARED:
                total += length
            end = logical + length
            if flags & _FIEMAP_EXTENT_LAST:
                return total
        if end <= start:
            return total
        start = end


def disk_bytes(root: Path) -> int:
    """What a fork's folder costs on disk beyond what it shares: for each regular file (each
    inode once, `.tillage/` left out) its unshared extents, or its allocated blocks where the
    file system cannot say what is shared. Folders and symlinks are not counted."""
    total = 0
    seen: set[tuple[int, int]] = set()
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return 0
    for fd, name, _rel, st in regular_files(top, lambda rel: rel == CONTROL_DIR):
        if st.st_nlink > 1:
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
        total += _file_cost(fd, name, st)
    return total


def _file_cost(dir_fd: int, name: str, st: os.stat_result) -> int:
    allocated: int = st.st_blocks * 512
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return allocated
    try:
        found = unshared_bytes(fd)
    finally:
        os.close(fd)
    return allocated if found is None else min(found, allocated)


def changed_paths(store: Store, old: bytes, new: bytes, prefix: str = "") -> int:
    """How many paths differ from the tree `old` to the tree `new`, counted as `till diff`
    lists them; subtrees with equal IDs are not read."""

    def read(tid: bytes) -> list[Entry]:
        return codec.decode_tree(store.read(tid))

    return sum(
        diff_entry(path, a, b) is not None for path, (a, b) in walk(read, (old, new), prefix=prefix)
    )


def list_forks(ws: Workspace, *, with_disk: bool = True) -> list[ForkListing]:
    """The workspace's live forks, oldest first (a killed fork command is finished first)."""
    finish_pending(ws)
    store = ws.store
    out: list[ForkListing] = []
    for row in store.forks_of(ws.id):
        head = store.head(row.workspace)
        base = store.snapshot(row.base)
        root = Path(row.root)
        missing = not is_fork_folder(store, row, restore=False)
        changed = 0
        if head is not None and base is not None:
            changed = changed_paths(store, bytes.fromhex(base.tree), bytes.fromhex(head.tree))
        out.append(
            ForkListing(
                row=row,
                head=head,
                missing=missing,
                disk_bytes=None if missing or not with_disk else disk_bytes(root),
                changed_paths=changed,
                index=fork_index(store, row),
            )
        )
    return out
