"""Snapshots a pack holds but the log no longer names: what a damaged or lost log leaves behind
(a lost line, a log emptied or replaced), and what a seal killed just before publishing left.
Their records carry everything the log repeated about them (codec.snapshot_summary), so they
are published again, and nothing sealed stays unreachable (INV-6)."""

from __future__ import annotations

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.errors import IntegrityError
from tillage.store.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection

    from tillage.core.models import SnapshotRecord


def lost_snapshots(
    store: Store, workspaces: Collection[str] | None
) -> list[tuple[int, str, SnapshotRecord]]:
    """(sealed_at_ns, ID, record) of every snapshot of one of `workspaces` (None: of any)
    whose record is in a pack that reads but in no log line, oldest first; one a gc removed
    or a purge dropped is not among them (its record waits in a pack for the sweep)."""
    rows = store.conn.execute(
        "SELECT id FROM objects WHERE kind = ? AND lower(hex(id)) NOT IN "
        "(SELECT id FROM snapshots) AND lower(hex(id)) NOT IN (SELECT snapshot FROM dropped)",
        (Kind.SNAPSHOT,),
    ).fetchall()
    # A purged timeline (`forget --purge`) is dropped on purpose: its records wait for the
    # sweep like a gc's removed ones, and are never published again (nor its sync timeline).
    purged = {r[0] for r in store.conn.execute("SELECT id FROM workspaces WHERE forgotten = 2")}
    found = []
    for (object_id,) in rows:
        try:
            record = codec.decode_snapshot(store.read(bytes(object_id)))
        except IntegrityError:
            continue
        if record.workspace.removesuffix(".sync") in purged:
            continue
        if workspaces is None or record.workspace in workspaces:
            found.append((record.sealed_at_ns, bytes(object_id).hex(), record))
    return sorted(found)


def republish(store: Store, workspaces: Collection[str]) -> int:
    """Publishes again every lost snapshot of `workspaces`; returns how many (their pins, if
    any, are not recoverable)."""
    found = lost_snapshots(store, workspaces)
    for _at, snapshot_hex, record in found:
        store.publish("snapshot", {"id": snapshot_hex, **codec.snapshot_summary(record)})
    return len(found)


def unclaimed(store: Store, fetched: Collection[str] = ()) -> dict[str, int]:
    """Workspace ID -> how many lost snapshots of it the packs hold, for every workspace the
    log does not record at all (its attach line lost with the rest): only its folder, whose
    pointer names it, can take that timeline back (`till watch` there). `fetched`: snapshots
    known to be a remote's, downloaded here (not counted)."""
    known = {r[0] for r in store.conn.execute("SELECT id FROM workspaces")}
    counts: dict[str, int] = {}
    for _at, snapshot_hex, record in lost_snapshots(store, None):
        if record.workspace not in known and snapshot_hex not in fetched:
            counts[record.workspace] = counts.get(record.workspace, 0) + 1
    return counts
