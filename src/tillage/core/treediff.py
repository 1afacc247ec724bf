"""Differences between two flat manifests (workspace path -> Entry), from the first to the second.

Directories are reported when added, deleted or re-typed; a directory's own content change is
reported through its children. A change of mtime alone is not a change anyone needs to read, but
rewind still restores it (see rewind_plan).
"""

from __future__ import annotations

from collections.abc import Mapping

from tillage.core.models import Change, ChangeKind, Entry, EntryFlag, EntryKind

Manifest = Mapping[str, Entry]


def _size(entry: Entry | None) -> int | None:
    if entry is None or entry.kind is EntryKind.DIR:
        return None
    return entry.size


def same_content(a: Entry, b: Entry) -> bool:
    """Tells whether two entries of the same kind hold the same bytes (or link target)."""
    return a.content_kind == b.content_kind and a.content == b.content


def same_link(a: Entry, b: Entry) -> bool:
    """Tells whether two entries are the same kind of name: both plain, or both hard links to
    the same first name. Two separate files and two names of one inode are different folders."""
    return bool(a.flags & EntryFlag.HARDLINK) == bool(b.flags & EntryFlag.HARDLINK) and (
        a.link == b.link
    )


def diff_entry(path: str, old: Entry | None, new: Entry | None) -> Change | None:
    """Returns how one path changed, or None when it did not in any reported way."""
    if old is None and new is None:
        return None
    if old is None:
        return Change(path, ChangeKind.ADDED, None, _size(new))
    if new is None:
        return Change(path, ChangeKind.DELETED, _size(old), None)
    if old.kind != new.kind:
        return Change(path, ChangeKind.TYPE_CHANGED, _size(old), _size(new))
    if old.kind is not EntryKind.DIR and not (same_content(old, new) and same_link(old, new)):
        return Change(path, ChangeKind.MODIFIED, _size(old), _size(new))
    if old.mode != new.mode:
        return Change(path, ChangeKind.MODE_CHANGED, _size(old), _size(new))
    return None


def diff_manifests(old: Manifest, new: Manifest) -> list[Change]:
    """Returns every reported change from `old` to `new`, sorted by path."""
    changes = []
    for path in sorted(old.keys() | new.keys()):
        change = diff_entry(path, old.get(path), new.get(path))
        if change is not None:
            changes.append(change)
    return changes
