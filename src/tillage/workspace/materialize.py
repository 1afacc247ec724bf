"""A stored snapshot written into a fresh folder (`fork --at`, bisect probes, `work`), and a
planned change applied to a disposable copy (a merge check's scratch folder): the journal's
applier without a journal, since nothing there needs to survive a crash."""

from __future__ import annotations

import os
from pathlib import Path

from tillage.core.models import Entry
from tillage.core.rewind_plan import plan_actions
from tillage.store.rows import SnapshotRow
from tillage.store.store import Store
from tillage.workspace.attach import Workspace
from tillage.workspace.capture import settled
from tillage.workspace.journal.applier import Applier
from tillage.workspace.locks import using_store
from tillage.workspace.pathindex import Row
from tillage.workspace.trees import flatten


def materialize(store: Store, snapshot: SnapshotRow, dest: Path) -> dict[str, Row]:
    """Writes the stored snapshot into the new folder `dest` (its parent must exist), byte-
    exact, every object verified before a byte is written; returns the path-index rows of
    what it wrote (racily-clean ones marked so that they are read again)."""
    with store.sharing():  # INV-14: no gc removes what it is reading
        return _materialize(store, snapshot, dest)


def _materialize(store: Store, snapshot: SnapshotRow, dest: Path) -> dict[str, Row]:
    os.mkdir(dest, 0o755)
    want = flatten(store, bytes.fromhex(snapshot.tree))
    planned = plan_actions({}, want, None)
    applier = Applier(Workspace("materialize", dest, store), {})
    applier.stage(planned.actions)
    applier.run(planned.actions)
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
