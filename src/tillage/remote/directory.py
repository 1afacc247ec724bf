"""DirectoryRemote: a remote in a folder (a USB disk, a mounted share, the far side of SSH).

Each name is a file at the same relative path below the root, so objects are fanned out by
their names' folders (`objects/ab/ab…`). A put writes a temporary sibling, fsyncs it, renames
it over the name and fsyncs the folder (platform.fs.atomic_write, INV-1): a crash leaves the
old bytes or the new ones, and at worst a dot-named temporary that is never a name. write_if
reads, compares and renames under an flock of the name's own dot-named lock file, so two
processes (or threads, or machines on a share with working locks) racing on one ref cannot both
win. Version tokens are the content's BLAKE3. Files are made 0600 and folders 0700: the sizes and
times of what a remote holds are its owner's alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from tillage.platform.errors import DiskFullError
from tillage.platform.fs import atomic_write, fsync_dir
from tillage.platform.locks import file_lock
from tillage.remote.base import Versioned, content_token
from tillage.remote.errors import RemoteMissingError, RemoteUnavailableError
from tillage.remote.names import check_name, check_prefix, is_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["DirectoryRemote"]

# How long write_if waits for another writer's lock: the critical section is one small
# read-compare-rename, so a wait this long means a stuck process or a share without locks.
LOCK_WAIT = 30.0
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EISDIR)
# What it holds is sealed, but its sizes and dates are the owner's business alone.
FILE_MODE = 0o600
FOLDER_MODE = 0o700


class DirectoryRemote:
    """A remote whose names are files below `root`. The folder is created (with its parents)
    by the first write; reading a folder that does not exist finds nothing."""

    def __init__(self, root: Path | str, *, url: str | None = None) -> None:
        self.root = Path(root)
        self.url = url if url is not None else str(self.root)
        self._check_root()

    def _check_root(self) -> None:
        try:
            st = os.stat(self.root)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._unavailable("cannot look at it", exc) from exc
        if not stat.S_ISDIR(st.st_mode):
            raise RemoteUnavailableError(
                f"the remote {self.url} is not a folder",
                next_step="give the path of a folder (or of one to create) as the remote",
            )
        if not os.access(self.root, os.R_OK | os.X_OK):
            raise RemoteUnavailableError(
                f"the remote {self.url} cannot be read (permission denied)",
                next_step="check the folder's owner and permissions, then retry",
            )

    def _unavailable(self, doing: str, exc: OSError) -> RemoteUnavailableError:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            reason = "no space left on its disk"
        return RemoteUnavailableError(
            f"the remote {self.url}: {doing}: {reason}",
            details={"remote": self.url, "errno": exc.errno},
        )

    def _path(self, name: str) -> Path:
        return self.root / check_name(name)

    def exists(self, names: Sequence[str]) -> set[str]:
        """Returns which of `names` are files below the root (one stat each)."""
        for name in names:
            check_name(name)
        present: set[str] = set()
        for name in names:
            try:
                st = os.stat(self.root / name)
            except OSError as exc:
                if exc.errno in _ABSENT:
                    continue
                raise self._unavailable(f"cannot look at {name}", exc) from exc
            if stat.S_ISREG(st.st_mode):
                present.add(name)
        return present

    def put(self, name: str, data: bytes) -> None:
        """Writes `name` atomically and durably (temporary sibling, fsync, rename, fsync)."""
        path = self._path(name)
        try:
            self._make_parents(path)
            atomic_write(path, data, mode=FILE_MODE)
        except DiskFullError as exc:
            raise RemoteUnavailableError(
                f"the remote {self.url}: cannot write {name}: no space left on its disk",
                next_step="free space on the remote's disk, then retry; nothing was lost",
                details={"remote": self.url},
            ) from exc
        except OSError as exc:
            raise self._unavailable(f"cannot write {name}", exc) from exc

    def get(self, name: str) -> bytes:
        """Returns the file's bytes; RemoteMissingError when there is no such file."""
        data = self._read(self._path(name), name)
        if data is None:
            raise RemoteMissingError(name, self.url)
        return data

    def get_range(self, name: str, offset: int, length: int) -> bytes:
        """Reads the range from the file (see `Remote.get_range`): one seek and read."""
        path = self._path(name)
        if length < 0:
            raise ValueError(f"a range of {length} bytes")
        try:
            with open(path, "rb") as f:
                if offset < 0:
                    size = os.fstat(f.fileno()).st_size
                    offset = max(0, size + offset)
                f.seek(offset)
                return f.read(length)
        except OSError as exc:
            if exc.errno in _ABSENT:
                raise RemoteMissingError(name, self.url) from None
            raise self._unavailable(f"cannot read {name}", exc) from exc

    def _read(self, path: Path, name: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as exc:
            if exc.errno in _ABSENT:
                return None
            raise self._unavailable(f"cannot read {name}", exc) from exc

    def list(self, prefix: str) -> list[str]:
        """Walks the folder that holds `prefix` (only it): every file whose name starts with
        `prefix`, sorted; dot-named files (temporaries, locks) are never names."""
        check_prefix(prefix)
        folder, _slash, partial = prefix.rpartition("/")
        start = self.root / folder if folder else self.root
        base = f"{folder}/" if folder else ""
        found: list[str] = []
        try:
            for name in self._walk(start, base, partial):
                if name.startswith(prefix) and is_name(name):
                    found.append(name)
        except OSError as exc:
            raise self._unavailable(f"cannot list {prefix or 'its names'}", exc) from exc
        found.sort()
        return found

    def _walk(self, start: Path, base: str, partial: str) -> Iterator[str]:
        try:
            top = os.scandir(start)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return
            raise
        pending: list[tuple[Path, str]] = []
        with top:
            for entry in top:
                if entry.name.startswith(".") or not entry.name.startswith(partial):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append((Path(entry.path), f"{base}{entry.name}/"))
                elif entry.is_file():
                    yield base + entry.name
        while pending:
            folder, rel = pending.pop()
            try:
                entries = os.scandir(folder)
            except FileNotFoundError:
                continue  # removed while we walked
            with entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((Path(entry.path), f"{rel}{entry.name}/"))
                    elif entry.is_file():
                        yield rel + entry.name

    def delete(self, name: str) -> None:
        """Removes the file durably; an absent one is fine. Folders stay (a concurrent put
        may be about to use them)."""
        path = self._path(name)
        try:
            os.unlink(path)
        except OSError as exc:
            if exc.errno in (*_ABSENT, errno.EPERM) and not path.is_file():
                return  # absent, or a folder (never a name)
            raise self._unavailable(f"cannot delete {name}", exc) from exc
        try:
            fsync_dir(path.parent)
        except OSError as exc:
            raise self._unavailable(f"cannot delete {name}", exc) from exc

    def read_versioned(self, name: str) -> Versioned | None:
        """Returns the file's bytes with their BLAKE3 as the token; None when absent."""
        data = self._read(self._path(name), name)
        return None if data is None else Versioned(data, content_token(data))

    def write_if(self, name: str, data: bytes, expect: str | None) -> bool:
        """Compare-and-swap under an flock of `.<name>.lock` beside the name."""
        path = self._path(name)
        try:
            self._make_parents(path)
            lock = path.with_name(f".{path.name}.lock")
            what = f"{name} on the remote {self.url}"
            with file_lock(lock, timeout=LOCK_WAIT, what=what, mode=FILE_MODE):
                current = self._read(path, name)
                if expect is None:
                    if current is not None:
                        return False
                elif current is None or content_token(current) != expect:
                    return False
                atomic_write(path, data, mode=FILE_MODE)
                return True
        except DiskFullError as exc:
            raise RemoteUnavailableError(
                f"the remote {self.url}: cannot write {name}: no space left on its disk",
                next_step="free space on the remote's disk, then retry; nothing was lost",
                details={"remote": self.url},
            ) from exc
        except OSError as exc:
            raise self._unavailable(f"cannot write {name}", exc) from exc

    def _make_parents(self, path: Path) -> None:
        """Creates the folders above `path` that are missing, each made durable in its parent
        (a fan-out folder lost in a crash would lose every object renamed into it)."""
        parent = path.parent
        missing: list[Path] = []
        while not parent.is_dir():
            missing.append(parent)
            if parent.parent == parent:
                break
            parent = parent.parent
        for folder in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, FOLDER_MODE)
            fsync_dir(folder.parent)

    def close(self) -> None:
        """Nothing to release."""
