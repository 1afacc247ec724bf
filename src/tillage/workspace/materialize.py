"""A stored snapshot written into a fresh folder (`fork --at`, bisect probes, `work`), such a
folder made exactly another snapshot in place (the next bisect probe), and a planned change
applied to a disposable copy (a merge check's scratch folder): the journal's applier without a
journal, since nothing there needs to survive a crash."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tillage.core.models import ChunkRef, ContentKind, Entry, EntryFlag, EntryKind, is_hole
from tillage.core.paths import CONTROL_DIR
from tillage.core.progress import ProgressFn
from tillage.core.rewind_plan import Op, plan_actions
from tillage.errors import TillageError
from tillage.platform import clock
from tillage.platform.folders import remove_tree
from tillage.platform.fs import current_umask, pwrite_all
from tillage.store.rows import SnapshotRow
from tillage.store.store import Store
from tillage.workspace.attach import Workspace
from tillage.workspace.capture import Walker
from tillage.workspace.journal.applier import Applier
from tillage.workspace.locks import using_store
from tillage.workspace.nested import inside_control_dir
from tillage.workspace.pathindex import PathIndex, Row, settled, stat_facts
from tillage.workspace.policy import Policy
from tillage.workspace.sqlite_image import SIDECAR_SUFFIXES
from tillage.workspace.trees import chunks_of, flatten

# A materialized folder is made with this mode (less the umask); rematerialize puts it back.
FOLDER_MODE = 0o755
_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def materialize(
    store: Store,
    snapshot: SnapshotRow,
    dest: Path,
    *,
    durable: bool = True,
    on_progress: ProgressFn | None = None,
) -> dict[str, Row]:
    """Writes the stored snapshot into the new folder `dest` (its parent must exist), byte-
    exact, every object verified before a byte is written; returns the path-index rows of
    what it wrote (racily-clean ones marked so that they are read again). Durable when it
    returns unless told it need not be (a bisect probe, removed when the bisect ends)."""
    with store.sharing():  # INV-14: no gc removes what it is reading
        return _materialize(store, snapshot, dest, durable, on_progress)


def _materialize(
    store: Store,
    snapshot: SnapshotRow,
    dest: Path,
    durable: bool,
    on_progress: ProgressFn | None,
) -> dict[str, Row]:
    os.mkdir(dest, FOLDER_MODE)
    want = flatten(store, bytes.fromhex(snapshot.tree))
    # An inner workspace's pointer an old seal captured is never put back (nested.py).
    want = {p: e for p, e in want.items() if not inside_control_dir(p)}
    planned = plan_actions({}, want, None)
    applier = Applier(Workspace("materialize", dest, store), {}, on_progress)
    applier.stage(planned.actions)
    applier.run(planned.actions, durable=durable)
    return settled(applier.written)


@using_store
def apply_to_copy(
    ws: Workspace, root: Path, current: dict[str, Entry], want: dict[str, Entry]
) -> dict[str, Row]:
    """Turns `current` into `want` in a copy of the workspace at `root` that nothing needs to
    survive a crash in (a merge check's scratch folder, a fork's staging folder), reading
    objects from the workspace's store: no intent, no seal, no sync. Returns the path-index
    rows of what it wrote (settled)."""
    planned = plan_actions(current, want)
    applier = Applier(Workspace(ws.id, root, ws.store), current)
    applier.stage(planned.actions)
    applier.run(planned.actions, durable=False)
    return settled(applier.written)


class _Everything(Policy):
    """Excludes nothing, not even tillage's temporary names: a folder made exactly a snapshot
    holds nothing else, whatever a policy would leave out of a seal."""

    def __init__(self) -> None:
        super().__init__([])

    def excludes(self, path: str, is_dir: bool) -> bool:
        return False


def rematerialize(
    store: Store,
    snapshot: SnapshotRow,
    dest: Path,
    rows: dict[str, Row],
    on_progress: ProgressFn | None = None,
) -> dict[str, Row] | None:
    """Makes `dest`, a folder materialize (or this) wrote, exactly `snapshot` again, writing
    only what differs, and returns its new rows; `rows` are the rows that call returned.

    Whatever was done to the folder since (files made, changed, deleted, re-moded, a SQLite
    database opened) is found as a seal finds it: one stat walk against `rows`, reading only
    the files whose facts changed. Everything in the folder is looked at, whatever a policy
    says; a database with a sidecar beside it is written again, its sidecars removed (its
    consistent image may equal the snapshot's while its bytes do not). None, with
    nothing changed: the folder cannot be vouched for (not a folder, or something in it
    unreadable or special); the caller writes a fresh one instead."""
    with store.sharing():  # INV-14: no gc removes what it is reading
        return _rematerialize(store, snapshot, dest, rows, on_progress)


def _rematerialize(
    store: Store,
    snapshot: SnapshotRow,
    dest: Path,
    rows: dict[str, Row],
    on_progress: ProgressFn | None,
) -> dict[str, Row] | None:
    try:
        if not stat.S_ISDIR(os.lstat(dest).st_mode):
            return None
    except FileNotFoundError:
        return None
    seen = Walker(
        dest,
        _Everything(),
        PathIndex(files=rows),
        None,
        store.tmp_dir,
        clock.files_now_ns(),
        keep_manifest=True,
        store=store,
    ).run()
    if seen.notes or seen.manifest is None:
        return None  # an unreadable or special name, or a file that kept changing
    _remove_control_dir(dest)
    os.chmod(dest, FOLDER_MODE & ~current_umask())
    want = {
        p: e
        for p, e in flatten(store, bytes.fromhex(snapshot.tree)).items()
        if e.kind is not EntryKind.SPECIAL
    }
    current = dict(seen.manifest)
    for path, entry in seen.manifest.items():
        # A walk folds a database's sidecars into its image, so no plan names them; and only
        # a database with a -wal beside it has an image that is not its own bytes.
        if entry.flags & EntryFlag.SQLITE_IMAGE and _remove_sidecars(dest, path):
            del current[path]  # written again from the store
    planned = plan_actions(current, want)
    patched: dict[str, Row] = {}
    for action in planned.actions:
        live = current.get(action.path)
        if action.op is Op.WRITE and action.entry is not None and live is not None:
            row = _patch(store, dest, action.path, live, action.entry)
            if row is not None:
                patched[action.path] = row
    rest = tuple(a for a in planned.actions if not (a.op is Op.WRITE and a.path in patched))
    applier = Applier(Workspace("materialize", dest, store), seen.manifest, on_progress)
    applier.stage(rest)
    applier.run(rest, durable=False)
    touched = {a.path for a in planned.actions} | (seen.manifest.keys() - current.keys())
    kept = {p: r for p, r in seen.rows.items() if p in want and p not in touched}
    kept.update(settled({**patched, **applier.written}))
    return kept


def _patch(store: Store, dest: Path, path: str, live: Entry, want: Entry) -> Row | None:
    """Makes the file at `path`, which holds `live`, hold `want` by writing in place only the
    chunks that are not already at their offset, then its size, mode and mtime: a log that
    grew by 4 MiB costs 4 MiB, not the whole log. None, with nothing written, unless both are
    stored chunk lists of a plain file (no holes, xattrs, link or database image), the file
    has one name, and less than half of it differs (the applier then writes it whole)."""
    if not (_patchable(live) and _patchable(want)):
        return None
    try:
        old = chunks_of(store, live)
    except TillageError:
        return None  # bytes the check wrote, in no snapshot: not known chunk by chunk
    new = chunks_of(store, want)
    if any(is_hole(ref) for ref in (*old, *new)):
        return None
    missing = _placed(new) - _placed(old)
    if 2 * sum(length for _at, _id, length in missing) > want.size:
        return None
    folder, _, name = path.rpartition("/")
    try:
        parent = os.open(dest / folder if folder else dest, _DIR_OPEN)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        finally:
            os.close(parent)
    except PermissionError:
        return None  # a read-only file (not ours to lend): the applier replaces it whole
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != live.size:
            return None
        for at, chunk, _length in sorted(missing):
            pwrite_all(fd, store.read(chunk), at)  # verified before a byte of it is written
        if want.size != live.size:
            os.ftruncate(fd, want.size)
        if stat.S_IMODE(st.st_mode) != want.mode & 0o7777:
            os.fchmod(fd, want.mode & 0o7777)
        os.utime(fd, ns=(want.mtime_ns, want.mtime_ns))
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return (*stat_facts(st), int(want.content_kind), want.content, int(want.flags), want.size, ())


def _placed(refs: list[ChunkRef]) -> set[tuple[int, bytes, int]]:
    """A file's chunks as (offset, ID, length)."""
    placed, offset = set(), 0
    for ref in refs:
        placed.add((offset, ref.id, ref.length))
        offset += ref.length
    return placed


def _patchable(entry: Entry) -> bool:
    return (
        entry.kind is EntryKind.FILE
        and entry.content_kind is ContentKind.BLOB
        and entry.flags == EntryFlag.NONE
        and not entry.xattrs
        and not entry.link
    )


def _remove_control_dir(dest: Path) -> None:
    """A `.tillage/` the folder's user made (a walk passes it by): a fresh folder has none."""
    _remove_name(dest, CONTROL_DIR)


def _remove_sidecars(dest: Path, path: str) -> bool:
    """Removes a database's -wal, -shm and -journal names (a walk folds them into its image,
    so no plan names them); tells whether there were any."""
    folder, _, name = path.rpartition("/")
    found = False
    for suffix in SIDECAR_SUFFIXES:
        found = _remove_name(dest / folder if folder else dest, name + suffix) or found
    return found


def _remove_name(folder: Path, name: str) -> bool:
    """Removes `name` in `folder` (a folder and all in it too); tells whether it was there."""
    fd = os.open(folder, _DIR_OPEN)
    try:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISDIR(st.st_mode):
            remove_tree(fd, name)
        else:
            os.unlink(name, dir_fd=fd)
        return True
    finally:
        os.close(fd)
