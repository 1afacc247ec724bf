"""Rewinding a folder to a snapshot, whole or by path: the verb's logic, planned then landed.

The present is sealed first (its ID is returned as `undo`); the plan keeps what the target's
own policy never captured and the paths whose bytes a gc dropped; the journal (journal/) then
lands it crash-safely (INV-7): staged and verified before the folder is touched, an intent,
atomic writes, one sync, the intent removed last. A rewind killed half-way is rolled forward by
the next command (recovery.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tillage.core.models import (
    Change,
    Entry,
)
from tillage.core.paths import parse
from tillage.core.progress import ProgressFn
from tillage.core.rewind_plan import plan_actions
from tillage.platform import clock
from tillage.store.rows import SnapshotRow
from tillage.workspace.attach import Workspace
from tillage.workspace.errors import FolderMovedError
from tillage.workspace.journal.landing import land, moved_since, remove_staging
from tillage.workspace.locks import using_store, workspace_lock
from tillage.workspace.nested import outside_nested
from tillage.workspace.policy import outside_policy, snapshot_policy
from tillage.workspace.seal import SealOptions, scan_live, seal_locked
from tillage.workspace.thinned import Missing, spare_missing
from tillage.workspace.timeline import still_there
from tillage.workspace.trees import flatten


@dataclass(frozen=True)
class RewindOutcome:
    target: SnapshotRow
    changes: tuple[Change, ...]
    applied: bool
    undo: str | None
    rescued: tuple[str, ...] = ()
    rescue: str | None = None
    # Hard links of the target put back as plain files: their first name is outside the scope.
    unlinked: tuple[str, ...] = ()
    # Paths whose bytes a gc dropped from the target: left as the folder holds them.
    missing: tuple[Missing, ...] = ()
    # The seal the landing ended with, when its caller asked for one (a pull's twin).
    completed: SnapshotRow | None = None


def normalize_scopes(paths: tuple[str, ...] | None) -> list[str] | None:
    """Parses --paths; None means the whole workspace."""
    if not paths:
        return None
    return sorted({parse(p) for p in paths})


@using_store
def preview(ws: Workspace, target: SnapshotRow, scopes: list[str] | None) -> RewindOutcome:
    """Returns what a rewind would change, touching nothing (`--dry-run`)."""
    still_there(ws, target)  # a gc that ran while this waited may have removed it
    live = scan_live(ws, scopes=scopes).manifest or {}
    want = flatten(ws.store, bytes.fromhex(target.tree), scopes)
    live = outside_policy(live, snapshot_policy(ws.store, want))
    want = outside_nested(ws.root, ws.store, want)  # another workspace's: never touched
    want, missing = spare_missing(ws.store, target.id, live, want)
    planned = plan_actions(live, want, scopes)
    return RewindOutcome(
        target,
        planned.changes,
        applied=False,
        undo=None,
        unlinked=planned.unlinked,
        missing=missing,
    )


@using_store
def apply(
    ws: Workspace,
    target: SnapshotRow,
    scopes: list[str] | None,
    on_progress: ProgressFn | None = None,
) -> RewindOutcome:
    """Rewinds the folder to `target` within `scopes`, sealing the present first."""
    still_there(ws, target)  # before the undo seal: a gc that ran meanwhile may have removed it
    with workspace_lock(ws):
        current: dict[str, Entry] = {}
        undo = seal_locked(
            ws,
            SealOptions(trigger="pre_rewind", label=f"before rewind to {target.id[:12]}"),
            manifest_out=current,
            manifest_scopes=scopes,
            on_progress=on_progress,
        )
        return apply_sealed(ws, target, scopes, current, undo, on_progress=on_progress)


def apply_sealed(
    ws: Workspace,
    target: SnapshotRow,
    scopes: list[str] | None,
    current: dict[str, Entry],
    undo: SnapshotRow,
    *,
    completion: Mapping[str, Any] | None = None,
    unmoved: bool = False,
    on_progress: ProgressFn | None = None,
) -> RewindOutcome:
    """The rest of a rewind, for a caller that holds the workspace lock and has just sealed the
    present as `undo` (its manifest `current`, within `scopes`). A sync pull decides on that
    seal and lands under the same lock: with `unmoved`, a folder that changed since the seal
    along what the rewind would write is FolderMovedError and nothing is written;
    `completion` (the intent's `seal` and `tell`) is made once the folder is landed, also by
    the command that finishes a landing a crash interrupted."""
    remove_staging(ws.root)  # left by a rewind killed before its intent: never applied
    # Only the scopes and the folders above them are planned: nothing else is read.
    want = flatten(ws.store, bytes.fromhex(target.tree), scopes)
    # What the target's own policy excluded, it knows nothing about: leave it alone.
    current = outside_policy(current, snapshot_policy(ws.store, want))
    want = outside_nested(ws.root, ws.store, want)  # another workspace's: never touched
    # Paths whose bytes a gc dropped keep their live copy (and are told, not failed on).
    want, missing = spare_missing(ws.store, target.id, current, want)
    planned = plan_actions(current, want, scopes)
    if unmoved:
        moved = moved_since(ws.root, current, planned.actions)
        if moved:
            raise FolderMovedError(moved)
    intent = {
        "op": "rewind",
        "workspace": ws.id,
        "target": target.id,
        "undo": undo.id,
        "scopes": scopes,
        "started_ns": clock.now_ns(),
        "pid": os.getpid(),
        **(completion or {}),
    }
    landed = land(ws, current, planned.actions, intent, on_progress=on_progress)
    return RewindOutcome(
        target,
        planned.changes,
        applied=True,
        undo=undo.id,
        rescued=landed.rescued,
        rescue=landed.rescue,
        unlinked=planned.unlinked,
        missing=missing,
        completed=landed.completed,
    )
