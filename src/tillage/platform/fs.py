"""Durable file-system primitives: the one place atomic writes and directory syncs are spelled.

Every durable pattern in tillage goes through these (INV-1, INV-7 in docs/design/invariants.md).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
from pathlib import Path

from tillage.errors import InvalidArgumentError
from tillage.platform.errors import DiskFullError
from tillage.platform.names import random_hex


def write_all(fd: int, data: bytes) -> None:
    """Writes all of `data` to `fd` (os.write may write less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    """Writes all of `data` to `fd` at `offset` (os.pwrite may write less than it is given)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def current_umask() -> int:
    """The process's umask, read without changing it: setting it to read it back would race
    the other threads creating files meanwhile (the watcher and the MCP server serve calls on
    threads). Only where /proc is missing is it set and put back."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(path: Path | str) -> None:
    """Makes a directory's entries (creations, renames, deletions) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_TEMP_COUNTER = itertools.count()
TEMP_MARK = ".tillage-tmp-"  # in every temporary name tillage writes, so leftovers are known


@functools.cache
def _random_token() -> str:
    return random_hex(4)


def temp_name(final: str) -> str:
    """Returns a sibling temporary name for `final` that tillage recognises and cleans up.

    Unique per process (pid, one random token) and per call (a counter): no entropy per file.
    """
    return f".{final}{TEMP_MARK}{os.getpid():x}{_random_token()}{next(_TEMP_COUNTER):x}"


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644, durable: bool = True) -> None:
    """Replaces `path` with `data` so readers see the old or the new file, never a mix."""
    tmp = path.with_name(temp_name(path.name))
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                f.write(data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if durable:
            fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise_if_disk_full(exc)
        raise


def atomic_write_at(dir_fd: int, name: str, data: bytes, *, mode: int = 0o644) -> None:
    """atomic_write() for a file named relative to an open directory: the directory was
    opened without following symlinks, so the write cannot be redirected (INV-1)."""
    tmp = temp_name(name)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.fsync(dir_fd)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise_if_disk_full(exc)
        raise


def raise_if_disk_full(exc: OSError, where: Path | None = None) -> None:
    """Turns ENOSPC/EDQUOT into the public disk-full error; leaves other errors alone.
    `where` names the folder being written when it may be on neither the workspace's nor the
    store's disk (a fork's destination), so the answer can name the disk that is full."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        details = {"path": str(where)} if where is not None else None
        raise DiskFullError(
            f"no space left while writing: {exc.filename or exc}", details=details
        ) from exc


def open_subdir_nofollow(parent_fd: int, name: str, *, create: bool) -> int:
    """Opens directory `name` below `parent_fd` (creating it if asked), never through a symlink.

    A symlink or file in the way raises invalid_argument instead of carrying a write outside
    the root. The caller closes the returned fd.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        return os.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InvalidArgumentError(
                f"refusing to write through {name!r}: it is not a real directory",
                next_step="remove the symlink or file in the way, then retry",
            ) from exc
        raise


def fd_budget(cap: int, share: int) -> int:
    """How many files one cache of open descriptors may hold: at most `cap`, and at most
    1/`share` of this process's limit on open files (which may be far below 1024)."""
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(4, min(cap, soft // share))


def set_link_mtime(name: str, dir_fd: int, mtime_ns: int) -> None:
    """Sets the times of `name` in `dir_fd` itself, a symlink not followed."""
    os.utime(name, ns=(mtime_ns, mtime_ns), dir_fd=dir_fd, follow_symlinks=False)


def replace_from_temp(tmp: str, dir_fd: int, name: str) -> None:
    """Renames `tmp` over `name` in one folder; `tmp` is gone whether or not that worked."""
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
