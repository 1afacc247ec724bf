"""Folder operations by descriptor: removing trees and leftovers, syncing a file system, and
asking ext4 to place new folders away from recently deleted inodes.

Everything here works from open directory descriptors, never by path, so depth does not matter
and no symlink is ever followed.
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import functools
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from tillage.core.paths import CONTROL_DIR
from tillage.platform.fs import TEMP_MARK, open_subdir_nofollow


def remove_tree(parent_fd: int, name: str, *, spare: Callable[[int], bool] | None = None) -> bool:
    """Removes the folder `name` below `parent_fd` and everything in it, lending write
    permission to read-only folders inside it the way `rm -rf` by their owner would. A walk
    with an explicit stack: any depth the kernel allows (a path of 4,096 bytes holds ~2,000
    folders), with one descriptor open per level. `spare(fd)` True for a subfolder leaves it
    and everything in it (and so the folders above it) in place; returns whether the whole
    folder went."""
    whole = True
    # (parent fd, name, fd, remaining children); the bottom entry's parent is the caller's.
    stack: list[tuple[int, str, int, list[tuple[str, bool]]]] = []
    try:
        stack.append((parent_fd, name, *_open_for_removal(parent_fd, name)))
        while stack:
            parent, current, fd, children = stack[-1]
            if children:
                child, is_dir = children.pop()
                if not is_dir:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(child, dir_fd=fd)
                    continue
                try:
                    child_fd, grandchildren = _open_for_removal(fd, child)
                except FileNotFoundError:
                    continue
                if spare is not None and spare(child_fd):
                    os.close(child_fd)
                    whole = False
                    continue
                stack.append((fd, child, child_fd, grandchildren))
                continue
            stack.pop()
            os.close(fd)
            try:
                os.rmdir(current, dir_fd=parent)
            except OSError as exc:
                if spare is None or exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                whole = False  # it holds a spared folder
    finally:
        for _parent, _name, fd, _children in stack:
            os.close(fd)
    return whole


def _open_for_removal(parent_fd: int, name: str) -> tuple[int, list[tuple[str, bool]]]:
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o700 != 0o700:
            with contextlib.suppress(OSError):
                os.fchmod(fd, mode | 0o700)
        with os.scandir(fd) as entries:
            children = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    except BaseException:
        os.close(fd)
        raise
    return fd, children


def remove_folder(path: Path, *, durable: bool = False) -> None:
    """Removes the folder `path` (one tillage made: a fork's staging or trash, a scratch
    copy) by descriptor, as remove_tree does; gone already is fine. `durable`: the removal is
    made durable in its parent folder before returning."""
    try:
        parent_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            remove_tree(parent_fd, path.name)
        if durable:
            os.fsync(parent_fd)
    finally:
        os.close(parent_fd)


def regular_files(
    top: int, skip: Callable[[str], bool] | None = None
) -> Iterator[tuple[int, str, str, os.stat_result]]:
    """Yields (folder fd, name, '/'-relative path, lstat) for every regular file below the
    open folder `top`, which it closes: folders are entered by descriptor, never through a
    symlink; `skip(rel)` True leaves out that file or subtree; what vanishes or cannot be
    opened on the way is passed over. The folder fd stays open until the next is listed."""
    pending: list[tuple[int, str]] = [(top, "")]
    try:
        while pending:
            fd, rel = pending.pop()
            try:
                with os.scandir(fd) as it:
                    entries = list(it)
                for entry in entries:
                    path = f"{rel}/{entry.name}" if rel else entry.name
                    if skip is not None and skip(path):
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        yield fd, entry.name, path, st
                    elif stat.S_ISDIR(st.st_mode):
                        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                        with contextlib.suppress(OSError):
                            pending.append((os.open(entry.name, flags, dir_fd=fd), path))
            finally:
                os.close(fd)
    finally:
        for fd, _rel in pending:
            os.close(fd)


def remove_temp_files(root: Path) -> None:
    """Removes the temporary siblings (TEMP_MARK) an interrupted writer left anywhere below
    `root`, but inside its `.tillage/` and inside a workspace nested in it (a folder with its
    own `.tillage/`: its writers may be running); a symlinked folder is never entered."""
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    pending = [top]
    while pending:
        fd = pending.pop()
        try:
            with os.scandir(fd) as entries:
                for item in entries:
                    if fd == top and item.name == CONTROL_DIR:
                        continue
                    if item.is_dir(follow_symlinks=False):
                        with contextlib.suppress(OSError):
                            sub = open_subdir_nofollow(fd, item.name, create=False)
                            if _holds_control_dir(sub):  # a nested workspace: its own files
                                os.close(sub)
                            else:
                                pending.append(sub)
                    elif TEMP_MARK in item.name:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(item.name, dir_fd=fd)
        except OSError:
            pass
        finally:
            os.close(fd)


def _holds_control_dir(fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.stat(CONTROL_DIR, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@functools.cache
def _syncfs_call() -> Callable[[int], int] | None:
    import ctypes

    try:
        fn: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    return fn


def syncfs(fd: int) -> None:
    """Makes everything written to the file system holding `fd` durable, in one call: one
    journal commit for a whole rewind instead of an fsync per file."""
    call = _syncfs_call()
    if call is None or call(fd) != 0:
        os.sync()


_FS_IOC_GETFLAGS = 0x80086601
_FS_IOC_SETFLAGS = 0x40086602
_FS_TOPDIR_FL = 0x00020000


def spread_new_folders(fd: int) -> Callable[[], None] | None:
    """Marks the folder `fd` as a top of a directory hierarchy (ext4's `T` attribute) until
    the returned callable is called; None where the file system has no such thing.

    Why: right after a mass delete (`rm -rf`, `git clean -fdx`), ext4 will not reuse an inode
    freed in the last minute, and its allocator checks every such inode of the group before
    each creation, so restoring a wiped tree in place costs time quadratic in its size. A
    folder created below a `T` folder is placed by the Orlov allocator in a group of its own,
    away from the freed inodes, and its files follow it. The attribute only steers placement.
    """
    flags = array.array("i", [0])
    try:
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        old = flags[0]
        if old & _FS_TOPDIR_FL:
            return None
        flags[0] = old | _FS_TOPDIR_FL
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, flags, True)
    except OSError:  # not ext4, not ours, read-only: placement stays the kernel's choice
        return None
    kept = os.dup(fd)

    def restore() -> None:
        try:
            with contextlib.suppress(OSError):
                fcntl.ioctl(kept, _FS_IOC_SETFLAGS, array.array("i", [old]), True)
        finally:
            os.close(kept)

    return restore


_FS_IOC_GETVERSION = 0x80087601  # _IOR('v', 1, long): the inode's generation number


def folder_identity(path: Path) -> str | None:
    """Names the very folder at `path`, never a folder made later at the same path: its
    device, inode and the inode's generation (ext4, XFS and btrfs give an inode number freed
    by `rm -rf` to the next folder made, with a new generation). None where the file system
    keeps no generation, or the path is not a folder."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = fcntl.ioctl(fd, _FS_IOC_GETVERSION, bytes(8))
        st = os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    generation = int.from_bytes(raw[:4], "little")  # the kernel writes a 32-bit number
    return f"{st.st_dev}:{st.st_ino}:{generation}"
