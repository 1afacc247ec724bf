"""Finding snapshots by ID or prefix within one workspace's timeline."""

from __future__ import annotations

import string

from tillage.errors import echo
from tillage.store.errors import BadSnapshotIdError, SnapshotAmbiguousError, SnapshotNotFoundError
from tillage.store.rows import SnapshotRow
from tillage.workspace.attach import Workspace

MIN_PREFIX = 6
_HEX = set(string.hexdigits.lower())


def resolve(ws: Workspace, ref: str) -> SnapshotRow:
    """Returns the snapshot `ref` names: a full ID or a unique prefix of at least 6 hex digits,
    in the workspace's own timeline first, then in its family's (forks and their parents)."""
    prefix = ref.strip().lower()
    if len(prefix) < MIN_PREFIX or len(prefix) > 64 or not set(prefix) <= _HEX:
        raise BadSnapshotIdError(
            f"{echo(ref)} is not a snapshot ID (64 hex characters, or a prefix of at least 6)"
        )
    matches = ws.store.snapshots_with_prefix(ws.id, prefix)
    if not matches and _in_family(ws):
        # Not in its own timeline: a snapshot of its family (a fork's base, the last state of
        # a removed fork) is named by ID as well.
        from tillage.workspace.family import members

        matches = ws.store.snapshots_with_prefix_in(members(ws.store, ws.id), prefix)
    if not matches:
        # What a pull brought and kept (a diverged one): `till merge --snapshot ID` lands it.
        matches = ws.store.snapshots_with_prefix(f"{ws.id}.sync", prefix)
    if not matches:
        raise not_found(ws, prefix, ref)
    if len(matches) > 1:
        raise SnapshotAmbiguousError(f"{echo(ref)} matches more than one snapshot")
    row = ws.store.snapshot(matches[0])
    assert row is not None
    return row


def not_found(ws: Workspace, snapshot_id: str, ref: str | None = None) -> SnapshotNotFoundError:
    """The not_found answer, saying so when a gc removed the snapshot (a full ID only: a prefix
    could name anything)."""
    if len(snapshot_id) == 64 and ws.store.was_dropped(snapshot_id):
        return SnapshotNotFoundError(
            f"snapshot {snapshot_id[:12]} was removed by gc (the retention schedule)",
            next_step="list what is kept with `till timeline`; `till retention` shows the "
            "schedule, and `till pin ID` keeps a snapshot through any gc",
        )
    return SnapshotNotFoundError(f"no snapshot matches {echo(ref or snapshot_id)}")


def still_there(ws: Workspace, target: SnapshotRow) -> None:
    """Raises not_found when a gc removed `target` since it was looked up (an operation that
    waited for the gc to finish)."""
    if ws.store.snapshot(target.id) is None:
        raise not_found(ws, target.id)


def _in_family(ws: Workspace) -> bool:
    return ws.store.fork_of(ws.id) is not None or bool(ws.store.forks_of(ws.id, removed=True))
