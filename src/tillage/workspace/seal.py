"""Sealing: capture the folder, make every byte durable, then publish the snapshot.

Order is the crash-safety argument (INV-2, INV-5): objects are written and fsynced, then indexed,
then the snapshot is appended to the publication log; a crash before the log append leaves only
unreferenced objects, never a published snapshot that points at missing bytes.

With a watcher running, a seal asks it what changed since the view the path index reflects (its
token) before walking, and lists only those folders; a watcher that cannot vouch for the
interval, or none, means the full walk. The walk's result is the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from blake3 import blake3

from tillage.core import codec
from tillage.core.changes import Changes, folders_to_visit
from tillage.core.codec import Kind
from tillage.core.ids import snapshot_id
from tillage.core.models import Entry, FidelityNote, SnapshotRecord
from tillage.core.progress import ProgressFn
from tillage.errors import TillageError
from tillage.platform import clock, failpoints
from tillage.store.rows import SnapshotRow
from tillage.store.store import ObjectWriter, Store
from tillage.workspace import pathindex, watchstate
from tillage.workspace.attach import Workspace
from tillage.workspace.capture import Capture, Walker
from tillage.workspace.carry import remade_folders
from tillage.workspace.locks import workspace_lock
from tillage.workspace.nested import catalog_roots
from tillage.workspace.policy import POLICY_FILE, Policy
from tillage.workspace.shards import shard_of, shard_of_path
from tillage.workspace.trees import TREES


@dataclass(frozen=True)
class SealOptions:
    trigger: str
    label: str | None = None
    agent: str | None = None
    turn: str | None = None
    session: str | None = None
    # Publish nothing when the folder's tree equals the head snapshot's (a hook after a tool
    # that changed nothing, the watcher after churn that cancelled out).
    skip_unchanged: bool = False
    # A merge of a stored snapshot records it as the second parent (CONTRACT.md).
    merged_from: str | None = None


@dataclass(frozen=True)
class Sealed:
    """What a seal did: `row` is the new snapshot, or the head when `added` is False (nothing
    changed and SealOptions.skip_unchanged was set)."""

    row: SnapshotRow
    added: bool
    capture: Capture


def _store_dirs(ws: Workspace) -> frozenset[str]:
    """The folders never captured: the store's, when it lies inside the workspace (it must
    never seal itself), and those of the workspaces nested in it (nested.py; a nested one
    whose pointer is gone is known by the catalog, one with its `.tillage/` by the walk)."""
    home = ws.store.home.resolve()
    skipped = {str(ws.root / rel) for rel in catalog_roots(ws.store, ws.root)}
    if ws.root in home.parents:
        skipped.add(str(home))
    return frozenset(skipped)


def _policy(root: Path) -> tuple[Policy, bytes]:
    """The folder's policy and a fingerprint of it, from one read of the file: a delta walk
    re-uses folders captured under the same policy only."""
    try:
        data = (root / POLICY_FILE).read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return Policy([]), b""
    # blake3, which the seal has loaded already: hashlib costs 3-9 ms at start-up. (A path
    # index saved under blake2b's fingerprint is walked whole once, as for a changed policy.)
    return Policy.from_bytes(data), blake3(data).digest(length=16)


def _changes(ws: Workspace, token: str | None) -> Changes | None:
    """What the workspace's watcher saw change since `token`, asked before the walk (a change
    during the walk belongs to the next seal); None without a watcher that answers."""
    source = watchstate.change_source(ws)
    if source is None:
        return None
    try:
        return source.since(token)
    except (OSError, TillageError, ValueError):
        return None  # a watcher that fails to answer is no watcher: walk it all


def _walker(
    ws: Workspace,
    writer: ObjectWriter | None,
    *,
    keep_manifest: bool,
    on_progress: ProgressFn | None,
    manifest_scopes: Sequence[str] | None = None,
) -> tuple[Walker, Changes | None, bytes]:
    """A walk of the folder as it is now, against what the last seal saw of it: only the
    folders the watcher saw change (and those above them) when it can vouch for them."""
    index = pathindex.load(ws.store, ws.id)
    policy, fingerprint = _policy(ws.root)
    changes = _changes(ws, index.token)
    visit = None
    names: Mapping[str, frozenset[str]] | None = None
    if (
        changes is not None
        and changes.dirs is not None
        and index.token is not None
        and index.policy == fingerprint
    ):
        visit = folders_to_visit(changes.dirs)
        names = {d: changes.names.get(d, frozenset()) for d in visit if d not in changes.dirs}
        names.update(changes.names)
    walker = Walker(
        ws.root,
        policy,
        index,
        writer,
        ws.store.tmp_dir,
        clock.files_now_ns(),
        keep_manifest=keep_manifest,
        skip_dirs=_store_dirs(ws),
        on_progress=on_progress,
        visit=visit,
        names=names,
        store=ws.store,
        manifest_scopes=manifest_scopes,
    )
    return walker, changes, fingerprint


def scan_live(
    ws: Workspace,
    *,
    on_progress: ProgressFn | None = None,
    scopes: Sequence[str] | None = None,
) -> Capture:
    """Walks the folder computing IDs without storing anything (for diffs against live); with
    `scopes`, its manifest is whole only within them and along the way there."""
    walker, _changes_seen, _fingerprint = _walker(
        ws, None, keep_manifest=True, on_progress=on_progress, manifest_scopes=scopes
    )
    return walker.run()


def scan_bounded(ws: Workspace, *, walk_max: int, watched_max: int) -> tuple[Capture, bool] | None:
    """scan_live() when it is cheap, for a question asked often (`till status`): the watcher
    vouches for what changed since the last seal (only those folders are listed; the head held
    at most `watched_max` files, since the path index is read whole), or the head held at most
    `walk_max` files (the whole folder is walked). Returns the capture (no manifest: every
    folder's tree it made is left in TREES, so a walk beside a stored tree reads only the
    folders that differ) and whether the watcher vouched; None when neither holds, and then
    nothing was read but the head's row."""
    head = ws.store.head(ws.id)
    if head is None:
        return None
    if not watchstate.scan_is_bounded(ws, head.files, walk_max=walk_max, watched_max=watched_max):
        return None
    walker, _changes_seen, _fingerprint = _walker(ws, None, keep_manifest=False, on_progress=None)
    vouched = walker.visit is not None
    if not vouched and head.files > walk_max:
        return None
    walker.carry = False  # no index is saved from this walk: only its trees are asked for
    was = TREES.enabled
    TREES.enabled = True  # the live trees are stored nowhere else
    try:
        return walker.run(), vouched
    finally:
        TREES.enabled = was


def seal(
    ws: Workspace,
    options: SealOptions,
    *,
    on_progress: ProgressFn | None = None,
    manifest_out: dict[str, Entry] | None = None,
) -> SnapshotRow:
    """Seals the folder as it is now and publishes the snapshot; returns it (or the head, when
    nothing changed and `options.skip_unchanged` is set: see seal_result)."""
    return seal_result(ws, options, on_progress=on_progress, manifest_out=manifest_out).row


def seal_result(
    ws: Workspace,
    options: SealOptions,
    *,
    on_progress: ProgressFn | None = None,
    manifest_out: dict[str, Entry] | None = None,
) -> Sealed:
    """seal(), telling whether a snapshot was added (the caller's after-write step checks the
    budget once for the whole write: features/after_write.py)."""
    with workspace_lock(ws):
        return seal_result_locked(ws, options, on_progress=on_progress, manifest_out=manifest_out)


def seal_locked(
    ws: Workspace,
    options: SealOptions,
    *,
    on_progress: ProgressFn | None = None,
    manifest_out: dict[str, Entry] | None = None,
    manifest_scopes: Sequence[str] | None = None,
) -> SnapshotRow:
    """seal() for a caller that already holds the workspace lock; `manifest_out` is whole
    within `manifest_scopes` (and along the way there), when they are given."""
    return seal_result_locked(
        ws,
        options,
        on_progress=on_progress,
        manifest_out=manifest_out,
        manifest_scopes=manifest_scopes,
    ).row


def seal_result_locked(
    ws: Workspace,
    options: SealOptions,
    *,
    on_progress: ProgressFn | None = None,
    manifest_out: dict[str, Entry] | None = None,
    manifest_scopes: Sequence[str] | None = None,
) -> Sealed:
    """seal_result() for a caller that already holds the workspace lock."""
    store = ws.store
    # INV-14: from the first "does the store hold this?" to the publication, no gc may run.
    with store.sharing(), store.writer() as writer:
        walker, changes, fingerprint = _walker(
            ws,
            writer,
            keep_manifest=manifest_out is not None,
            on_progress=on_progress,
            manifest_scopes=manifest_scopes,
        )
        capture = walker.run()
        head = store.head(ws.id)
        if options.skip_unchanged and head is not None and head.tree == capture.root.hex():
            writer.commit()  # trees the head lacked (none, unless it was sealed otherwise)
            sealed = Sealed(head, False, capture)
        else:
            row = publish_capture(store, ws.id, writer, capture, options, head.id if head else None)
            sealed = Sealed(row, True, capture)
        if manifest_out is not None and capture.manifest is not None:
            manifest_out.update(capture.manifest)
        token = changes.token if changes is not None else None
        # Its hints name the head's objects, which no gc removes (the head keeps every byte).
        # Shards equal to the stored ones are not written again (pathindex.save): a
        # watcher's idle rescan over a large tree would otherwise rewrite megabytes a minute.
        pathindex.save(store, ws.id, _index_of(walker, token, fingerprint))
    return sealed


def _index_of(walker: Walker, token: str | None, policy: bytes) -> pathindex.PathIndex:
    """The path index a seal's walk leaves. Its dirty shards are those of the folders whose
    entries the walk made anew (those it looked at again, and those gone since); every shard
    when the last index was not one a seal stored whole (a landing's rows may lie outside its
    known folders)."""
    capture, prior = walker.result, walker.prior
    index = pathindex.PathIndex(
        capture.rows,
        capture.dirs,
        capture.folders,
        [(n.path, n.reason) for n in capture.notes],
        frozenset(capture.links),
        token,
        policy,
        generation=prior.generation,
        stamp=prior.stamp,
        shards=prior.shards,
        loaded_from=prior.loaded_from,
        count=prior.count,
    )
    if not prior.exact or not prior.generation:
        return index  # dirty None: every shard is written, and `exact` found anew
    remade = capture.remade
    if remade is None:
        remade = remade_folders(prior, capture.walked, capture.told, capture.dirs)
    count = index.count
    index.dirty = {shard_of(folder, count) for folder in (*remade, *capture.told)}
    index.dirty.update(shard_of_path(folder, count) for folder in remade)
    index.exact = True
    return index


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
    return publish_capture(store, workspace_id, writer, capture, options, head.id if head else None)


def publish_capture(
    store: Store,
    workspace_id: str,
    writer: ObjectWriter,
    capture: Capture,
    options: SealOptions,
    parent: str | None,
) -> SnapshotRow:
    """Publishes a capture as the workspace's next snapshot after `parent` (INV-2: the
    writer's objects are made durable first); a fork's first snapshot and `work`'s result
    publish through this too."""
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
        merged_from=options.merged_from,
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
