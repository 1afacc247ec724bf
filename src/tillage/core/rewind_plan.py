"""Planning a rewind: the pure half. Takes the live manifest and the target's, returns actions.

The plan is a value so `--dry-run` can print it and the apply step can execute exactly it.
Order matters for safety: deletions deepest first, directories shallowest first, then files, then
hard links (their first name is in place by then), then directory metadata deepest first
(writing a file changes its parent's mtime).

A hard-link entry (format.md, flag 2) names the first name of its inode. It is put back as a
link only when that first name is a valid workspace path, inside the rewind's scope, and a plain
file of the same content in the target; otherwise it is written as a plain file and listed in
`unlinked`, so the result can say so.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from tillage.core.errors import PathNotInSnapshotError
from tillage.core.models import Change, Entry, EntryFlag, EntryKind
from tillage.core.paths import ancestors, covers, fs_decode, parse
from tillage.core.treediff import Manifest, diff_entry, same_content, same_link
from tillage.errors import InvalidArgumentError


class Op(enum.StrEnum):
    DELETE = "delete"
    MAKE_DIR = "make_dir"
    WRITE = "write"
    SET_META = "set_meta"


@dataclass(frozen=True, slots=True)
class Action:
    op: Op
    path: str
    entry: Entry | None


@dataclass(frozen=True)
class RewindActions:
    changes: tuple[Change, ...]
    actions: tuple[Action, ...]
    # Hard links in the target that come back as plain files: their first name is outside the
    # rewind's scope (or not a usable first name), so there is nothing in scope to link to.
    unlinked: tuple[str, ...] = ()


def minimal_scopes(scopes: Sequence[str]) -> list[str]:
    """Drops scopes that lie below another scope ('a/b' when 'a' is given), and duplicates."""
    kept: list[str] = []
    for scope in sorted(set(scopes)):
        if not any(covers(k, scope) for k in kept):
            kept.append(scope)
    return kept


def _in_scope(path: str, scopes: Sequence[str] | None) -> bool:
    return scopes is None or any(covers(s, path) for s in scopes)


def _meta_differs(live: Entry, want: Entry) -> bool:
    return live.mode != want.mode or live.mtime_ns != want.mtime_ns or live.xattrs != want.xattrs


def link_source(path: str, want: Entry, target: Manifest) -> str | None:
    """Returns the workspace path a hard-link entry may be linked to, or None when its `link`
    is not a usable first name: not a workspace path (never anything outside the root), not in
    the target, or not a plain file holding the same bytes."""
    if not want.flags & EntryFlag.HARDLINK or not want.link:
        return None
    try:
        source = parse(fs_decode(want.link))
    except InvalidArgumentError:
        return None
    first = target.get(source)
    if (
        source == path
        or first is None
        or first.kind is not EntryKind.FILE
        or first.flags & EntryFlag.HARDLINK
        or not same_content(first, want)
    ):
        return None
    return source


def _as_plain(entry: Entry) -> Entry:
    return replace(entry, flags=entry.flags & ~EntryFlag.HARDLINK, link=b"")


def plan_actions(
    current: Manifest, target: Manifest, scopes: Sequence[str] | None = None
) -> RewindActions:
    """Returns what to do to turn the `current` folder into `target`, within `scopes`.

    Raises PathNotInSnapshotError for a scope that names nothing in the target.
    """
    if scopes is not None:
        for scope in scopes:
            if scope not in target and not any(covers(scope, p) for p in target):
                raise PathNotInSnapshotError(f"{scope!r} is not in the snapshot")
        scopes = minimal_scopes(scopes)
    paths = sorted(p for p in current.keys() | target.keys() if _in_scope(p, scopes))
    changes: list[Change] = []
    deletes: list[str] = []
    dirs: list[Action] = []
    writes: list[Action] = []
    links: list[Action] = []
    metas: list[Action] = []
    unlinked: list[str] = []
    for path in paths:
        live, want = current.get(path), target.get(path)
        change = diff_entry(path, live, want)
        if change is not None:
            changes.append(change)
        if want is None:
            deletes.append(path)
            continue
        if want.kind is EntryKind.SPECIAL:
            continue  # declared partial at capture; nothing to put back
        if live is not None and live.kind != want.kind:
            deletes.append(path)
            live = None
        if want.flags & EntryFlag.HARDLINK:
            source = link_source(path, want, target)
            if source is None or not _in_scope(source, scopes):
                unlinked.append(path)
                want = _as_plain(want)
        if want.kind is EntryKind.DIR:
            if live is None:
                dirs.append(Action(Op.MAKE_DIR, path, want))
            metas.append(Action(Op.SET_META, path, want))
        elif (
            live is None
            or not same_content(live, want)
            or live.flags != want.flags
            or not same_link(live, want)
        ):
            (links if want.flags & EntryFlag.HARDLINK else writes).append(
                Action(Op.WRITE, path, want)
            )
        elif _meta_differs(live, want):
            metas.append(Action(Op.SET_META, path, want))
    # A name linked to a first name that is written again must be linked again: the write
    # gives the first name a new inode.
    rewritten = {a.path for a in writes}
    linked = {a.path for a in links}
    for path in paths:
        want = target.get(path)
        if (
            want is not None
            and path not in linked
            and path not in unlinked
            and want.flags & EntryFlag.HARDLINK
            and link_source(path, want, target) in rewritten
        ):
            links.append(Action(Op.WRITE, path, want))
            metas[:] = [m for m in metas if m.path != path]
    if scopes is not None:
        # A scoped rewind may need the scope's parent folders back first.
        needed = {a for s in scopes for a in ancestors(s)}
        for path in sorted(needed):
            live, want = current.get(path), target.get(path)
            if (
                want is not None
                and want.kind is EntryKind.DIR
                and (live is None or live.kind is not EntryKind.DIR)
            ):
                if live is not None:
                    deletes.append(path)
                dirs.append(Action(Op.MAKE_DIR, path, want))
                metas.append(Action(Op.SET_META, path, want))
    actions = [Action(Op.DELETE, p, current.get(p)) for p in sorted(deletes, reverse=True)]
    actions += sorted(dirs, key=lambda a: a.path)
    actions += writes
    actions += links
    file_metas = [a for a in metas if a.entry is not None and a.entry.kind is not EntryKind.DIR]
    dir_metas = [a for a in metas if a.entry is not None and a.entry.kind is EntryKind.DIR]
    actions += file_metas
    actions += sorted(dir_metas, key=lambda a: a.path.count("/"), reverse=True)
    return RewindActions(changes=tuple(changes), actions=tuple(actions), unlinked=tuple(unlinked))


# -- batching a plan for the writer threads -------------------------------------------------


def by_folders(actions: list[Action], folders: int) -> Iterator[list[Action]]:
    """Splits actions (in plan order) into runs that touch at most `folders` parent folders."""
    chunk: list[Action] = []
    seen: set[str] = set()
    for action in actions:
        parent = action.path.rpartition("/")[0]
        if parent not in seen and len(seen) >= folders:
            yield chunk
            chunk, seen = [], set()
        seen.add(parent)
        chunk.append(action)
    if chunk:
        yield chunk


# Files handed to a thread at a time, or fewer when they add up to GROUP_BYTES.
GROUP_FILES = 16
GROUP_BYTES = 4 << 20
_Item = TypeVar("_Item")


def grouped(items: list[_Item], weight: Callable[[_Item], int]) -> list[list[_Item]]:
    """`items` in order, in groups of at most GROUP_FILES items or about GROUP_BYTES of
    `weight`: a thread's share of work, so hand-offs cost less than the work handed off."""
    groups: list[list[_Item]] = [[]]
    total = 0
    for item in items:
        if len(groups[-1]) >= GROUP_FILES or total >= GROUP_BYTES:
            groups.append([])
            total = 0
        groups[-1].append(item)
        total += weight(item)
    return [group for group in groups if group]


def parted(
    items: list[_Item], weight: Callable[[_Item], int], bound: int
) -> tuple[list[_Item], list[_Item]]:
    """`items` in order, split into those of at least `bound` of `weight` and the rest."""
    large: list[_Item] = []
    small: list[_Item] = []
    for item in items:
        (large if weight(item) >= bound else small).append(item)
    return large, small


def parallel_write(action: Action) -> bool:
    """Whether an action is a file or symlink write that may run in a worker thread (hard
    links wait for every plain file: their first name must be in place)."""
    return (
        action.op is Op.WRITE
        and action.entry is not None
        and not action.entry.flags & EntryFlag.HARDLINK
    )


def batch_kind(action: Action) -> str:
    if action.op is Op.MAKE_DIR:
        return "dirs"
    return "files" if parallel_write(action) else ""


def action_size(action: Action) -> int:
    entry = action.entry
    return entry.size if entry is not None and entry.kind is EntryKind.FILE else 0


def space_needed(actions: Sequence[Action], data: dict[str, int], block: int) -> tuple[int, int]:
    """The bytes and inodes the files and folders the actions make take on a disk of `block`
    bytes a block, given the bytes of data each file holds (holes not counted)."""
    need_bytes = need_inodes = 0
    for action in actions:
        if action.op not in (Op.WRITE, Op.MAKE_DIR):
            continue
        need_inodes += 1
        written = data.get(action.path, 0)
        need_bytes += -(-written // block) * block
        if action.op is Op.MAKE_DIR:
            need_bytes += block
    return need_bytes, need_inodes


class Tally:
    """Counts files and bytes done in one stage and reports them to a progress sink."""

    def __init__(
        self,
        stage: str,
        files_total: int,
        bytes_total: int,
        report: Callable[[str, int, int, int, int], None],
    ) -> None:
        self.stage = stage
        self.files_total = files_total
        self.bytes_total = bytes_total
        self.files = 0
        self.bytes = 0
        self._report = report
        report(stage, 0, files_total, 0, bytes_total)

    def add(self, actions: list[Action]) -> None:
        if not actions:
            return
        self.files += len(actions)
        self.bytes += sum(action_size(a) for a in actions)
        self._report(self.stage, self.files, self.files_total, self.bytes, self.bytes_total)
