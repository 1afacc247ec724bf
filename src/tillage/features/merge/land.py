"""Landing a planned merge in the workspace folder, crash-safe like a rewind (INV-7, INV-13).

The merged result is first written to the store as a tree (the workspace's `pre_merge` tree
with the landing paths replaced), so an intent can name it. Under the workspace lock, the paths
to land are checked against the `pre_merge` seal (one that changed since is refused, never
clobbered); then the engine's journal stages every object, writes the intent, replaces each path
atomically (a temporary sibling renamed over it) and syncs once. The `merge` seal and the
merge's fact or event (the intent's completion) are made before the intent is removed, so a
merge killed at any step is rolled forward by the next command (the journal's `finish`, from
the intent alone), and touches nothing but its own paths.
"""

from __future__ import annotations

import os
import stat
from collections import defaultdict
from collections.abc import Generator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.core.ids import tree_id
from tillage.core.models import ContentKind, Entry, EntryFlag, EntryKind
from tillage.core.nesting import run_nested
from tillage.core.paths import ancestors, fs_decode, join
from tillage.core.progress import ProgressFn
from tillage.core.rewind_plan import plan_actions
from tillage.errors import TillageError
from tillage.platform import clock
from tillage.store.rows import SnapshotRow
from tillage.store.store import ObjectWriter, Store
from tillage.workspace.attach import Workspace
from tillage.workspace.content import sqlite_image_id
from tillage.workspace.journal import landing as journal

Land = Mapping[str, Entry | None]

# A subfolder whose new tree rewrite_tree's build asks for: its path and its old tree.
_Folder = tuple[str, bytes | None]


@dataclass(frozen=True)
class Tell:
    """What a landed merge tells the log once its seal exists: a fork merge publishes its
    `fork_merged` fact (kind "fact"), a stored snapshot's merge appends a `merged` event."""

    how: str  # "fact" or "event"
    body: dict[str, Any]
    # The record's kind, when not the merge's own (`merge --into-fork` moves the fork's base
    # with a `fork_base` fact).
    record: str = ""

    @property
    def kind(self) -> str:
        if self.record:
            return self.record
        return "fork_merged" if self.how == "fact" else "merged"


def rewrite_tree(store: Store, writer: ObjectWriter, root: bytes, land: Land) -> bytes:
    """Writes the tree `root` with the paths of `land` replaced (None: removed) and returns
    the new root's ID; only the folders on the way to a landed path are read and rewritten."""
    below: dict[str, dict[str, Entry | None]] = defaultdict(dict)
    touched: set[str] = {""}
    for path, entry in land.items():
        parent, _, name = path.rpartition("/")
        below[parent][name] = entry
        if parent:
            touched.update((*ancestors(parent), parent))

    # A folder's new tree, asking for each touched subfolder's by yielding it: run on an
    # explicit stack (core/nesting.py), so a landed path ~2,000 folders deep is fine.
    def build(folder: str, tid: bytes | None) -> Generator[_Folder, bytes | None, bytes]:
        entries: dict[str, Entry] = {}
        if tid is not None:
            entries = {fs_decode(e.name): e for e in codec.decode_tree(store.read(tid))}
        for name, entry in below.get(folder, {}).items():
            old = entries.get(name)
            if entry is None:
                entries.pop(name, None)
            elif entry.kind is EntryKind.DIR and old is not None and old.kind is EntryKind.DIR:
                # A folder's own entry lands its metadata; what is in it is the folder's own
                # (the landed paths below it are applied to it next).
                entries[name] = replace(entry, content_kind=old.content_kind, content=old.content)
            else:
                entries[name] = entry
        for name, entry in list(entries.items()):
            child = join(folder, name)
            if entry.kind is EntryKind.DIR and child in touched:
                inner = entry.content if entry.content_kind is ContentKind.TREE else None
                built = yield (child, inner)
                assert built is not None  # the subfolder's new tree
                entries[name] = replace(entry, content_kind=ContentKind.TREE, content=built)
        encoded = codec.encode_tree(list(entries.values()))
        new = tree_id(encoded)
        writer.put(Kind.TREE, new, encoded)
        return new

    return run_nested(build("", root), lambda down: build(*down))


def manifests_for(
    current: Mapping[str, Entry], land: Land
) -> tuple[dict[str, Entry], dict[str, Entry]]:
    """The two manifests rewind's planner needs to land `land` over `current`: the landed
    paths and the folders above them, as they are and as they will be (folders above a landed
    path are kept as they are; only a missing one is made)."""
    keys = journal.with_folders(set(land))
    now = {k: current[k] for k in keys if k in current}
    want = dict(now)
    for path, entry in land.items():
        if entry is None:
            want.pop(path, None)
        else:
            want[path] = entry
    return now, want


def drifted(root: Path, land: Land, ours: Mapping[str, Entry], tmp_dir: Path) -> list[str]:
    """The landed paths that changed in the folder since `ours` was sealed (a file's size or
    mtime, a link's target, a kind; a folder to delete that gained or lost a name; a SQLite
    database whose consistent image is not the one sealed, imaged again in `tmp_dir`)."""
    children: dict[str, set[str]] = defaultdict(set)
    for path in ours:
        parent, _, name = path.rpartition("/")
        children[parent].add(name)
    found: list[str] = []
    for path in sorted(land):
        entry = ours.get(path)
        if not _as_sealed(root, path, entry, children, tmp_dir, delete=land[path] is None):
            found.append(path)
    return found


def _as_sealed(
    root: Path,
    path: str,
    entry: Entry | None,
    children: Mapping[str, set[str]],
    tmp_dir: Path,
    *,
    delete: bool,
) -> bool:
    where = os.path.join(root, path)
    try:
        st = os.lstat(where)
    except FileNotFoundError:
        return entry is None
    except NotADirectoryError:
        return entry is None
    if entry is None:
        return False
    if entry.kind is EntryKind.FILE and entry.flags & EntryFlag.SQLITE_IMAGE:
        # Sealed as a consistent image (database and journal together), whose size and mtime
        # are not the file's: image it again and compare (a row written during a merge's check
        # must refuse the landing like any edit, never be overwritten unsealed).
        if not stat.S_ISREG(st.st_mode):
            return False
        return sqlite_image_id(Path(where), tmp_dir) == (entry.content, entry.size)
    if entry.kind is EntryKind.FILE:
        return (
            stat.S_ISREG(st.st_mode)
            and st.st_size == entry.size
            and st.st_mtime_ns == entry.mtime_ns
        )
    if entry.kind is EntryKind.SYMLINK:
        return stat.S_ISLNK(st.st_mode) and os.readlink(os.fsencode(where)) == entry.content
    if entry.kind is EntryKind.DIR:
        if not stat.S_ISDIR(st.st_mode):
            return False
        if delete:
            return set(os.listdir(where)) == children.get(path, set())
        return True
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode))


def land(
    ws: Workspace,
    pre: SnapshotRow,
    ours: Mapping[str, Entry],
    land_paths: Land,
    tree: str,
    *,
    label: str,
    merged_from: str | None,
    tell: Tell | None,
    on_progress: ProgressFn | None = None,
) -> SnapshotRow:
    """Lands `land_paths` (the merged result, whose whole tree is `tree`) over the workspace
    sealed as `pre` (`ours`: its entries along those paths), and seals it as trigger `merge`.
    The caller holds the workspace lock and has checked that nothing drifted. The intent says
    everything the journal needs to finish it after a crash: the result tree, the exact
    paths, the seal to end with and the record that tells the log."""
    now, want = manifests_for(ours, land_paths)
    intent: dict[str, Any] = {
        "op": "merge",
        "workspace": ws.id,
        "target": pre.id,  # the state before the merge
        "undo": pre.id,
        "tree": tree,
        "paths": sorted(land_paths),
        "label": label,
        "merged_from": merged_from,
        "seal": {"trigger": "merge", "label": label, "merged_from": merged_from},
        "tell": None if tell is None else {"how": tell.how, "kind": tell.kind, "body": tell.body},
        "started_ns": clock.now_ns(),
        "pid": os.getpid(),
    }
    try:
        landed = journal.land(
            ws, now, plan_actions(now, want).actions, intent, on_progress=on_progress
        )
    except (OSError, TillageError) as exc:
        err = journal.stopped("merge", exc, pre.id)  # staging and the seal too: merge.stopped
        if err is exc:
            raise
        raise err from exc
    assert landed.completed is not None  # the intent asks for a seal
    return landed.completed
