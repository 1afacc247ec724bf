"""A folder the watcher told by name: which of the entries the last seal stored are unchanged,
without listing the folder or looking up its unchanged subfolders (capture.py's delta walk).

With an index a seal stored whole, every subfolder in a stored tree has its record, kept in
the subfolder's own shard (shards.py): the unchanged ones are not looked up (a wide
node_modules/ would read 2,000 shards), and what they hold is the folder's recorded total less
what its other entries held.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tillage.core.models import Entry, EntryFlag, EntryKind
from tillage.core.paths import fs_decode, join
from tillage.workspace.pathindex import PathIndex
from tillage.workspace.sqlite_image import sidecar_base

_IMAGE_OR_LINK = EntryFlag.SQLITE_IMAGE | EntryFlag.HARDLINK


@dataclass(frozen=True)
class Unchanged:
    """Of a folder told by name: its unchanged entries, the names to look at again, and what
    the unchanged subfolders hold (files, bytes; None: each is counted from its record)."""

    kept: list[tuple[str, Entry]]
    check: set[str]
    subfolders_hold: tuple[int, int] | None


def unchanged_entries(
    prior: PathIndex, rel: str, stored: Iterable[Entry], check: set[str]
) -> Unchanged | None:
    """The entries of folder `rel`'s `stored` tree that are unchanged, all but those named in
    `check`; None when the folder must be listed whole (a SQLite database or sidecar in it, a
    hard link, or an entry whose record is not in the `prior` index)."""
    known = prior.folders.get(rel)
    trusted = prior.exact and prior.generation > 0 and known is not None
    files, size = known[:2] if trusted and known is not None else (0, 0)
    kept: list[tuple[str, Entry]] = []
    for entry in stored:
        name = fs_decode(entry.name)
        path, told_of = join(rel, name), name in check
        if entry.kind is EntryKind.DIR and (told_of == trusted):
            folder = prior.folders.get(path)  # a told one: what it held goes
            if folder is None or prior.dirs.get(path) is None:
                return None
            files, size = files - folder[0], size - folder[1]
        elif entry.kind is EntryKind.FILE and (trusted or not told_of):
            row = prior.files.get(path)
            if row is None or (not told_of and row[8] != entry.content):
                return None
            files, size = files - 1, size - row[10]
        elif entry.kind is EntryKind.SYMLINK:
            files -= 1
        if told_of:
            continue
        if entry.flags and entry.flags & _IMAGE_OR_LINK:  # most entries have no flags
            return None
        if sidecar_base(name) is not None:
            return None
        kept.append((name, entry))
    if trusted and (files < 0 or size < 0):
        return None  # the record does not add up: look at every entry again
    return Unchanged(kept, check, (files, size) if trusted else None)
