"""The two sides a reading verb compares or lists (a stored snapshot, or `@`: the folder as it
is now), and the text of `till diff -p` and `--stat`: each changed file's two versions read (a
snapshot's from the store, the live folder's from disk) and diffed line by line."""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from dataclasses import dataclass

from tillage.errors import InvalidArgumentError, TillageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

    from tillage.core.models import Change, Entry
    from tillage.store.rows import SnapshotRow
    from tillage.store.store import Store

# A version larger than this gets no line diff (it is counted as changed, and `note` says why).
TEXT_MAX = 4 << 20


@dataclass(frozen=True)
class FileStatInfo:
    """One changed file's lines added and removed (`binary`, or a `note` such as "larger than
    4 MiB": no line counts, both null)."""

    path: str
    insertions: int | None
    deletions: int | None
    binary: bool
    note: str | None


@dataclass(frozen=True)
class DiffStatInfo:
    """`diff --stat`'s document: per changed file, then git's summary line in numbers."""

    files: tuple[FileStatInfo, ...]
    files_changed: int
    insertions: int
    deletions: int


@dataclass(frozen=True)
class PatchInfo:
    """One changed file's unified diff (`text`, git's format from `--- a/PATH` on), or null
    with `note` saying why (binary, too large, its bytes gone)."""

    path: str
    kind: str
    binary: bool
    text: str | None
    note: str | None


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a stored snapshot (`row`) or the live folder (`row` None,
    `root` its folder), as a manifest (within `scopes` when they were given)."""

    row: SnapshotRow | None
    manifest: dict[str, Entry]
    root: Path | None


def side(ws: Any, ref: str, scopes: Sequence[str] | None = None) -> Side:
    """The side `ref` names: `@` is the folder as it is now (walked, nothing stored); any other
    name or ID is a stored snapshot (workspace/timeline.py resolves it)."""
    from tillage.workspace.timeline import is_live, resolve
    from tillage.workspace.trees import flatten

    if is_live(ref):
        from tillage.workspace.seal import scan_live

        return Side(None, scan_live(ws, scopes=scopes).manifest or {}, ws.root)
    row = resolve(ws, ref)
    return Side(row, flatten(ws.store, bytes.fromhex(row.tree), scopes), None)


class _NoTextError(Exception):
    """A version with no line diff: the reason is the message."""


def open_live(root: Path, path: str) -> int:
    """A descriptor of the name at workspace path `path` below `root`, opened without following
    a symlink anywhere on the way (a symlink is ELOOP; a folder on the way that is not one,
    ENOTDIR). OSError when it is gone or unreadable; the caller closes it."""
    from tillage.platform.fs import open_subdir_nofollow

    *folders, name = path.split("/")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for folder in folders:
            try:
                down = open_subdir_nofollow(fd, folder, create=False)
            except InvalidArgumentError as exc:
                raise OSError(errno.ENOTDIR, f"{folder} is not a folder") from exc
            os.close(fd)
            fd = down
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        return os.open(name, flags, dir_fd=fd)
    finally:
        os.close(fd)


def read_live(root: Path, path: str, limit: int) -> bytes:
    """The live file at `path` (open_live), whole; _NoTextError when it is larger than `limit`."""
    with os.fdopen(open_live(root, path), "rb") as f:
        if not stat_mod.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(errno.EINVAL, f"{path} is no longer a file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise _NoTextError(f"larger than {limit >> 20} MiB: no line diff")
    return data


def _version(store: Store, where: Side, path: str) -> bytes | None:
    """The bytes of `path` on one side: None when it is not a file there (absent, a folder or
    a symlink: an empty side of the diff); _NoTextError when it has no line diff."""
    from tillage.core.models import EntryKind
    from tillage.workspace.trees import read_file_bytes

    entry = where.manifest.get(path)
    if entry is None or entry.kind is not EntryKind.FILE:
        return None
    if entry.size > TEXT_MAX:
        raise _NoTextError(f"larger than {TEXT_MAX >> 20} MiB: no line diff")
    try:
        if where.root is not None:
            return read_live(where.root, path, TEXT_MAX)
        return read_file_bytes(store, entry)
    except OSError as exc:
        raise _NoTextError(f"could not be read: {exc.strerror or exc}") from exc
    except TillageError as exc:  # bytes a gc dropped, or damage `till verify` names
        raise _NoTextError(f"its stored bytes could not be read: {exc.message}") from exc


def line_changes(
    store: Store, changes: Sequence[Change], old: Side, new: Side, *, patch: bool
) -> tuple[DiffStatInfo, tuple[PatchInfo, ...] | None]:
    """The --stat document for `changes` (from `old` to `new`) and, with `patch`, each file's
    unified diff. Only files are diffed (a folder or symlink side is empty); a change of mode
    alone has no lines to show."""
    from tillage.core.textdiff import is_binary, line_diff

    stats: list[FileStatInfo] = []
    patches: list[PatchInfo] = []
    for change in changes:
        kind = str(change.kind)
        if kind == "mode_changed":
            continue
        try:
            before = _version(store, old, change.path)
            after = _version(store, new, change.path)
        except _NoTextError as exc:
            stats.append(FileStatInfo(change.path, None, None, False, str(exc)))
            patches.append(PatchInfo(change.path, kind, False, None, str(exc)))
            continue
        if before is None and after is None:
            continue  # folders and symlinks: the change list tells them
        if is_binary(before or b"") or is_binary(after or b""):
            stats.append(FileStatInfo(change.path, None, None, True, "binary"))
            patches.append(PatchInfo(change.path, kind, True, None, "binary files differ"))
            continue
        lines = line_diff(
            before or b"",
            after or b"",
            "/dev/null" if before is None else f"a/{change.path}",
            "/dev/null" if after is None else f"b/{change.path}",
        )
        stats.append(FileStatInfo(change.path, lines.insertions, lines.deletions, False, None))
        patches.append(PatchInfo(change.path, kind, False, lines.text, None))
    summary = DiffStatInfo(
        files=tuple(stats),
        files_changed=len(stats),
        insertions=sum(s.insertions or 0 for s in stats),
        deletions=sum(s.deletions or 0 for s in stats),
    )
    return summary, (tuple(patches) if patch else None)
