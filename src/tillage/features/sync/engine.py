"""Sync: a workspace's exact state to a remote and back, encrypted below the transport.

The design is docs/design/sync.md. In short: the remote is a repository (repository.py: a
master key each recovery key's key file opens, a sealed config); objects go up sealed into
padded packs (packs.py, transfer.py), exactly those the remote's index (remote_index.py) lacks,
and one index per push names them before the ref moves; a ref is one sealed document changed
by compare-and-swap under a lease; what this machine last synced is a `sync_ref` fact, which
decides whether a pull fast-forwards or diverged and whether a push would replace someone's
newer work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tillage.core import codec
from tillage.core.progress import ProgressFn
from tillage.crypto import RecoveryKey
from tillage.features.sync import remote_index, repository, transfer
from tillage.features.sync import seen as seen_refs  # (`seen` names local sets below)
from tillage.features.sync.errors import (
    NotARemoteError,
    PullFirstError,
    RefMissingError,
    RollbackError,
)
from tillage.features.sync.refs import Lease, RefState, doc_key, holds, lease_ns, write_ref
from tillage.features.sync.refs import read_ref as read_ref  # noqa: PLC0414 (for clone)
from tillage.features.sync.remotes import RemoteConfig, machine_id
from tillage.features.sync.repository import Opened
from tillage.platform import failpoints
from tillage.workspace.attach import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from tillage.remote.base import Remote
    from tillage.store.rows import SnapshotRow, SyncRefRow
    from tillage.store.store import Store

DEFAULT_REF = "main"
CONFIG = "config"


def sync_timeline(workspace_id: str) -> str:
    """The timeline (never attached) holding what a workspace pulled: found by ID, never the
    head of the folder."""
    return f"{workspace_id}.sync"


# -- the remote ---------------------------------------------------------------------------------


def open_for(config: RemoteConfig, env: Mapping[str, str], cwd: str) -> Remote:
    from tillage.remote.url import open_remote

    return open_remote(config.url, config.env(dict(env)), cwd)


def ensure_config(remote: Remote, key: RecoveryKey, *, create: bool) -> Opened:
    """Opens the remote with the recovery key (a wrong key is `integrity`, told first); with
    `create`, makes it in an empty place (features/sync/repository.py). Refs, segments and
    leases take their key from the answer: `doc_key(opened)`."""
    return repository.ensure(remote, key, create_missing=create)[0]


# -- objects ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pushed:
    uploaded_objects: int
    reused_objects: int
    uploaded_bytes: int


def _index_cache(store: Store, opened: Opened) -> Path:
    return remote_index.cache_folder(store.home, opened.repo)


def upload(
    store: Store,
    remote: Remote,
    opened: Opened,
    snapshot_id: str,
    keep: Callable[[], None] | None = None,
    on_progress: ProgressFn | None = None,
) -> Pushed:
    """Sends what the remote's index lacks of a snapshot's closure, in packs, then the index
    that names them (features/sync/transfer.py): durable before the ref can name them."""
    cache = _index_cache(store, opened)
    sent = transfer.send(store, remote, opened.master, snapshot_id, cache, keep, on_progress)
    return Pushed(sent.objects, sent.reused, sent.bytes)


def download(
    store: Store,
    remote: Remote,
    opened: Opened,
    snapshot_id: str,
    on_progress: ProgressFn | None = None,
) -> tuple[int, int]:
    """Fetches what the local store lacks of a snapshot's closure from the remote's packs,
    each object opened and proven against its ID before it is written; any failure discards
    everything fetched (nothing is written locally). Returns (objects, bytes) fetched."""
    index = remote_index.load(remote, opened.master, _index_cache(store, opened))
    source = transfer.BlobSource(remote, opened.master, index)
    return transfer.fetch_closure(store, source, snapshot_id, on_progress)


# -- push and pull ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushOutcome:
    snapshot: SnapshotRow
    ref: str
    pushed: Pushed
    moved: bool = True  # False: the ref already held this state, nothing was sent


def descends(store: Store, snapshot_id: str, ancestor: str, limit: int = 100_000) -> bool:
    """Tells whether `ancestor` is `snapshot_id` or reached from it by parents and merges."""
    stack: list[str] = [snapshot_id]
    seen: set[str] = set()
    while stack and len(seen) < limit:
        current = stack.pop()
        if current == ancestor:
            return True
        if current in seen:
            continue
        seen.add(current)
        row = store.snapshot(current)
        if row is not None:
            stack.extend(p for p in (row.parent, row.merged_from) if p)
    return False


def push(
    ws: Workspace,
    config: RemoteConfig,
    env: Mapping[str, str],
    cwd: str,
    ref: str,
    *,
    takeover: bool = False,
    accept_rollback: bool = False,
    on_progress: ProgressFn | None = None,
) -> PushOutcome:
    """Seals the folder, then sends it to `ref` (see the module docstring). A ref older than
    this machine saw it is refused (`sync.rollback`) before anything is written, unless
    `accept_rollback`: then the push goes on from the ref as the remote holds it.
    `on_progress` hears the seal, then the objects uploaded."""
    from tillage.workspace.seal import SealOptions, seal_result

    store = ws.store
    head = seal_result(
        ws,
        SealOptions(
            trigger="sync", label=f"sealed to push to {config.name}/{ref}", skip_unchanged=True
        ),
        on_progress=on_progress,
    ).row
    remote = open_for(config, env, cwd)
    try:
        opened = _ensure_pushable(store, remote, config, ref, accept_rollback)
        key = doc_key(opened)
        # Before the lease: a ref rolled back or damaged is refused with nothing written.
        seen_refs.read(store, remote, key, ref, config.name, accept_rollback=accept_rollback)
        lease = Lease(remote, key, ref, machine_id(store), lease_ns(env))
        lease.acquire(takeover=takeover)
        try:
            current = seen_refs.read(
                store, remote, key, ref, config.name, accept_rollback=accept_rollback
            )
            last = store.sync_ref(ws.id, config.name, ref)
            if _nothing_new(store, head, current, last):
                # The folder is what was last synced: moving the ref to this machine's twin of
                # it would make each side push the other's state back, forever.
                return PushOutcome(head, ref, Pushed(0, 1, 0), moved=False)
            if current is not None and current.snapshot != head.id:
                known = last is not None and last.snapshot == current.snapshot
                if not known and not descends(store, head.id, current.snapshot):
                    raise PullFirstError(
                        f"ref {ref!r} of {config.name} moved to {current.snapshot[:12]}, which "
                        "this machine has not pulled"
                    )
            with store.sharing():
                pushed = upload(store, remote, opened, head.id, lease.keep, on_progress)
            expect = current.token if current else None
            base = current
            prior = seen_refs.continued(store, remote, ref, current)
            if prior is not None and descends(store, head.id, prior.snapshot):
                # An accepted rollback this head holds the newer work of: the ref goes on from
                # what this machine saw, so that work stays in its history for the others.
                base = prior
            machine = machine_id(store)
            written = write_ref(remote, key, ref, head.id, base, machine, expect=expect)
            if written is None:
                raise PullFirstError(f"another push to ref {ref!r} landed first")
            seen_refs.synced(store, remote, written)
            _record(store, ws, config, ref, head.id, head.id)
        finally:
            lease.release()
    finally:
        remote.close()
    return PushOutcome(head, ref, pushed)


def _ensure_pushable(
    store: Store, remote: Remote, config: RemoteConfig, ref: str, accept_rollback: bool
) -> Opened:
    """Opens the remote with its key, making the remote in an empty place, but not on one this
    machine saw refs on: that remote lost everything (a wiped bucket, a disk not mounted on
    its mount point), which is a rollback, refused unless accepted."""
    create = accept_rollback or not seen_refs.knows(store, remote)
    try:
        return ensure_config(remote, config.key, create=create)
    except NotARemoteError:
        if create:
            raise  # a place holding something else: never made a remote
        raise RollbackError(
            f"{config.name} ({remote.url}) holds nothing (no key check), though this machine "
            f"saw ref {ref!r} there: it was emptied, or is not the place it was; nothing was "
            "written",
            next_step="if it is a disk that is not mounted, mount it and push again; if the "
            "remote was emptied on purpose, repeat with --accept-rollback to make it anew",
            details={"ref": ref, "remote": config.name},
        ) from None


def _nothing_new(
    store: Store, head: SnapshotRow, current: RefState | None, last: SyncRefRow | None
) -> bool:
    """Tells whether the ref is what this machine last synced and the folder still holds it."""
    if current is None or last is None or current.snapshot != last.snapshot:
        return False
    if head.id in (last.local, last.snapshot):
        return True
    synced = store.snapshot(last.snapshot)
    return synced is not None and synced.tree == head.tree


@dataclass(frozen=True)
class PullOutcome:
    disposition: str  # up_to_date, fast_forwarded, bootstrapped, diverged
    local: SnapshotRow | None
    remote_snapshot: str
    fetched_objects: int
    fetched_bytes: int
    undo: str | None = None  # the folder before a pull that landed (a rewind's undo)
    rescued: tuple[str, ...] = ()  # files a concurrent writer changed while it landed
    rescue: str | None = None  # the snapshot holding them
    moved: tuple[str, ...] = ()  # diverged: paths edited while the pull decided


def _publish_incoming(store: Store, ws: Workspace, snapshot_id: str, parent: str | None) -> None:
    """Makes a pulled snapshot known here, in the workspace's sync timeline (never its head),
    its parent the last snapshot this machine synced from the ref."""
    if store.snapshot(snapshot_id) is not None:
        return
    record = codec.decode_snapshot(store.read(bytes.fromhex(snapshot_id)))
    body = {"id": snapshot_id, **codec.snapshot_summary(record)}
    body.update({"workspace": sync_timeline(ws.id), "parent": parent, "trigger": "sync"})
    store.publish("snapshot", body)


def pull(
    ws: Workspace,
    config: RemoteConfig,
    env: Mapping[str, str],
    cwd: str,
    ref: str,
    *,
    bootstrap: bool = False,
    accept_rollback: bool = False,
    on_progress: ProgressFn | None = None,
) -> PullOutcome:
    """Brings `ref` here: fast-forwards the folder when it has not changed since the last sync
    and the remote descends from it; otherwise keeps the incoming snapshot and says diverged.
    `on_progress` hears the objects fetched, the seal before landing, then the landing."""
    from tillage.workspace.locks import workspace_lock

    store = ws.store
    remote = open_for(config, env, cwd)
    try:
        opened = ensure_config(remote, config.key, create=False)
        key = doc_key(opened)
        last = store.sync_ref(ws.id, config.name, ref)
        at = seen_refs.seen_at(store, remote, ref, last.snapshot) if last else None
        current = seen_refs.read(
            store, remote, key, ref, config.name, accept_rollback=accept_rollback
        )
        if current is None:
            raise RefMissingError(f"nothing was pushed to ref {ref!r} of {config.name}")
        incoming = current.snapshot
        if last is not None and last.snapshot == incoming:
            return PullOutcome("up_to_date", store.head(ws.id), incoming, 0, 0)
        with store.sharing():
            fetched, size = download(store, remote, opened, incoming, on_progress)
            _publish_incoming(store, ws, incoming, last.snapshot if last else None)
        # Whether the ref moved here from what this machine last synced: its history (recent
        # heads, then its segments from the version this machine saw that one at) holds it.
        held = last is not None and holds(remote, key, current, last.snapshot, at)
    finally:
        remote.close()
    failpoints.hit("sync.pull.fetched")
    # One lock from the seal the decision reads to the last byte landed, and the landing
    # refuses a folder that moved since that seal: an edit made meanwhile is never overwritten.
    with workspace_lock(ws), store.sharing():
        held_for = last.snapshot if last is not None else None
        outcome = _decide_and_land(
            ws, config, ref, current, bootstrap, fetched, size, (held_for, held), on_progress
        )
    if outcome.disposition != "diverged":
        seen_refs.synced(store, remote, current)  # where the next pull's history walk may start
    return outcome


def _decide_and_land(
    ws: Workspace,
    config: RemoteConfig,
    ref: str,
    current: RefState,
    bootstrap: bool,
    fetched: int,
    size: int,
    held: tuple[str | None, bool] = (None, False),
    on_progress: ProgressFn | None = None,
) -> PullOutcome:
    """The pull's decision and landing (the caller holds the workspace lock). `held` is
    (snapshot, whether the ref's history holds it), read from the remote for what was last
    synced when the pull began."""
    from tillage.core.models import Entry
    from tillage.workspace import rewind
    from tillage.workspace.errors import FolderMovedError
    from tillage.workspace.seal import SealOptions, seal_result_locked

    store = ws.store
    incoming = current.snapshot
    seen: dict[str, Entry] = {}
    head = seal_result_locked(
        ws,
        SealOptions(trigger="manual", label="before pull", skip_unchanged=True),
        manifest_out=seen,
        on_progress=on_progress,
    ).row
    last = store.sync_ref(ws.id, config.name, ref)  # again: another pull may have landed
    target = store.snapshot(incoming)
    assert target is not None
    if head.tree == target.tree or descends(store, head.id, incoming):
        # The folder holds it already: a pull killed after its rewind, a merge of it made
        # here, this machine's own push whose fact was lost, or the same edit on both sides.
        # Its local twin is the head only when the head is exactly it: a merge that holds
        # more is still to be pushed.
        local = head.id if head.tree == target.tree else incoming
        _record(store, ws, config, ref, incoming, local)
        return PullOutcome("up_to_date", head, incoming, fetched, size)
    clean = False
    if last is not None:
        twin = store.snapshot(last.local)
        clean = twin is not None and twin.tree == head.tree
    # The ref's history, segments included, as read for the last sync; for one another pull
    # recorded meanwhile, the document's own recent heads.
    known, holds_it = held
    if last is None:
        in_history = False
    elif last.snapshot == known:
        in_history = holds_it
    else:
        in_history = last.snapshot in current.history
    forward = last is not None and clean and in_history
    if not (forward or bootstrap):
        return PullOutcome("diverged", head, incoming, fetched, size)
    failpoints.hit("sync.pull.decided")
    # The landing's completion is journaled with it: the local twin (the incoming tree itself,
    # not a walk: an edit made while it landed is the next seal's change) and the sync fact
    # naming it, made once, by this command or by the one that finishes a killed pull.
    completion = {
        "seal": {
            "trigger": "sync",
            "label": f"pulled {incoming[:12]} from {config.name}/{ref}",
            "merged_from": incoming,
            "tree_of": incoming,
        },
        "tell": {
            "how": "fact",
            "kind": "sync_ref",
            "body": {
                "workspace": ws.id,
                "remote": config.name,
                "ref": ref,
                "snapshot": incoming,
            },
            "result_as": "local",
        },
    }
    try:
        landed = rewind.apply_sealed(
            ws,
            target,
            None,
            seen,
            head,
            completion=completion,
            unmoved=True,
            on_progress=on_progress,
        )
    except FolderMovedError as moved:
        return PullOutcome("diverged", head, incoming, fetched, size, moved=moved.paths)
    assert landed.completed is not None
    return PullOutcome(
        "fast_forwarded" if forward else "bootstrapped",
        landed.completed,
        incoming,
        fetched,
        size,
        undo=head.id,
        rescued=landed.rescued,
        rescue=landed.rescue,
    )


def land_clone(ws: Workspace, config: RemoteConfig, ref: str, incoming: str) -> SnapshotRow:
    """A clone's first landing, made before its folder is attached (features/sync/clone.py
    wrote the folder from `incoming` already): the incoming snapshot in the sync timeline, its
    local twin (the incoming tree itself) as the workspace's first snapshot, and the sync fact.
    No seal, no rewind."""
    from tillage.workspace.locks import workspace_lock
    from tillage.workspace.seal import SealOptions, publish_tree, snapshot_record

    store = ws.store
    _publish_incoming(store, ws, incoming, None)
    target = store.snapshot(incoming)
    assert target is not None
    notes = list(snapshot_record(store, target.id).fidelity)
    label = f"cloned {incoming[:12]} from {config.name}/{ref}"
    options = SealOptions(trigger="sync", label=label, merged_from=target.id)
    with workspace_lock(ws), store.writer() as writer:
        landed = publish_tree(
            store,
            ws.id,
            writer,
            bytes.fromhex(target.tree),
            target.files,
            target.bytes,
            notes,
            options,
        )
    _record(store, ws, config, ref, incoming, landed.id)
    return landed


def _record(
    store: Store, ws: Workspace, config: RemoteConfig, ref: str, snapshot: str, local: str
) -> None:
    store.publish(
        "sync_ref",
        {
            "workspace": ws.id,
            "remote": config.name,
            "ref": ref,
            "snapshot": snapshot,
            "local": local,
        },
    )
