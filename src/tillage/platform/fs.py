"""Durable file-system primitives: the one place atomic writes and directory syncs are spelled.

Every durable pattern in tillage goes through these (INV-1, INV-7 in docs/design/invariants.md).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from tillage.errors import InvalidArgumentError
from tillage.platform.errors import DiskFullError


def fsync_dir(path: Path | str) -> None:
    """Makes a directory's entries (creations, renames, deletions) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_name(final: str) -> str:
    """Returns a sibling temporary name for `final` that tillage recognises and cleans up."""
    return f".{final}.tillage-tmp-{secrets.token_hex(6)}"


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


def raise_if_disk_full(exc: OSError) -> None:
    """Turns ENOSPC/EDQUOT into the public disk-full error; leaves other errors alone."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        raise DiskFullError(f"no space left while writing: {exc.filename or exc}") from exc


def open_dir_nofollow(root_fd: int, parts: list[str], *, create: bool) -> int:
    """Opens the directory `parts` below `root_fd`, never following a symlink on the way.

    A symlinked parent raises invalid_argument instead of carrying a write outside the root.
    The caller closes the returned fd.
    """
    fd = os.dup(root_fd)
    try:
        for name in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
            try:
                nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise InvalidArgumentError(
                        f"refusing to write through {name!r}: it is not a real directory",
                        next_step="remove the symlink or file in the way, then retry",
                    ) from exc
                raise
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def dir_fd(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)
