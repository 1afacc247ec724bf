"""`till clone`: a new folder and a new workspace from a remote's ref, or nothing at all.

The URL is resolved as typed, against the caller's folder (the transport's own form, as `remote
add` keeps it), and every check comes before anything is made: the destination (new, or an
empty folder; never inside the store, never a folder attached already), the key, the ref, and
every object, fetched and proven. The clone then makes exactly its destination a workspace of
its own, whatever holds it: a destination inside an attached workspace becomes a workspace
nested in it (workspace/nested.py), and the outer one is never opened, sealed, rewound or
given a remote. How a kill at any step leaves a finished clone or nothing: pending.py.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tillage.core.paths import CONTROL_DIR
from tillage.core.progress import ProgressFn
from tillage.crypto import RecoveryKey
from tillage.errors import ConflictError, InvalidArgumentError, echo
from tillage.features.sync import engine, pending, remotes, seen
from tillage.features.sync.errors import RefMissingError
from tillage.features.sync.pending import CloneIntent
from tillage.features.sync.refs import doc_key
from tillage.platform import failpoints
from tillage.platform.folders import syncfs
from tillage.platform.locks import file_lock
from tillage.platform.names import random_hex
from tillage.store.rows import SnapshotRow
from tillage.store.store import Store
from tillage.workspace import pathindex
from tillage.workspace.attach import Workspace, check_attachable, write_pointer
from tillage.workspace.materialize import materialize
from tillage.workspace.pathindex import PathIndex


def clone(
    *,
    home: Path,
    user_home: Path | None,
    folder: Path,
    env: Mapping[str, str],
    url: str,
    key: RecoveryKey,
    ref: str,
    dest: str | None,
    remote_till: str | None,
    accept_rollback: bool = False,
    on_progress: ProgressFn | None = None,
) -> tuple[Workspace, SnapshotRow, str]:
    """Clones `ref` of `url` into `dest` (default: the remote's last path segment, below
    `folder`); returns the new workspace, its head (the pulled state) and the remote's URL as
    it was recorded. `on_progress` hears the objects fetched, then the folder written."""
    remote = engine.open_for(
        remotes.RemoteConfig("origin", url, key, remote_till), env, str(folder)
    )
    try:
        config = remotes.RemoteConfig("origin", remote.url, key, remote_till)
        root = destination(folder, dest, remote.url)
        check_attachable(root, user_home, home)  # a refused destination: nothing is made
        store = Store.open(home)
        try:
            done = _finished_before(store, root, config.url, ref)
            if done is not None:
                return done[0], done[1], config.url
            _check_new(store, root)
            opened = engine.ensure_config(remote, key, create=False)
            current = engine.read_ref(remote, doc_key(opened), ref)
            if current is None:
                raise RefMissingError(f"nothing was pushed to ref {ref!r} of {url}")
            with store.sharing():  # every object is fetched and proven before a folder is made
                # A store that saw this remote's ref refuses an older one (sync.rollback).
                seen.trust(store, remote, ref, current, url, accept_rollback=accept_rollback)
                engine.download(store, remote, opened, current.snapshot, on_progress)
            # The S3 endpoint this clone reached is the one origin keeps (as `remote add` does).
            endpoint = getattr(remote, "recorded_endpoint", None)
            config = replace(config, endpoint=endpoint if isinstance(endpoint, str) else None)
        except BaseException:
            store.close()
            raise
    finally:
        remote.close()
    try:
        with file_lock(_destination_lock(store, root), timeout=0, what=f"a clone into {root}"):
            _check_new(store, root)  # another clone may have made it while this one downloaded
            ws, head = _build(store, root, config, ref, current.snapshot, on_progress)
    except BaseException:
        store.close()  # the new workspace's store stays open only for the workspace
        raise
    return ws, head, config.url


def destination(folder: Path, dest: str | None, url: str) -> Path:
    """The clone's folder: `dest` (or the remote's last path segment) below `folder`, with the
    symlinks of its nearest existing ancestor resolved (the path the workspace is recorded at)."""
    name = dest or url.rstrip("/").rsplit("/", 1)[-1] or "clone"
    target = Path(os.path.abspath(os.path.join(folder, os.path.expanduser(name))))
    if CONTROL_DIR in target.parts:
        raise InvalidArgumentError(
            f"{echo(str(target))} is inside a `{CONTROL_DIR}` folder, tillage's own",
            next_step="give an empty or new DEST outside it",
        )
    missing: list[str] = []
    ancestor = target
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        missing.append(ancestor.name)
        ancestor = ancestor.parent
    if missing and not ancestor.is_dir():
        raise InvalidArgumentError(
            f"{echo(str(ancestor))} is not a folder: {echo(str(target))} cannot be made",
            next_step="give an empty or new DEST",
        )
    if not missing:
        if ancestor.is_symlink() or not ancestor.is_dir():
            what = "a symbolic link" if ancestor.is_symlink() else "not a folder"
            raise InvalidArgumentError(
                f"{echo(str(target))} exists and is {what}",
                next_step="give an empty or new DEST (a clone is never made through a link)",
            )
        return ancestor.resolve()
    return ancestor.resolve().joinpath(*reversed(missing))


def _check_new(store: Store, root: Path) -> None:
    """Refuses a destination that holds anything, or that is a workspace already (a folder
    the catalog records; one whose folder is gone is not: the clone takes its place, and that
    timeline is kept as forgotten, pending.place)."""
    if not os.path.isdir(root):
        return
    if os.listdir(root):
        raise InvalidArgumentError(
            f"{root} exists and is not empty", next_step="give an empty or new DEST"
        )
    if store.workspace_by_root(str(root)) is not None:
        raise ConflictError(
            f"{root} is attached already: a clone makes a new workspace",
            next_step=f"give another DEST, or run `till sync --pull` in {root}",
        )


def _finished_before(
    store: Store, root: Path, url: str, ref: str
) -> tuple[Workspace, SnapshotRow] | None:
    """Finishes what killed clones left; when one of them was this very clone (same folder,
    remote and ref) and it is finished now, the retry's answer is that clone."""
    for intent in pending.finish_clones(store):
        if intent.root == root and intent.url == url and intent.ref == ref:
            head = store.head(intent.workspace)
            if head is not None:
                return Workspace(intent.workspace, root, store), head
    return None


def _destination_lock(store: Store, root: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:24]
    return store.locks_dir / f"clone-into-{digest}.lock"


def _build(
    store: Store,
    root: Path,
    config: remotes.RemoteConfig,
    ref: str,
    incoming: str,
    on_progress: ProgressFn | None = None,
) -> tuple[Workspace, SnapshotRow]:
    """Makes the clone under its intent (pending.py): staged, recorded, committed, placed."""
    workspace_id = random_hex(16)
    into_existing = os.path.isdir(root)
    made = [] if into_existing else _missing_parents(root)
    intent = CloneIntent(
        workspace_id,
        root,
        pending.staging_for(root, workspace_id, into_existing=into_existing),
        tuple(str(m) for m in made),
        into_existing,
        config.url,
        ref,
    )
    with file_lock(pending.maker_lock(store, workspace_id), timeout=0, what="this clone"):
        pending.write(store, intent)
        failpoints.hit("clone.after_intent")
        try:
            for folder in made:
                os.mkdir(folder, 0o755)
            failpoints.hit("clone.after_parents")
            head = _stage(store, intent, config, ref, incoming, on_progress)
            failpoints.hit("clone.after_records")
            committed = CloneIntent(**{**vars(intent), "committed": True})
            pending.write(store, committed)
        except BaseException:
            pending.undo(store, intent)
            pending.intent_path(store, workspace_id).unlink(missing_ok=True)
            raise
        failpoints.hit("clone.after_commit")
        if not pending.place(store, committed):
            pending.undo(store, committed)
            pending.intent_path(store, workspace_id).unlink(missing_ok=True)
            raise ConflictError(
                f"{root} was taken while the clone was made (attached, or no longer empty); "
                "nothing was made",
                next_step="give an empty or new DEST",
            )
        failpoints.hit("clone.after_attach")
        pending.intent_path(store, workspace_id).unlink(missing_ok=True)
    return Workspace(workspace_id, root, store), head


def _stage(
    store: Store,
    intent: CloneIntent,
    config: remotes.RemoteConfig,
    ref: str,
    incoming: str,
    on_progress: ProgressFn | None = None,
) -> SnapshotRow:
    """Records the workspace (its first snapshots and sync fact, its remote) under an ID no
    folder is attached as yet, and writes the folder into its staging place, durably."""
    staged = Workspace(intent.workspace, intent.staging, store)
    head = engine.land_clone(staged, config, ref, incoming)
    remotes.add(store, intent.workspace, config)
    failpoints.hit("clone.after_snapshot")
    target = store.snapshot(incoming)
    assert target is not None  # published by land_clone
    rows = materialize(store, target, intent.staging, on_progress=on_progress)
    failpoints.hit("clone.after_materialize")
    write_pointer(intent.staging, intent.workspace)
    fd = os.open(intent.staging, os.O_RDONLY | os.O_DIRECTORY)
    try:
        syncfs(fd)  # durable before the commit makes it the workspace
    finally:
        os.close(fd)
    pathindex.save(store, intent.workspace, PathIndex(files=rows))
    return head


def _missing_parents(root: Path) -> list[Path]:
    """The folders above `root` that do not exist yet, outermost first."""
    missing: list[Path] = []
    parent = root.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return list(reversed(missing))
