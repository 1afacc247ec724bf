"""Copying a folder tree byte-exact with its metadata, by the cheapest driver the file systems
allow: a reflink (FICLONE, shared extents), `copy_file_range` (in-kernel copy), or a plain copy.
The two that write keep a sparse file's holes: they copy only its data segments (SEEK_DATA,
SEEK_HOLE) and set its size with ftruncate, as `cp` does (a 1 GiB disk image holding 1 MiB
cost its fork 1 GiB and 4.5 s); a reflink shares the extents, holes and all.

Everything is walked by descriptor: a folder is opened below its already-open parent with
O_NOFOLLOW, so a symlink (or a folder swapped for one mid-copy) is copied as a symlink and never
followed out of the source. Regular files are copied by a small pool of threads (the copy calls
release the GIL, so two cores copy faster than one `cp`); folder metadata is applied last,
deepest first, so a read-only folder can still be filled and its mtime is not disturbed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from tillage.core.paths import CONTROL_DIR
from tillage.platform.folders import regular_files
from tillage.platform.fs import TEMP_MARK, current_umask, pwrite_all, raise_if_disk_full

DRIVERS = ("reflink", "copy_file_range", "copy")
FICLONE = 0x40049409
_FALLBACK_ERRNOS = frozenset(
    {errno.EXDEV, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS, errno.ENOTTY, errno.EBADF}
)
_CHUNK = 1 << 30  # bytes asked of one copy_file_range / sendfile call
_BATCH = 64  # files handed to a worker at once: a future per file costs more than a small copy

Skip = Callable[[str], bool]
FileFacts = Callable[[str, os.stat_result, os.stat_result, os.stat_result], None]


@dataclass(frozen=True)
class CopyStats:
    """What a copy did: the driver that carried it (the slowest one any file fell back to),
    how many regular files, folders and bytes it copied, and how many entries it left out
    because they cannot be copied meaningfully (sockets, FIFOs, devices)."""

    driver: str
    files: int
    dirs: int
    bytes: int
    links: int = 0
    hardlinks: int = 0
    skipped_special: int = 0


class _UnsupportedError(Exception):
    """The driver cannot copy this file here; the next driver is tried."""


def _clone(src: int, dst: int, size: int) -> None:
    try:
        fcntl.ioctl(dst, FICLONE, src)
    except OSError as exc:
        if exc.errno in _FALLBACK_ERRNOS or exc.errno == errno.EPERM:
            raise _UnsupportedError from exc
        raise


def _sparse_size(src: int) -> int | None:
    """The size of `src` when it may hold holes the file system can seek by (fewer blocks
    allocated than its size needs); None for a dense file, or where SEEK_DATA is not
    supported: it is copied whole."""
    st = os.fstat(src)
    if not (st.st_size > 0 and st.st_blocks * 512 < st.st_size):
        return None
    try:
        os.lseek(src, 0, os.SEEK_HOLE)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENXIO):
            return None
        raise
    return st.st_size


def _spans(src: int) -> tuple[Iterator[tuple[int, int | None]], int | None]:
    """What of `src` to copy: its data segments `[start, end)` up to the size it had, and that
    size for the copy's ftruncate (the holes between are never written, so the copy stays as
    sparse as its source); one span to the end of the file, and no size, for a dense file."""
    size = _sparse_size(src)
    if size is None:
        return iter(((0, None),)), None
    return _data_segments(src, size), size


def _data_segments(src: int, size: int) -> Iterator[tuple[int, int | None]]:
    pos = 0
    while pos < size:
        try:
            start = os.lseek(src, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return  # nothing but a hole up to the end
            raise
        if start >= size:
            return
        end = min(os.lseek(src, start, os.SEEK_HOLE), size)
        yield start, end
        pos = end


def _copy_range(src: int, dst: int, size: int) -> None:
    spans, sparse = _spans(src)
    first = True
    for start, end in spans:
        offset = start
        while end is None or offset < end:
            want = _CHUNK if end is None else min(_CHUNK, end - offset)
            try:
                n = os.copy_file_range(src, dst, want, offset, offset)
            except OSError as exc:
                if exc.errno in _FALLBACK_ERRNOS and first and offset == start:
                    raise _UnsupportedError from exc
                raise
            if n == 0:
                break
            offset += n
        first = False
    if sparse is not None:
        os.ftruncate(dst, sparse)


def _plain_copy(src: int, dst: int, size: int) -> None:
    spans, sparse = _spans(src)
    sending = True
    for start, end in spans:
        sending = sending and _send(src, dst, start, end)
        if not sending:
            _read_write(src, dst, start, end)
    if sparse is not None:
        os.ftruncate(dst, sparse)


def _send(src: int, dst: int, start: int, end: int | None) -> bool:
    """Copies `[start, end)` (to the end of the file when `end` is None) with sendfile; False,
    nothing written, where sendfile cannot copy between these two files."""
    offset = start
    os.lseek(dst, start, os.SEEK_SET)  # sendfile writes at the destination's own position
    try:
        while end is None or offset < end:
            n = os.sendfile(dst, src, offset, _CHUNK if end is None else min(_CHUNK, end - offset))
            if n == 0:
                break
            offset += n
    except OSError as exc:
        if exc.errno not in _FALLBACK_ERRNOS or offset != start:
            raise
        return False
    return True


def _read_write(src: int, dst: int, start: int, end: int | None) -> None:
    offset = start
    while end is None or offset < end:
        data = os.pread(src, 1 << 20 if end is None else min(1 << 20, end - offset), offset)
        if not data:
            return
        pwrite_all(dst, data, offset)
        offset += len(data)


_COPIERS: dict[str, Callable[[int, int, int], None]] = {
    "reflink": _clone,
    "copy_file_range": _copy_range,
    "copy": _plain_copy,
}


def _copy_bytes(src: int, dst: int, size: int, driver: str) -> str:
    """Copies `src` into the empty `dst` with `driver`, falling back along DRIVERS; returns
    the driver that did it."""
    for name in DRIVERS[DRIVERS.index(driver) :]:
        try:
            _COPIERS[name](src, dst, size)
            return name
        except _UnsupportedError:
            os.ftruncate(dst, 0)
            continue
    raise AssertionError("the plain copy never reports unsupported")


def _probe_location(src_dir: Path) -> Path:
    # A workspace's control folder is never captured, so a probe file there stirs no watcher.
    control = src_dir / ".tillage"
    return control if control.is_dir() and not control.is_symlink() else src_dir


# Where O_TMPFILE is refused for what the file system is (not for who asks): a named file then.
_NO_TMPFILE = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL})


def _probe_file(folder: Path, name: str) -> tuple[int, Path | None]:
    """A scratch file on `folder`'s file system, opened read-write: an anonymous one
    (O_TMPFILE), which a process killed while it holds it leaves nowhere, or, where the file
    system has none, `folder/name` (returned, to be unlinked)."""
    try:
        return os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o600), None
    except OSError as exc:
        if exc.errno not in _NO_TMPFILE:
            raise
    path = folder / name
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), path


def _close_probe(fd: int, path: Path | None) -> None:
    os.close(fd)
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


def probe(src_dir: Path, dst_dir: Path) -> str:
    """Returns the fastest driver that works from `src_dir`'s file system to `dst_dir`'s:
    "reflink", "copy_file_range" or "copy", found by copying a small temporary file (anonymous
    where the file systems allow: a probe killed half-way leaves no file behind)."""
    where = _probe_location(src_dir)
    try:
        fd, src_name = _probe_file(where, f".probe{TEMP_MARK}{os.getpid():x}-src")
    except OSError:
        return "copy"
    try:
        os.write(fd, b"tillage clone probe\n" * 205)
        for driver in DRIVERS[:2]:
            try:
                out, dst_name = _probe_file(dst_dir, f".probe{TEMP_MARK}{os.getpid():x}-dst")
            except OSError:
                return "copy"
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                _COPIERS[driver](fd, out, 4100)
                return driver
            except (_UnsupportedError, OSError):
                continue
            finally:
                _close_probe(out, dst_name)
        return "copy"
    finally:
        _close_probe(fd, src_name)


def _copy_xattrs(src: int, dst: int) -> None:
    try:
        names = os.listxattr(src)
    except OSError:
        return
    for name in names:
        if not name.startswith("user."):
            continue
        with contextlib.suppress(OSError):
            os.setxattr(dst, name, os.getxattr(src, name))


class _Dir:
    """A folder being copied: both descriptors stay open until its last file batch and
    subfolder have been made below them; then the copy gets the folder's mode, owner and
    times (nothing is created in it afterwards, so its mtime stays)."""

    __slots__ = ("as_root", "dst", "lock", "pending", "rel", "src", "st")

    def __init__(self, src: int, dst: int, rel: str, as_root: bool) -> None:
        self.src = src
        self.dst = dst
        self.rel = rel
        self.st = os.fstat(src)
        self.as_root = as_root
        self.pending = 1  # the walker's own hold while it lists the folder
        self.lock = threading.Lock()

    def hold(self) -> None:
        with self.lock:
            self.pending += 1

    def drop(self) -> None:
        with self.lock:
            self.pending -= 1
            done = self.pending == 0
        if not done:
            return
        try:
            _apply_dir_meta(self.dst, self.st, self.as_root)
        finally:
            os.close(self.src)
            os.close(self.dst)


def _apply_dir_meta(fd: int, st: os.stat_result, as_root: bool) -> None:
    if as_root:
        with contextlib.suppress(OSError):
            os.fchown(fd, st.st_uid, st.st_gid)
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def _open_dir_at(top: int, rel: str) -> int:
    """Opens the folder `rel` ('/'-separated) below `top` one component at a time without
    following symlinks, so depth is no limit."""
    fd = os.dup(top)
    for part in rel.split("/") if rel else ():
        try:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


@dataclass
class _Tally:
    files: int = 0
    bytes: int = 0
    drivers: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def _copy_files(
    folder: _Dir,
    batch: list[tuple[str, os.stat_result]],
    driver: str,
    tally: _Tally,
    on_file: FileFacts | None,
    own: tuple[int, int, int],
) -> None:
    """Copies one batch of a folder's regular files. Each copy is created with its final
    mode where the umask lets it (no chmod), owned as its source when this is root and they
    differ, and stamped with the source's times as they were after the copy."""
    umask, uid, gid = own
    try:
        files = 0
        total = 0
        used: set[str] = set()
        for name, before in batch:
            try:
                # O_NONBLOCK: a name swapped for a FIFO since it was listed must not hang us.
                src = os.open(
                    name,
                    os.O_RDONLY | os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK,
                    dir_fd=folder.src,
                )
            except FileNotFoundError:
                continue  # deleted while we copied: the copy is of a moment just after
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    continue  # swapped for a symlink mid-copy: never followed
                raise
            try:
                mode = stat.S_IMODE(before.st_mode)
                dst = os.open(
                    name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                    mode,
                    dir_fd=folder.dst,
                )
                try:
                    used.add(_copy_bytes(src, dst, before.st_size, driver))
                    _copy_xattrs(src, dst)
                    after = os.fstat(src)
                    if not stat.S_ISREG(after.st_mode):
                        os.unlink(name, dir_fd=folder.dst)
                        continue
                    if uid == 0 and (after.st_uid, after.st_gid) != (uid, gid):
                        with contextlib.suppress(OSError):
                            os.fchown(dst, after.st_uid, after.st_gid)
                    if mode & umask or mode & 0o7000 or mode != stat.S_IMODE(after.st_mode):
                        os.fchmod(dst, stat.S_IMODE(after.st_mode))  # what creation could not
                    os.utime(dst, ns=(after.st_atime_ns, after.st_mtime_ns))
                    if on_file is not None:
                        on_file(_join(folder.rel, name), before, after, os.fstat(dst))
                finally:
                    os.close(dst)
                files += 1
                total += after.st_size
            finally:
                os.close(src)
        with tally.lock:
            tally.files += files
            tally.bytes += total
            tally.drivers |= used
    finally:
        folder.drop()


def _open_pair(parent: _Dir, name: str, rel: str) -> _Dir | None:
    """Opens the subfolder `name` on both sides (creating the copy); None when it vanished
    or was swapped for something that is not a folder (never followed)."""
    try:
        sub_src = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent.src)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    try:
        os.mkdir(name, 0o700, dir_fd=parent.dst)
        sub_dst = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent.dst)
    except OSError as exc:
        os.close(sub_src)
        raise_if_disk_full(exc)
        raise
    return _Dir(sub_src, sub_dst, rel, parent.as_root)


def _walk_folder(
    folder: _Dir,
    skip: Skip | None,
    submit: Callable[[_Dir, list[tuple[str, os.stat_result]]], None],
    stack: list[tuple[_Dir, str, str]],
    links: list[tuple[str, str]],
    seen_inodes: dict[tuple[int, int], str],
    counts: dict[str, int],
    as_root: bool,
    skip_workspaces: bool = False,
) -> None:
    """Lists one folder: regular files go to the workers in batches, subfolders onto the
    walk's stack (not one holding its own `.tillage/`, with `skip_workspaces`), symlinks are
    recreated here, other kinds are counted and left out."""
    batch: list[tuple[str, os.stat_result]] = []
    with os.scandir(folder.src) as it:
        entries = list(it)
    for entry in entries:
        rel = _join(folder.rel, entry.name)
        if skip is not None and skip(rel):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        kind = stat.S_IFMT(st.st_mode)
        if kind == stat.S_IFREG:
            if st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                first = seen_inodes.get(key)
                if first is not None:
                    links.append((first, rel))
                    continue
                seen_inodes[key] = rel
            batch.append((entry.name, st))
            if len(batch) >= _BATCH:
                submit(folder, batch)
                batch = []
        elif kind == stat.S_IFDIR:
            if skip_workspaces and _holds_control_dir(folder.src, entry.name):
                continue
            folder.hold()
            stack.append((folder, entry.name, rel))
        elif kind == stat.S_IFLNK:
            try:
                target = os.readlink(entry.name, dir_fd=folder.src)
            except FileNotFoundError:
                continue
            os.symlink(target, entry.name, dir_fd=folder.dst)
            with contextlib.suppress(OSError):
                if as_root:
                    os.chown(
                        entry.name, st.st_uid, st.st_gid, dir_fd=folder.dst, follow_symlinks=False
                    )
                os.utime(
                    entry.name,
                    ns=(st.st_atime_ns, st.st_mtime_ns),
                    dir_fd=folder.dst,
                    follow_symlinks=False,
                )
            counts["links"] += 1
        else:
            counts["special"] += 1
    if batch:
        submit(folder, batch)


def _holds_control_dir(dir_fd: int, name: str) -> bool:
    try:
        st = os.stat(f"{name}/{CONTROL_DIR}", dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode)


def _make_hardlinks(top: int, links: list[tuple[str, str]]) -> None:
    """Gives the copy of each hard-linked file its other names, by descriptor; the folder
    that gets a name keeps its copied mode and mtime (both are put back after)."""
    for first, other in links:
        a_dir, _, a_name = first.rpartition("/")
        b_dir, _, b_name = other.rpartition("/")
        src_fd = _open_dir_at(top, a_dir)
        try:
            dst_fd = _open_dir_at(top, b_dir)
            try:
                st = os.fstat(dst_fd)
                if st.st_mode & 0o300 != 0o300:
                    os.fchmod(dst_fd, stat.S_IMODE(st.st_mode) | 0o300)
                try:
                    os.link(a_name, b_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
                finally:
                    os.fchmod(dst_fd, stat.S_IMODE(st.st_mode))
                    os.utime(dst_fd, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(dst_fd)
        finally:
            os.close(src_fd)


def copy_tree(
    src: Path,
    dst: Path,
    *,
    skip: Skip | None = None,
    driver: str | None = None,
    threads: int = 2,
    on_file: FileFacts | None = None,
    skip_workspaces: bool = False,
) -> CopyStats:
    """Copies the folder `src` to the new folder `dst` (which must not exist; its parent
    must), byte-exact: modes, mtimes (ns), user xattrs, symlinks as symlinks, hard links kept
    as links; sockets, FIFOs and devices are left out and counted.

    `skip(rel)` gets each entry's '/'-separated path relative to `src` and leaves out that
    file or subtree when True. `driver` defaults to `probe(src, dst.parent)`; a file the driver
    cannot copy falls back to the next one. `on_file(rel, before, after, copy)` is called from
    a worker thread for every copied regular file with its stat facts before and after the
    copy and those of the copy: equal facts mean the file did not change while copied.
    `threads` 0 copies on the walking thread itself. `skip_workspaces` leaves out every
    subfolder that holds its own `.tillage/` folder: a workspace nested in the one copied.
    """
    if driver is None:
        driver = probe(src, dst.parent)
    if driver not in DRIVERS:
        raise ValueError(driver)
    as_root = os.geteuid() == 0
    own = (current_umask(), os.geteuid(), os.getegid())
    tally = _Tally()
    dirs = 0
    links: list[tuple[str, str]] = []  # (first copy, another name of the same inode)
    seen_inodes: dict[tuple[int, int], str] = {}
    counts = {"links": 0, "special": 0}
    src_top = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.mkdir(dst, 0o700)
    except OSError as exc:
        os.close(src_top)
        raise_if_disk_full(exc)
        raise
    dst_top = os.open(dst, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    link_top = os.dup(dst_top)
    # The walk is depth first over (parent, name) pairs, a subfolder opened only when its turn
    # comes: open descriptors stay bounded by the depth plus the batches in flight.
    root = _Dir(src_top, dst_top, "", as_root)
    stack: list[tuple[_Dir, str, str]] = []
    futures: set[Future[None]] = set()
    in_flight = 4 * max(1, threads)

    def settle(limit: int) -> None:
        while len(futures) > limit:
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for f in done:
                futures.discard(f)
                f.result()

    def submit(folder: _Dir, batch: list[tuple[str, os.stat_result]]) -> None:
        folder.hold()
        if threads == 0:
            _copy_files(folder, batch, driver, tally, on_file, own)
            return
        futures.add(pool.submit(_copy_files, folder, batch, driver, tally, on_file, own))
        settle(in_flight)

    pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="clone")
    try:
        folder: _Dir | None = root
        while folder is not None:
            try:
                _walk_folder(
                    folder,
                    skip,
                    submit,
                    stack,
                    links,
                    seen_inodes,
                    counts,
                    as_root,
                    skip_workspaces,
                )
            finally:
                folder.drop()
            folder = None
            while stack and folder is None:
                parent, name, rel = stack.pop()
                try:
                    folder = _open_pair(parent, name, rel)
                finally:
                    parent.drop()
                dirs += folder is not None
        settle(0)
    finally:
        for parent, _name, _rel in stack:
            parent.drop()
        pool.shutdown(wait=True)

    try:
        _make_hardlinks(link_top, links)
    finally:
        os.close(link_top)
    used = tally.drivers or {driver}
    reported = max(used, key=DRIVERS.index)
    return CopyStats(
        driver=reported,
        files=tally.files,
        dirs=dirs,
        bytes=tally.bytes,
        links=counts["links"],
        hardlinks=len(links),
        skipped_special=counts["special"],
    )


def plan_tree(src: Path, *, skip: Skip | None = None) -> tuple[int, int]:
    """Counts the regular files below `src` and their bytes, as copy_tree would copy them,
    without copying anything (symlinked folders are not entered)."""
    files = 0
    total = 0
    for _fd, _name, _rel, st in regular_files(os.open(src, os.O_RDONLY | os.O_DIRECTORY), skip):
        files += 1
        total += st.st_size
    return files, total


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def rename_noreplace(src: Path, dst: Path) -> None:
    """Renames `src` to `dst` atomically, failing with FileExistsError when `dst` exists (an
    empty folder included, which a plain rename would silently replace)."""
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        call = None
    if call is not None:
        rc = call(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
        if rc == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(err, os.strerror(err), str(src), None, str(dst))
    if os.path.lexists(dst):  # no renameat2 here: a check, then the rename
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)
