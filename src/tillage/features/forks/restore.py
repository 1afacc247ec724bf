"""Bringing back a removed fork (`till undo` of a fork-rm): the same fork, not a new one.

The fork keeps its identity: its workspace ID (so its timeline is its own again), its name,
its base, its folder and its port; its folder is its last state (the snapshot fork-rm sealed
before removing it), materialized byte-exact. Crash-safe the way making a fork is (INV-12):
built in a staging folder under the same intent a new fork writes, the `fork` record published
once the copy is durable, then one rename into place; a restore killed anywhere is finished
(record published: renamed into place) or undone (no record: staging removed) by the next
command (fork.finish_pending_anywhere).
"""

from __future__ import annotations

import os
from pathlib import Path

from tillage.errors import NotFoundError
from tillage.features.forks.errors import DestinationExistsError, ForkExistsError
from tillage.features.forks.fork import (
    _make_durable,
    _maker_lock,
    _remove_folder,
    forks_lock,
    staging_path,
    write_intent,
)
from tillage.platform import failpoints
from tillage.platform.clone import rename_noreplace
from tillage.platform.folders import folder_identity
from tillage.platform.fs import fsync_dir
from tillage.platform.locks import file_lock
from tillage.store.rows import ForkRow
from tillage.workspace import pathindex
from tillage.workspace.attach import Workspace, holds_pointer, write_pointer
from tillage.workspace.locks import using_store
from tillage.workspace.materialize import materialize
from tillage.workspace.pathindex import PathIndex


@using_store
def restore_fork(ws: Workspace, fork_id: str) -> ForkRow:
    """Restores the removed fork `fork_id` of `ws` from its last snapshot; returns its record.
    A fork live already is returned as it is (a restore finished before). Refused, changing
    nothing: another live fork has its name (fork.exists), something else is in its folder
    (fork.destination_exists), its last state is gone (not_found: a gc removed it)."""
    store = ws.store
    with forks_lock(ws):
        row = store.fork_of(fork_id)
        if row is None or row.parent != ws.id:
            raise NotFoundError(f"no fork {fork_id[:12]} of this workspace was ever recorded")
        if row.removed_ns is None:
            return row
        if store.fork_named(ws.id, row.name) is not None:
            raise ForkExistsError.named(row.name, " (made after this one was removed)")
        dest = Path(row.root)
        record = {
            "workspace": row.workspace,
            "parent": row.parent,
            "name": row.name,
            "base": row.base,
            "root": row.root,
            "port": row.port,
        }
        if os.path.lexists(dest):
            if not holds_pointer(dest, fork_id):
                raise DestinationExistsError(
                    f"{dest} exists and is not the removed fork {row.name!r}: nothing was "
                    "restored (move it away, then undo again)"
                )
            # Removed with --keep-files: its folder is still the fork's.
            store.publish("fork", {**record, "identity": folder_identity(dest)})
            return _row(ws, fork_id)
        last = store.snapshot(row.last) if row.last else store.head(fork_id)
        if last is None:
            raise NotFoundError(
                f"the last state of fork {row.name!r} is no longer in the store (a gc removed "
                "it): it cannot be restored"
            )
        staging = staging_path(dest, fork_id)
        with file_lock(_maker_lock(store, fork_id), timeout=0, what="this fork"):
            intent = write_intent(store, fork_id, ws.id, row.name, dest, staging, restore=True)
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                rows = materialize(store, last, staging)
                failpoints.hit("fork.restore.after_copy")
                write_pointer(staging, fork_id)
                pathindex.save(store, fork_id, PathIndex(files=rows))
                _make_durable(staging)
                store.publish("fork", {**record, "identity": folder_identity(staging)})
                failpoints.hit("fork.restore.after_record")
                rename_noreplace(staging, dest)
                fsync_dir(dest.parent)
            except BaseException:
                if _row(ws, fork_id).removed_ns is not None:  # no record yet: never restored
                    if os.path.lexists(staging):
                        _remove_folder(staging)
                    intent.unlink(missing_ok=True)
                raise
            intent.unlink(missing_ok=True)
    return _row(ws, fork_id)


def _row(ws: Workspace, fork_id: str) -> ForkRow:
    row = ws.store.fork_of(fork_id)
    assert row is not None
    return row
