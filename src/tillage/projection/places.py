"""Places: wherever files live while a run happens. A place reads, writes and lists; it runs
nothing.

One rule matters more than the rest: `list` raises when the place cannot be read. An empty
list asserts "readable and empty", and a flush acts on it by deleting what it owns.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tillage.core.paths import CONTROL_DIR
from tillage.core.projection import BadPathError, normalize, normalize_prefix
from tillage.platform.fs import TEMP_MARK, temp_name, write_all


class Place(Protocol):
    """What a projection needs of a place (implement these three to supply your own)."""

    async def read(self, path: str) -> str | None:
        """The file's content, or None when there is none."""
        ...

    async def write(self, path: str, content: str) -> None:
        """Puts `content` at `path`, creating folders as needed."""
        ...

    async def list(self, prefixes: Sequence[str]) -> list[str]:
        """Every file under any of `prefixes` ("" for all), reading nothing outside them;
        raises when it cannot read."""
        ...


class PlaceUnreadableError(Exception):
    """The place could not be listed, so a flush decided nothing: nothing was read from a
    collection and nothing was written. The only flush failure a caller may safely swallow."""


class UnsafePathError(ValueError):
    """A path that could leave the place: absolute, `..`, or through a symlink anywhere in it
    (at the file or at any folder above it). Refused, never followed."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class HostPlace:
    """A place backed by a real folder, created when missing.

    Every path is walked from the root one folder at a time by descriptor, without following
    symlinks: a link planted anywhere in a path, at the file or at a folder above it, inside
    the root or pointing out of it, is refused (UnsafePathError) for reads and writes, and
    listing never shows one. tillage's own `.tillage` folder at the root is never listed.
    Writes replace a file whole (a sibling temporary renamed over it): a reader sees the old
    content or the new, never a mix.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.abspath(os.fspath(root)))
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"HostPlace({str(self.root)!r})"

    async def read(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else _decode(data)

    async def write(self, path: str, content: str) -> None:
        self.write_bytes(path, _encode(content))

    async def list(self, prefixes: Sequence[str]) -> list[str]:
        found: set[str] = set()
        root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # gone: raises
        try:
            for prefix in prefixes or [""]:
                found.update(self._list_under(root, _prefix(prefix)))
        finally:
            os.close(root)
        return sorted(found)

    # -- synchronous parts (the async methods are thin: local file work does not wait) -----

    def read_bytes(self, path: str) -> bytes | None:
        """The file's bytes, or None when there is no file there."""
        parts = _parts(path)
        parent = self._open_parents(parts[:-1], create=False)
        if parent is None:
            return None
        try:
            try:
                # O_NONBLOCK: a named pipe planted at the path would otherwise hold the open
                # until some writer came; it is no regular file and reads as None below.
                fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafePathError(f"{path!r} is a symlink: refused") from exc
                if exc.errno in (errno.EISDIR, errno.ENOTDIR):
                    return None
                raise
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                chunks = []
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                return b"".join(chunks)
            finally:
                os.close(fd)
        finally:
            os.close(parent)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Replaces the file at `path` with `data`, creating folders as needed."""
        parts = _parts(path)
        if parts[0] == CONTROL_DIR:
            raise UnsafePathError(f"{path!r} is inside tillage's own {CONTROL_DIR} folder")
        parent = self._open_parents(parts[:-1], create=True)
        assert parent is not None
        name = parts[-1]
        try:
            with contextlib.suppress(FileNotFoundError):
                st = os.lstat(name, dir_fd=parent)
                if stat.S_ISLNK(st.st_mode):
                    raise UnsafePathError(f"{path!r} is a symlink: refused, not written through")
                if stat.S_ISDIR(st.st_mode):
                    raise UnsafePathError(f"{path!r} is a folder: not replaced by a file")
            tmp = temp_name(name)
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=parent,
            )
            try:
                write_all(fd, data)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise
            os.close(fd)
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        finally:
            os.close(parent)

    def _open_parents(self, folders: Sequence[str], *, create: bool) -> int | None:
        """A descriptor of the folder holding a path (the caller closes it), walked from the
        root without following a link; None when a folder is missing and not `create`."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for i, name in enumerate(folders):
            try:
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o755, dir_fd=fd)
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    where = "/".join(folders[: i + 1])
                    raise UnsafePathError(
                        f"{where!r} is a symlink or a file, not a folder: refused"
                    ) from exc
                raise
            os.close(fd)
            fd = child
        return fd

    def _list_under(self, root: int, prefix: str) -> Iterator[str]:
        fd: int | None
        if prefix:
            if prefix.split("/", 1)[0] == CONTROL_DIR:
                return  # tillage's own folder is never listed
            try:
                fd = self._open_from(root, prefix.split("/"))
            except UnsafePathError:
                return  # a link (or a file) where the prefix's folder should be: nothing listed
            if fd is None:
                return  # never created: readable and empty
        else:
            fd = os.dup(root)
        try:
            yield from _walk(fd, prefix, top=not prefix)
        finally:
            os.close(fd)

    def _open_from(self, root: int, folders: Sequence[str]) -> int | None:
        fd = os.dup(root)
        for name in folders:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.close(fd)
                return None
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePathError(name) from exc
                raise
            os.close(fd)
            fd = child
        return fd


# How many folder descriptors a walk holds at most, however deep or wide the tree.
MAX_OPEN_FOLDERS = 64


@dataclass
class _Folder:
    """A folder on the walk's path from its top: its descriptor while it still has subfolders
    to visit (None once let go), what it was (device, inode), and those subfolders."""

    path: str
    name: str
    ident: tuple[int, int]
    fd: int | None
    pending: list[str]
    owned: bool = True


def _walk(fd: int, at: str, *, top: bool) -> Iterator[str]:
    """Regular files below the open folder `fd` (named `at`; the caller's to close), never
    through a link, at any depth: a loop over a stack, not recursion.

    Each folder is read whole when reached; it keeps its descriptor only while subfolders of
    it remain to visit, and at most MAX_OPEN_FOLDERS are kept: one let go is opened again
    when the walk returns to it, from the nearest open folder above, one name at a time
    without following a link, and must still be the folder it was (else the listing raises:
    a place that changed shape mid-listing cannot be described, and a partial list would
    read as deletions)."""
    subfolders, files = _read_folder(fd, at, top=top)
    yield from files
    stack = [_Folder(at, "", _ident(fd), fd, subfolders, owned=False)]
    try:
        while stack:
            here = stack[-1]
            if not here.pending:
                stack.pop()
                _let_go(here)
                continue
            name = here.pending.pop()
            parent = _reopened(stack)
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=parent)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                    continue  # removed, or replaced by a link or a file, while listing
                raise
            if not here.pending:
                _let_go(here)  # nothing more to open from it
            path = f"{here.path}/{name}" if here.path else name
            try:
                subfolders, files = _read_folder(child, path, top=False)
                stack.append(_Folder(path, name, _ident(child), child, subfolders))
            except BaseException:
                os.close(child)
                raise
            _keep_at_most(stack, MAX_OPEN_FOLDERS)
            yield from files
    finally:
        for folder in stack:
            _let_go(folder)


def _read_folder(fd: int, at: str, *, top: bool) -> tuple[list[str], list[str]]:
    """(subfolder names, file paths) of the open folder `fd`: links, temporaries and, at the
    top, tillage's own folder left out."""
    with os.scandir(fd) as entries:
        listed = [
            (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
            for e in entries
        ]
    subfolders: list[str] = []
    files: list[str] = []
    for name, is_dir, is_file in listed:
        if TEMP_MARK in name or (top and name == CONTROL_DIR):
            continue
        if is_file:
            files.append(f"{at}/{name}" if at else name)
        elif is_dir:
            subfolders.append(name)
    subfolders.sort(reverse=True)  # popped from the end: visited in name order
    return subfolders, files


def _ident(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _let_go(folder: _Folder) -> None:
    if folder.fd is not None and folder.owned:
        os.close(folder.fd)
        folder.fd = None


def _keep_at_most(stack: list[_Folder], limit: int) -> None:
    """Lets go of the descriptors nearest the top until at most `limit` are held (never the
    walk's own top, which is the caller's, nor the folder being read)."""
    held = [f for f in stack[:-1] if f.fd is not None and f.owned]
    for folder in held[: max(0, len(held) + 1 - limit)]:
        _let_go(folder)


def _reopened(stack: list[_Folder]) -> int:
    """The descriptor of the innermost folder on `stack`, opened again if it was let go."""
    here = stack[-1]
    if here.fd is not None:
        return here.fd
    start = max(i for i, f in enumerate(stack) if f.fd is not None)  # the top always is
    base = stack[start].fd
    assert base is not None
    fd = base
    try:
        for folder in stack[start + 1 :]:
            try:
                child = os.open(folder.name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise OSError(
                    exc.errno, f"{folder.path!r} was moved while the place was listed"
                ) from exc
            if fd != base:
                os.close(fd)
            fd = child
            if _ident(fd) != folder.ident:
                raise OSError(
                    errno.ESTALE, f"{folder.path!r} was replaced while the place was listed"
                )
    except BaseException:
        if fd != base:
            os.close(fd)
        raise
    here.fd = fd
    _keep_at_most(stack, MAX_OPEN_FOLDERS)
    return fd


def _parts(path: str) -> list[str]:
    try:
        return normalize(path).split("/")
    except BadPathError as exc:
        raise UnsafePathError(str(exc)) from exc


def _prefix(prefix: str) -> str:
    try:
        return normalize_prefix(prefix)
    except BadPathError as exc:
        raise UnsafePathError(str(exc)) from exc


class MemoryPlace:
    """A place held in a dict: to test wiring without a folder. `snapshot()`, `remove(path)`
    and `break_listing(reason)` are for asserting against and for simulating trouble."""

    def __init__(self, initial: Mapping[str, str] | None = None) -> None:
        self._files = {normalize(k): v for k, v in (initial or {}).items()}
        self._broken: str | None = None

    async def read(self, path: str) -> str | None:
        return self._files.get(_parts_joined(path))

    async def write(self, path: str, content: str) -> None:
        self._files[_parts_joined(path)] = content

    async def list(self, prefixes: Sequence[str]) -> list[str]:
        if self._broken is not None:
            raise OSError(self._broken)
        wanted = [_prefix(p) for p in prefixes or [""]]
        return sorted(
            path for path in self._files if any(p == "" or path.startswith(p + "/") for p in wanted)
        )

    def snapshot(self) -> dict[str, str]:
        """Every file and its content, now."""
        return dict(self._files)

    def remove(self, path: str) -> None:
        """Deletes a file (as a run would)."""
        self._files.pop(_parts_joined(path), None)

    def break_listing(self, reason: str = "the place cannot be read") -> None:
        """Makes `list` raise from now on (None reason: `mend_listing`)."""
        self._broken = reason

    def mend_listing(self) -> None:
        """Makes `list` work again."""
        self._broken = None


def _parts_joined(path: str) -> str:
    return "/".join(_parts(path))
