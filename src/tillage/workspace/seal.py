"""Sealing: capture the folder, make every byte durable, then publish the snapshot.

Order is the crash-safety argument (INV-2, INV-5): objects are written and fsynced, then indexed,
then the snapshot is appended to the publication log; a crash before the log append leaves only
unreferenced objects, never a published snapshot that points at missing bytes.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.core.ids import snapshot_id
from tillage.core.models import Entry, FidelityNote, SnapshotRecord
from tillage.core.progress import ProgressFn
from tillage.platform import clock, failpoints
from tillage.platform.locks import file_lock
from tillage.store.store import ObjectWriter, SnapshotRow, Store
from tillage.workspace import pathindex
from tillage.workspace.attach import Workspace
from tillage.workspace.capture import Capture, Walker
from tillage.workspace.policy import Policy


@dataclass(frozen=True)
class SealOptions:
    trigger: str
    label: str | None = None
    agent: str | None = None
    turn: str | None = None
    session: str | None = None


def workspace_lock(ws: Workspace, *, timeout: float = 30.0) -> AbstractContextManager[None]:
    """The lock that serialises changes to one workspace's folder and timeline."""
    return file_lock(
        ws.store.locks_dir / f"ws-{ws.id}.lock", timeout=timeout, what="this workspace"
    )


def _store_dirs(ws: Workspace) -> frozenset[str]:
    """The store's folder, when it lies inside the workspace (it must never seal itself)."""
    home = ws.store.home.resolve()
    return frozenset({str(home)}) if ws.root in home.parents else frozenset()


def _walker(
    ws: Workspace,
    writer: ObjectWriter | None,
    *,
    keep_manifest: bool,
    on_progress: ProgressFn | None,
) -> Walker:
    """A walk of the folder as it is now, against what the last seal saw of it."""
    return Walker(
        ws.root,
        Policy.load(ws.root),
        pathindex.load(ws.store, ws.id),
        writer,
        ws.store.tmp_dir,
        clock.now_ns(),
        keep_manifest=keep_manifest,
        skip_dirs=_store_dirs(ws),
        on_progress=on_progress,
    )


def scan_live(ws: Workspace, *, on_progress: ProgressFn | None = None) -> Capture:
    """Walks the folder computing IDs without storing anything (for diffs against live)."""
    return _walker(ws, None, keep_manifest=True, on_progress=on_progress).run()


def seal(
    ws: Workspace,
    options: SealOptions,
    *,
    on_progress: ProgressFn | None = None,
    manifest_out: dict[str, Entry] | None = None,
) -> SnapshotRow:
    """Seals the folder as it is now and publishes the snapshot; returns it."""
    with workspace_lock(ws):
        return seal_locked(ws, options, on_progress=on_progress, manifest_out=manifest_out)


def seal_locked(
    ws: Workspace,
    options: SealOptions,
    *,
    on_progress: ProgressFn | None = None,
    manifest_out: dict[str, Entry] | None = None,
) -> SnapshotRow:
    """seal() for a caller that already holds the workspace lock."""
    store = ws.store
    with store.writer() as writer:
        walker = _walker(
            ws, writer, keep_manifest=manifest_out is not None, on_progress=on_progress
        )
        capture = walker.run()
        head = store.head(ws.id)
        row = _publish(store, ws.id, writer, capture, options, head.id if head else None)
    if manifest_out is not None and capture.manifest is not None:
        manifest_out.update(capture.manifest)
    pathindex.save(store, ws.id, pathindex.PathIndex(capture.rows, capture.dirs))
    return row


def publish_tree(
    store: Store,
    workspace_id: str,
    writer: ObjectWriter,
    root: bytes,
    files: int,
    size: int,
    notes: list[FidelityNote],
    options: SealOptions,
) -> SnapshotRow:
    """Publishes a snapshot of an already-written tree (used by rewind's rescue)."""
    capture = Capture(root=root, files=files, total_bytes=size, notes=notes)
    head = store.head(workspace_id)
    return _publish(store, workspace_id, writer, capture, options, head.id if head else None)


def _publish(
    store: Store,
    workspace_id: str,
    writer: ObjectWriter,
    capture: Capture,
    options: SealOptions,
    parent: str | None,
) -> SnapshotRow:
    record = SnapshotRecord(
        workspace=workspace_id,
        tree=capture.root.hex(),
        parent=parent,
        sealed_at_ns=clock.now_ns(),
        trigger=options.trigger,
        label=options.label,
        files=capture.files,
        bytes=capture.total_bytes,
        grade="partial" if capture.notes else "exact",
        agent=options.agent,
        turn=options.turn,
        session=options.session,
        fidelity=tuple(capture.notes),
    )
    encoded = codec.encode_snapshot(record)
    sid = snapshot_id(encoded)
    writer.put(Kind.SNAPSHOT, sid, encoded)
    writer.commit()  # INV-2: every byte the snapshot reaches is durable before it is published
    failpoints.hit("seal.before_publish")
    body = {"id": sid.hex(), **codec.snapshot_summary(record)}
    store.publish("snapshot", body)
    failpoints.hit("seal.after_publish")
    found = store.snapshot(sid.hex())
    assert found is not None
    return found


def snapshot_record(store: Store, snapshot_hex: str) -> SnapshotRecord:
    """Reads a snapshot's own record (with its fidelity notes) from the store."""
    return codec.decode_snapshot(store.read(bytes.fromhex(snapshot_hex)))
