"""Making a universe: a full-state, attached copy of a workspace (or of a stored snapshot) with
its own timeline, linked to its parent by its base snapshot, sharing the one store.

Crash safety (INV-12): the copy is built in a staging folder beside the destination
(same file system: reflinks work and the final rename is atomic) under an intent record in the
store and a lock only its maker holds. Order: copy (the base is sealed meanwhile, in another
thread: the walk and the copy overlap); write the fork's pointer; sync the file system (the
copy is durable before anything names it); publish the fork's first
snapshot (the base's tree, parent = base: no new objects); publish
the `fork` record; rename staging into place; drop the intent. A fork killed anywhere leaves
either no fork (the next fork command removes the staging folder) or a whole one (a published
record whose folder is still in staging is renamed into place by the next fork command).

The fork's first seal reads nothing that did not change: its path index is seeded from the
parent's rows (as the last seal left them) for files whose stat facts equal the row's before
and after their copy (with the copy's own facts); a file that changed gets no row, and is read.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tillage.core.progress import ProgressFn
from tillage.errors import BusyError, TillageError, echo
from tillage.features.forks import ports
from tillage.features.forks.copy import Seeder, copy_live, match_base, materialized_stats
from tillage.features.forks.errors import (
    BadDestinationError,
    DestinationExistsError,
    ForkCopyError,
    ForkExistsError,
    ForkFolderMissingError,
    ForkNotFoundError,
    InvalidForkNameError,
    NotTheForkError,
    SnapshotPartialError,
)
from tillage.platform import failpoints
from tillage.platform.clone import CopyStats, rename_noreplace
from tillage.platform.errors import DiskFullError
from tillage.platform.folders import folder_identity, remove_folder, syncfs
from tillage.platform.fs import atomic_write, fsync_dir, raise_if_disk_full
from tillage.platform.locks import file_lock, is_held
from tillage.platform.names import random_hex
from tillage.store.rows import ForkRow, SnapshotRow
from tillage.store.store import Store
from tillage.workspace import pathindex
from tillage.workspace.attach import Workspace, holds_pointer, reclaim_pointer, write_pointer
from tillage.workspace.locks import using_store
from tillage.workspace.materialize import materialize
from tillage.workspace.pathindex import PathIndex, Row
from tillage.workspace.trees import flatten

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,39}")
MAX_NAME = 40
FORKS_SUFFIX = ".forks"
STAGING_MARK = ".tillage-fork-"
TRASH_MARK = ".tillage-fork-removed-"
INTENT_PREFIX = "fork-"
# A removal's intent, from before its folder goes to the trash until the trash is deleted.
REMOVAL_PREFIX = "forkrm-"
NAME_KEPT = 64  # of a destination's name in its staging and trash names (they stay < 255)
# A fork of a large workspace copies for a while: another fork of the same parent waits.
FORKS_LOCK_TIMEOUT = 900.0


@dataclass(frozen=True)
class Forked:
    """A universe just made: its record, the fork as a workspace, the base it was made from,
    its first snapshot, and what the copy cost."""

    row: ForkRow
    workspace: Workspace
    base: SnapshotRow
    head: SnapshotRow
    driver: str
    files: int
    bytes: int
    seconds: float
    seeded: int


def check_name(name: str) -> str:
    """Returns `name` when it is a valid fork name (a short lower-case slug); invalid_name
    otherwise. Lower case only: two forks never differ by case alone."""
    if NAME_PATTERN.fullmatch(name) is None:
        hint = ""
        if NAME_PATTERN.fullmatch(name.lower()) is not None:
            hint = f" (lower case only: {name.lower()!r})"
        raise InvalidForkNameError(
            f"{echo(name)} is not a fork name: 1-{MAX_NAME} characters of a-z, 0-9, '.', '_', "
            f"'-', starting with a letter or digit{hint}"
        )
    return name


def check_new_name(name: str) -> str:
    """check_name() for a fork about to be made: a name the snapshot resolver gives its own
    meaning (`head`, `latest`) is refused too, since it would never name the fork (an older
    fork called that is still found by `till forks`, `fork-rm` and `merge`)."""
    from tillage.workspace.timeline import reserved

    check_name(name)
    if reserved(name):
        raise InvalidForkNameError(
            f"{echo(name)} names the workspace's newest snapshot wherever a snapshot is taken "
            "(`till show head`), so no fork may be called that",
            next_step="choose another name",
        )
    return name


def default_destination(ws: Workspace, name: str) -> Path:
    """`<workspace>.forks/NAME`, beside the workspace (CONTRACT)."""
    return ws.root.parent / f"{ws.root.name}{FORKS_SUFFIX}" / name


def staging_path(root: Path, fork_id: str) -> Path:
    """Where the fork `fork_id` is built before it is renamed to `root` (same folder)."""
    return root.parent / f".{root.name[:NAME_KEPT]}{STAGING_MARK}{fork_id}"


def trash_path(root: Path, fork_id: str) -> Path:
    """Where a removed fork's folder goes (one rename) before it is deleted."""
    return root.parent / f".{root.name[:NAME_KEPT]}{TRASH_MARK}{fork_id}"


def _within(path: Path, ancestor: Path) -> bool:
    return path == ancestor or ancestor in path.parents


def check_destination(ws: Workspace, destination: Path) -> Path:
    """Returns the absolute destination for a new fork, or says why it cannot be one: it
    exists (conflict), it lies inside the workspace, the store or another attached
    workspace (a missing parent folder is made once it passes)."""
    dest = Path(os.path.abspath(destination))
    if dest.name in ("", ".", ".."):
        raise BadDestinationError(f"{echo(str(destination))} does not name a new folder")
    if os.path.lexists(dest):
        raise DestinationExistsError(f"{dest} already exists; a fork never overwrites anything")
    dest = _resolved_beyond(dest)
    if os.path.lexists(dest):
        raise DestinationExistsError(f"{dest} already exists; a fork never overwrites anything")
    if _within(dest, ws.root):
        raise BadDestinationError(
            f"{dest} is inside the workspace {ws.root}: the fork would be sealed into it"
        )
    store = ws.store.home.resolve()
    if _within(dest, store):
        raise BadDestinationError(f"{dest} is inside tillage's store ({store})")
    for folder in dest.parents:
        row = ws.store.workspace_by_root(str(folder))
        if row is not None:
            raise BadDestinationError(
                f"{dest} is inside the attached workspace {folder}: it would be sealed into it"
            )
    if not dest.parent.is_dir():
        # Missing folders on the way are made, as `git worktree add` does; only once every
        # check above has passed, so a refused destination leaves nothing behind.
        try:
            dest.parent.mkdir(0o755, parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise BadDestinationError(
                f"{dest.parent} (where the fork would go) cannot be a folder: {exc.strerror}"
            ) from exc
    return dest


def _resolved_beyond(path: Path) -> Path:
    """`path` with its nearest existing ancestor's symlinks resolved and the missing rest
    appended, so the checks see where the fork would really land."""
    missing: list[str] = []
    ancestor = path
    while not ancestor.exists() and ancestor != ancestor.parent:
        missing.append(ancestor.name)
        ancestor = ancestor.parent
    return ancestor.resolve().joinpath(*reversed(missing))


def require_fork(ws: Workspace, name: str) -> ForkRow:
    """The live fork of `ws` called `name`; not_found (naming `till forks`) otherwise."""
    check_name(name)
    row = ws.store.fork_named(ws.id, name)
    if row is None:
        raise ForkNotFoundError(f"this workspace has no fork called {echo(name)}")
    return row


def open_fork(ws: Workspace, row: ForkRow) -> Workspace:
    """The fork as a workspace of its own, in the same store."""
    return Workspace(row.workspace, Path(row.root), ws.store)


def is_fork_folder(store: Store, row: ForkRow, *, restore: bool = True) -> bool:
    """Tells whether the folder at the fork's recorded path is that fork: its pointer names it,
    or its pointer was removed (`git clean -fdx` in the fork) and it is the very folder the
    fork was made as (its recorded identity); then the pointer is put back, unless `restore`
    is False. A folder made anew at the path is never it, whatever its inode number."""
    root = Path(row.root)
    if holds_pointer(root, row.workspace):
        return True
    if row.identity is None or folder_identity(root) != row.identity:
        return False
    return reclaim_pointer(root, row.workspace, restore=restore)


def require_fork_folder(store: Store, row: ForkRow) -> Path:
    """The fork's folder, checked to be that fork: folder_missing when it is gone,
    not_the_fork when the folder there is something else."""
    root = Path(row.root)
    if not os.path.lexists(root):
        raise ForkFolderMissingError(
            f"the folder of fork {row.name!r} ({root}) is gone",
            next_step=f"retire it with `till fork-rm {row.name} --yes` (its last sealed state "
            "stays restorable)",
        )
    if not is_fork_folder(store, row):
        raise NotTheForkError(
            f"{root} is not fork {row.name!r} any more: its `.tillage` pointer names another "
            "workspace, or none",
            details={"path": str(root)},
        )
    return root


@contextmanager
def forks_lock(ws: Workspace) -> Iterator[None]:
    """Serialises making and removing forks of one workspace (names stay unique)."""
    with _parent_forks_lock(ws.store, ws.id, FORKS_LOCK_TIMEOUT):
        yield


def _parent_forks_lock(
    store: Store, parent_id: str, timeout: float
) -> contextlib.AbstractContextManager[None]:
    return file_lock(
        store.locks_dir / f"forks-{parent_id}.lock",
        timeout=timeout,
        what="this workspace's forks",
    )


def _intent_path(store: Store, fork_id: str) -> Path:
    return store.intents_dir / f"{INTENT_PREFIX}{fork_id}.json"


def write_intent(
    store: Store,
    fork_id: str,
    parent: str,
    name: str,
    dest: Path,
    staging: Path,
    *,
    restore: bool = False,
) -> Path:
    """Writes the intent a fork (or a fork's restore) is made under, before anything else:
    the next command finishes or undoes what it names (INV-12). Returns its path."""
    doc: dict[str, Any] = {
        "fork": fork_id,
        "parent": parent,
        "name": name,
        "root": str(dest),
        "staging": str(staging),
        "pid": os.getpid(),
    }
    if restore:
        doc["restore"] = True
    intent = _intent_path(store, fork_id)
    atomic_write(intent, json.dumps(doc).encode())
    return intent


def _maker_lock(store: Store, fork_id: str) -> Path:
    return store.locks_dir / f"fork-{fork_id}.lock"


def _remove_folder(path: Path) -> None:
    """Removes a folder tillage made (staging or trash), durably."""
    remove_folder(path, durable=True)


def finish_pending(ws: Workspace) -> None:
    """Finishes or undoes what a killed fork command left (INV-7 for forks): a fork made up
    to its record is renamed into place; one that was not is removed with its staging
    folder; a removal killed before its record puts the folder back; a removed fork's folder
    left in the trash is deleted. A fork still being made by a live process is left alone."""
    store = ws.store
    finish_pending_anywhere(store)
    try:
        with _parent_forks_lock(store, ws.id, 0):  # a removal running now is left to finish
            for row in store.forks_of(ws.id, removed=True):
                _settle_trash(row)
    except BusyError:
        pass


def finish_pending_anywhere(store: Store) -> None:
    """What a killed fork or fork-rm left, finished by the next command of any kind from the
    store's intents alone (a `status` or a `merge` after a killed fork must find neither a
    staging copy of the workspace, `.env` included, nor a fork whose folder is in the trash).
    Costs one listing of the intents folder when there is nothing to finish."""
    try:
        names = os.listdir(store.intents_dir)
    except FileNotFoundError:
        return
    for name in sorted(names):
        if not name.endswith(".json") or not (store.intents_dir / name).is_file():
            continue  # a folder in an intent's place is `verify`'s to report (store/controls.py)
        if name.startswith(REMOVAL_PREFIX):
            _finish_removal(store, store.intents_dir / name)
        elif name.startswith(INTENT_PREFIX):
            fork_id = name[len(INTENT_PREFIX) : -len(".json")]
            lock = _maker_lock(store, fork_id)
            if is_held(lock):
                continue
            try:
                with file_lock(lock, timeout=0, what="a fork being made"):
                    _finish_intent(store, store.intents_dir / name, fork_id)
            except (BusyError, FileNotFoundError):
                continue


def removal_intent(store: Store, row: ForkRow) -> Path:
    """Where fork-rm records a removal before the fork's folder goes to the trash."""
    return store.intents_dir / f"{REMOVAL_PREFIX}{row.workspace}.json"


def _finish_removal(store: Store, intent: Path) -> None:
    """A removal killed half-way: its folder back from the trash (killed before its record)
    or the trash deleted (after), under its parent's forks lock (a removal still running holds
    it: left alone)."""
    fork_id = intent.name[len(REMOVAL_PREFIX) : -len(".json")]
    row = store.fork_of(fork_id)
    if row is None:
        intent.unlink(missing_ok=True)
        return
    try:
        with _parent_forks_lock(store, row.parent, 0):
            row = store.fork_of(fork_id) or row  # its record may have come meanwhile
            _settle_trash(row)
            intent.unlink(missing_ok=True)
    except BusyError:
        return


def _settle_trash(row: ForkRow) -> None:
    root = Path(row.root)
    trash = trash_path(root, row.workspace)
    if not os.path.lexists(trash):
        return
    if row.removed_ns is None and not os.path.lexists(root):
        rename_noreplace(trash, root)  # a removal killed before its record: undone
        fsync_dir(root.parent)
    elif row.removed_ns is not None:
        _remove_folder(trash)


def _abandon(store: Store, fork_id: str) -> None:
    """A fork that was never made may have left its first seal in a pack, for a workspace the
    log never records: dropped (as a gc's removed snapshots are), so no gc keeps it as a lost
    timeline and no `verify` reports one (store/lost.py)."""
    from tillage.store.lost import lost_snapshots

    found = [snapshot for _at, snapshot, _record in lost_snapshots(store, {fork_id})]
    if found:
        store.publish("drop", {"removed": found, "thinned": []})


def _finish_intent(store: Store, intent: Path, fork_id: str) -> None:
    try:
        doc = json.loads(intent.read_bytes())
        root = Path(doc["root"])
        staging = Path(doc["staging"])
    except (OSError, ValueError, KeyError, TypeError):
        if intent.is_file():  # written atomically: a torn one was never acted on
            intent.unlink()
        return  # a folder in its place is left for `verify` to report (store/controls.py)
    row = store.fork_of(fork_id)
    if row is not None and row.removed_ns is None:
        if not os.path.lexists(root) and holds_pointer(staging, fork_id):
            rename_noreplace(staging, root)
            fsync_dir(root.parent)
    elif row is None:
        if os.path.lexists(staging) and STAGING_MARK in staging.name:
            _remove_folder(staging)
        _abandon(store, fork_id)
    elif os.path.lexists(staging) and STAGING_MARK in staging.name:
        _remove_folder(staging)
    intent.unlink(missing_ok=True)


@using_store
def create_fork(
    ws: Workspace,
    name: str,
    *,
    destination: Path | None = None,
    at: str | None = None,
    base: SnapshotRow | None = None,
    on_progress: ProgressFn | None = None,
    port_base: int = ports.DEFAULT_BASE,
) -> Forked:
    """Makes the fork `name` of `ws`: of the live folder (sealed first as its base, trigger
    `fork_base`, while it is copied, unless `base` is given: one base for several forks),
    or of the stored snapshot `at`. Its port is the first free one above `port_base` in its
    family (features/forks/ports.py). See the module docstring for the order and why it is
    crash-safe."""
    from tillage.workspace.timeline import resolve

    check_new_name(name)
    started = time.monotonic()
    finish_pending(ws)
    store = ws.store
    with forks_lock(ws):
        if store.fork_named(ws.id, name) is not None:
            raise ForkExistsError.named(name)
        if at is not None:
            base = resolve(ws, at)
            _refuse_partial(store, base)
        dest = check_destination(ws, destination or _default_parent(ws, name))
        fork_id = random_hex(16)
        staging = staging_path(dest, fork_id)
        with file_lock(_maker_lock(store, fork_id), timeout=0, what="this fork"):
            intent = write_intent(store, fork_id, ws.id, name, dest, staging)
            failpoints.hit("fork.after_intent")
            try:
                if base is not None and at is not None:
                    rows = materialize(store, base, staging, on_progress=on_progress)
                    stats = materialized_stats(base)
                else:
                    base, stats, rows = _copy_with_base(ws, name, staging, base, on_progress)
                failpoints.hit("fork.after_copy")
                write_pointer(staging, fork_id)
                if at is None:  # a live copy, made exactly its base (saves the index)
                    rows = match_base(store, fork_id, staging, base, rows)
                else:  # a materialized snapshot is its base already
                    pathindex.save(store, fork_id, PathIndex(files=rows))
                _make_durable(staging)  # durable before referenced: the record names it
                head = _publish_first(store, fork_id, base, name)
                failpoints.hit("fork.after_snapshot")
                record = {
                    "workspace": fork_id,
                    "parent": ws.id,
                    "name": name,
                    "base": base.id,
                    "root": str(dest),
                    # The rename into place keeps it: the parent knows the fork's folder
                    # even after `git clean -fdx` in it removed its pointer.
                    "identity": folder_identity(staging),
                }
                ports.allocate(
                    store,
                    ws.id,
                    port_base,
                    lambda port: store.publish("fork", {**record, "port": port}),
                )
                failpoints.hit("fork.after_record")
                rename_noreplace(staging, dest)
                fsync_dir(dest.parent)
                failpoints.hit("fork.after_rename")
            except BaseException as exc:
                if store.fork_of(fork_id) is None and os.path.lexists(staging):
                    _remove_folder(staging)
                    with contextlib.suppress(TillageError, OSError):  # the next command's
                        _abandon(store, fork_id)
                    intent.unlink(missing_ok=True)
                if isinstance(exc, DiskFullError):
                    exc.details.setdefault("path", str(dest.parent))
                if isinstance(exc, OSError):
                    raise_if_disk_full(exc, dest.parent)
                    where = exc.filename or dest
                    raise ForkCopyError(
                        f"could not make fork {name!r}: {exc.strerror or exc}: {where}",
                        details={"errno": exc.errno},
                    ) from exc
                raise
            intent.unlink(missing_ok=True)
    row = store.fork_of(fork_id)
    assert row is not None
    return Forked(
        row=row,
        workspace=Workspace(fork_id, dest, store),
        base=base,
        head=head,
        driver=stats.driver,
        files=stats.files,
        bytes=stats.bytes,
        seconds=time.monotonic() - started,
        seeded=len(rows),
    )


def _copy_with_base(
    ws: Workspace,
    name: str,
    staging: Path,
    base: SnapshotRow | None,
    on_progress: ProgressFn | None,
) -> tuple[SnapshotRow, CopyStats, dict[str, Row]]:
    """Copies the live folder into staging while its base is sealed (trigger `fork_base`)
    in another thread, unless a base is given: the seal's walk and the copy overlap instead
    of adding up. Rows are seeded against the path index as it was before that seal (facts
    equal to a row mean the row's content), so they do not depend on the seal's timing."""
    from concurrent.futures import ThreadPoolExecutor

    from tillage.workspace.seal import SealOptions, seal_result

    seeder = Seeder(pathindex.load(ws.store, ws.id))
    if base is not None:
        return base, copy_live(ws, staging, seeder, on_progress), seeder.rows
    options = SealOptions(trigger="fork_base", label=f"base of fork {name}", skip_unchanged=True)
    with ThreadPoolExecutor(1, thread_name_prefix="fork-base") as pool:
        # The copy is what a person waits for: one line for it, not two stages taking turns.
        sealing = pool.submit(seal_result, ws, options)
        stats = copy_live(ws, staging, seeder, on_progress)  # a failure waits for the seal
        sealed = sealing.result().row
    return sealed, stats, seeder.rows


def _refuse_partial(store: Store, snapshot: SnapshotRow) -> None:
    """A thinned snapshot cannot be a fork: its missing files would merge back as deletions."""
    if not store.thinned_classes(snapshot.id):
        return
    from tillage.workspace.thinned import missing_paths

    missing = missing_paths(store, snapshot.id, flatten(store, bytes.fromhex(snapshot.tree)))
    if missing:
        shown = ", ".join(m.path for m in missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise SnapshotPartialError(
            f"snapshot {snapshot.id[:12]} is partial: a gc dropped the bytes of "
            f"{len(missing)} of its files ({shown})",
            details={
                "snapshot": snapshot.id,
                "missing": [{"path": m.path, "class": m.cls} for m in missing[:100]],
                "missing_count": len(missing),
            },
        )


def _make_durable(folder: Path) -> None:
    """Makes everything written below `folder` durable with one sync of its file system (one
    journal commit, not an fsync per file)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        syncfs(fd)
    finally:
        os.close(fd)


def _default_parent(ws: Workspace, name: str) -> Path:
    dest = default_destination(ws, name)
    with contextlib.suppress(FileExistsError):
        dest.parent.mkdir(0o755)
    return dest


def _publish_first(store: Store, fork_id: str, base: SnapshotRow, name: str) -> SnapshotRow:
    """The fork's first snapshot: the base's tree and fidelity, parent = base (no objects)."""
    from tillage.workspace.capture import Capture
    from tillage.workspace.seal import SealOptions, publish_capture, snapshot_record

    record = snapshot_record(store, base.id)
    capture = Capture(
        root=bytes.fromhex(base.tree),
        files=base.files,
        total_bytes=base.bytes,
        notes=list(record.fidelity),
    )
    options = SealOptions(trigger="fork", label=f"fork {name} of {base.id[:12]}")
    with store.writer() as writer:
        return publish_capture(store, fork_id, writer, capture, options, base.id)


def ensure_port(store: Store, row: ForkRow, port_base: int) -> ForkRow:
    """The fork's record with its port: one made before forks had ports gets one now (the
    first free above `port_base` in its family, recorded by a `fork_port` fact, kept from
    then on)."""
    if row.port is not None:
        return row
    ports.allocate(
        store,
        row.parent,
        port_base,
        lambda port: store.publish(
            "fork_port", {"workspace": row.workspace, "parent": row.parent, "port": port}
        ),
    )
    updated = store.fork_of(row.workspace)
    assert updated is not None
    return updated


def fork_index(store: Store, row: ForkRow) -> int:
    """The fork's 1-based position among every fork ever made of its parent: stable (removed
    forks keep their place) and distinct (`till forks` reports it as `index`)."""
    every = store.forks_of(row.parent, removed=True)
    for position, fork in enumerate(every, start=1):
        if fork.workspace == row.workspace:
            return position
    return len(every) + 1
