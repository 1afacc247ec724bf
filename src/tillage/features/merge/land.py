"""Landing a planned merge in the workspace folder, crash-safe like a rewind (INV-7, INV-13).

The merged result is first written to the store as a tree (the workspace's `pre_merge` tree
with the landing paths replaced), so an intent can name it. Under the workspace lock, the paths
to land are checked against the `pre_merge` seal (one that changed since is refused, never
clobbered); then rewind's own machinery stages every object, writes the intent, replaces each
path atomically (a temporary sibling renamed over it) and syncs once. The `merge` seal and the
merge's fact or event are made before the intent is removed, so a merge killed at any step is
rolled forward by the next command (finish_merge, reached through rewind's recovery), and
touches nothing but its own paths.
"""

from __future__ import annotations

import os
import stat
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.core.ids import tree_id
from tillage.core.models import ContentKind, Entry, EntryFlag, EntryKind
from tillage.core.paths import ancestors, fs_decode, join
from tillage.core.progress import ProgressFn
from tillage.errors import TillageError
from tillage.features.merge.errors import MergeStoppedError
from tillage.platform import clock, failpoints
from tillage.platform.folders import remove_temp_files
from tillage.store.store import ObjectWriter, SnapshotRow, Store
from tillage.workspace.attach import Workspace
from tillage.workspace.seal import SealOptions, seal_locked
from tillage.workspace.trees import flatten

Land = Mapping[str, Entry | None]


@dataclass(frozen=True)
class Tell:
    """What a landed merge tells the log once its seal exists: a fork merge publishes its
    `fork_merged` fact (kind "fact"), a stored snapshot's merge appends a `merged` event."""

    how: str  # "fact" or "event"
    body: dict[str, Any]


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

    def build(folder: str, tid: bytes | None) -> bytes:
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
                entries[name] = replace(
                    entry, content_kind=ContentKind.TREE, content=build(child, inner)
                )
        encoded = codec.encode_tree(list(entries.values()))
        new = tree_id(encoded)
        writer.put(Kind.TREE, new, encoded)
        return new

    return build("", root)


def _with_folders(paths: Iterable[str]) -> set[str]:
    keys: set[str] = set()
    for path in paths:
        keys.add(path)
        keys.update(ancestors(path))
    return keys


def manifests_for(
    current: Mapping[str, Entry], land: Land
) -> tuple[dict[str, Entry], dict[str, Entry]]:
    """The two manifests rewind's planner needs to land `land` over `current`: the landed
    paths and the folders above them, as they are and as they will be (folders above a landed
    path are kept as they are; only a missing one is made)."""
    keys = _with_folders(land)
    now = {k: current[k] for k in keys if k in current}
    want = dict(now)
    for path, entry in land.items():
        if entry is None:
            want.pop(path, None)
        else:
            want[path] = entry
    return now, want


def drifted(root: Path, land: Land, ours: Mapping[str, Entry]) -> list[str]:
    """The landed paths that changed in the folder since `ours` was sealed (a file's size or
    mtime, a link's target, a kind; a folder to delete that gained or lost a name)."""
    children: dict[str, set[str]] = defaultdict(set)
    for path in ours:
        parent, _, name = path.rpartition("/")
        children[parent].add(name)
    found: list[str] = []
    for path in sorted(land):
        if not _as_sealed(root, path, ours.get(path), children, delete=land[path] is None):
            found.append(path)
    return found


def _as_sealed(
    root: Path, path: str, entry: Entry | None, children: Mapping[str, set[str]], *, delete: bool
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
        # Sealed as a consistent image (database and journal together), whose size and
        # mtime are not the file's: as in a rewind's guard, the image sealed moments ago holds.
        return stat.S_ISREG(st.st_mode)
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
    The caller holds the workspace lock and has checked that nothing drifted."""
    from tillage.workspace.rewind import land_planned

    now, want = manifests_for(ours, land_paths)
    intent: dict[str, Any] = {
        "op": "merge",
        "workspace": ws.id,
        "target": pre.id,  # recovery looks it up: the state before the merge
        "undo": pre.id,
        "tree": tree,
        "paths": sorted(land_paths),
        "label": label,
        "merged_from": merged_from,
        "tell": None if tell is None else {"how": tell.how, "body": tell.body},
        "started_ns": clock.now_ns(),
        "pid": os.getpid(),
    }
    sealed: list[SnapshotRow] = []
    try:
        land_planned(
            ws,
            now,
            want,
            intent,
            on_progress=on_progress,
            before_done=lambda: sealed.append(_seal_and_tell(ws, intent)),
        )
    except (OSError, TillageError) as exc:
        raise _stopped(exc, pre.id) from exc
    return sealed[0]


def _seal_and_tell(ws: Workspace, intent: Mapping[str, Any]) -> SnapshotRow:
    """Seals the landed folder (trigger `merge`) and tells the log what merged."""
    row = seal_locked(
        ws,
        SealOptions(
            trigger="merge", label=str(intent["label"]), merged_from=intent.get("merged_from")
        ),
    )
    failpoints.hit("merge.after_seal")
    _tell(ws, intent, row)
    return row


def _told(ws: Workspace, row: SnapshotRow) -> bool:
    """Whether the fact or event telling merge `row` reached the log after its seal (a merge
    killed between the two is told by the next command)."""
    from tillage.store.events import EVENT_RECORD, LogFollower

    for record in LogFollower(ws.store.log, row.seq).records():
        body = record.body
        if record.kind == "fork_merged" and body.get("result") == row.id:
            return True
        detail = body.get("detail")
        if (
            record.kind == EVENT_RECORD
            and body.get("kind") == "merged"
            and isinstance(detail, dict)
            and detail.get("result") == row.id
        ):
            return True
    return False


def _tell(ws: Workspace, intent: Mapping[str, Any], row: SnapshotRow) -> None:
    tell = intent.get("tell")
    if isinstance(tell, dict):
        body = {**tell["body"], "result": row.id}
        if tell["how"] == "fact":
            ws.store.publish("fork_merged", body)
        else:
            from tillage.store.events import announce

            announce(ws.store, ws.id, "merged", body)


def _stopped(exc: OSError | TillageError, undo: str) -> TillageError:
    if isinstance(exc, TillageError) and exc.code == MergeStoppedError.code:
        return exc
    what = exc.message if isinstance(exc, TillageError) else f"{exc.strerror}: {exc.filename}"
    return MergeStoppedError(
        f"the merge stopped part-way: {what}",
        next_step=(
            "fix the cause and merge again; to put the folder back as it was before the "
            f"merge, run `till rewind {undo} --yes`"
        ),
        details={"undo": undo},
    )


def _sealed_already(ws: Workspace, intent: Mapping[str, Any]) -> SnapshotRow | None:
    """The interrupted merge's own `merge` snapshot, when it was published (it comes after the
    folder is landed and right before its fact or event)."""
    started = int(intent.get("started_ns") or 0)
    for row in ws.store.snapshots(ws.id, limit=RECENT):
        if row.sealed_at_ns < started:
            return None
        if row.trigger == "merge" and row.label == intent.get("label"):
            return row
    return None


# Snapshots looked through for an interrupted merge's own seal (a watcher may have sealed
# after it before the next command came).
RECENT = 50


def finish_merge(ws: Workspace, intent: Mapping[str, Any]) -> None:
    """Rolls an interrupted merge forward (the caller holds the workspace lock): the folder is
    sealed first (whatever was written into it after the crash is kept), then the merge's
    paths are made what its result tree says, and the merge is sealed and told."""
    paths = [str(p) for p in intent.get("paths") or []]
    undo = str(intent.get("undo", ""))
    remove_temp_files(ws.root)
    sealed = _sealed_already(ws, intent)
    if sealed is not None:
        # Killed after its seal: what it tells the log (the fork's base moving, the `merged`
        # event) is told now if it was not yet, and the intent goes.
        from tillage.workspace.recovery import intent_path

        if not _told(ws, sealed):
            _tell(ws, intent, sealed)
        intent_path(ws).unlink()
        return
    live: dict[str, Entry] = {}
    seal_locked(
        ws,
        SealOptions(trigger="pre_merge", label=f"before finishing a merge (undo {undo[:12]})"),
        manifest_out=live,
        manifest_scopes=paths,
    )
    result = flatten(ws.store, bytes.fromhex(str(intent["tree"])), paths)
    keys = _with_folders(paths)
    now = {k: live[k] for k in keys if k in live}
    want: dict[str, Entry] = {}
    wanted = set(paths)
    for key in keys:
        kept = now.get(key)
        if key not in wanted and kept is not None and kept.kind is EntryKind.DIR:
            want[key] = kept  # a folder on the way: left as it is
        elif key in result:
            want[key] = result[key]
    from tillage.workspace.rewind import land_planned

    try:
        land_planned(ws, now, want, dict(intent), before_done=lambda: _seal_and_tell(ws, intent))
    except (OSError, TillageError) as exc:
        raise _stopped(exc, undo) from exc
