"""Sync: a workspace's exact state to a remote and back, encrypted below the transport.

The design is docs/design/sync.md. In short: objects go up bottom-up, sealed under keyed names
(a tree on the remote means its whole closure is there, so an incremental push descends only
into what the remote lacks); a ref is one sealed document changed by compare-and-swap under a
lease; what this machine last synced is a `sync_ref` fact, which decides whether a pull
fast-forwards or diverged and whether a push would replace someone's newer work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.crypto import (
    RecoveryKey,
    key_check,
    name_of,
    open_object,
    seal_object,
    verify_key_check,
)
from tillage.errors import IntegrityError
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
from tillage.platform import failpoints
from tillage.remote.errors import RemoteMissingError
from tillage.workspace.attach import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from tillage.remote.base import Remote
    from tillage.store.rows import SnapshotRow, SyncRefRow
    from tillage.store.store import Store

DEFAULT_REF = "main"
CONFIG = "config"
BATCH = 1000
PUT_THREADS = 4


def sync_timeline(workspace_id: str) -> str:
    """The timeline (never attached) holding what a workspace pulled: found by ID, never the
    head of the folder."""
    return f"{workspace_id}.sync"


# -- the remote ---------------------------------------------------------------------------------


def open_for(config: RemoteConfig, env: Mapping[str, str], cwd: str) -> Remote:
    from tillage.remote.url import open_remote

    return open_remote(config.url, config.env(dict(env)), cwd)


def ensure_config(remote: Remote, key: RecoveryKey, *, create: bool) -> bool:
    """Checks the remote's key check (a wrong key is `integrity`, told first); with `create`,
    makes it on an empty remote. True when it was created now."""
    try:
        data = remote.get(CONFIG)
    except RemoteMissingError:
        if not create:
            raise NotARemoteError(
                f"{remote.url} holds no tillage remote (no key check at its root)"
            ) from None
        if remote.write_if(CONFIG, key_check(key), None):
            return True
        data = remote.get(CONFIG)  # another machine made it first: it must be our key
    verify_key_check(key, data)
    return False


# -- objects ------------------------------------------------------------------------------------


def _children(store: Store, object_id: bytes, kind: int) -> list[tuple[bytes, int]]:
    """The objects a stored object reaches directly (codec.children; a chunk is not read)."""
    if kind == Kind.CHUNK:
        return []
    return codec.children(store.read(object_id), kind)


@dataclass(frozen=True)
class Pushed:
    uploaded_objects: int
    reused_objects: int
    uploaded_bytes: int


def upload(
    store: Store,
    remote: Remote,
    key: RecoveryKey,
    snapshot_id: str,
    keep: Callable[[], None] | None = None,
) -> Pushed:
    """Sends a snapshot's closure, bottom-up: what the remote lacks, children before parents,
    so a tree there means everything below it is there too."""

    def name(oid: bytes) -> str:
        return name_of(key, "object", oid.hex())

    missing: dict[bytes, list[bytes]] = {}  # an object the remote lacks -> its children
    seen: set[bytes] = set()
    reused = 0
    root = bytes.fromhex(snapshot_id)
    level = [(root, int(Kind.SNAPSHOT))]
    while level:
        fresh = [(oid, kind) for oid, kind in level if oid not in seen]
        seen.update(oid for oid, _k in fresh)
        present: set[str] = set()
        for start in range(0, len(fresh), BATCH):
            present |= remote.exists([name(oid) for oid, _k in fresh[start : start + BATCH]])
        nxt: list[tuple[bytes, int]] = []
        for oid, kind in fresh:
            if name(oid) in present:
                reused += 1  # with everything below it
                continue
            children = _children(store, oid, kind)
            missing[oid] = [child for child, _k in children]
            nxt.extend(children)
        level = nxt
    sent = 0
    from concurrent.futures import ThreadPoolExecutor

    def send(oid: bytes) -> int:
        sealed = seal_object(key, oid, store.read_record(oid))
        remote.put(name(oid), sealed)
        return len(sealed)

    # Wave by wave (every object after all it reaches), several puts at once within a wave:
    # a remote's puts are mostly waiting (a durable file, a request), and the order that keeps
    # a cut push harmless holds between waves.
    with ThreadPoolExecutor(PUT_THREADS, thread_name_prefix="tillage-push") as pool:
        for wave in _waves(_children_first(root, missing), missing):
            sent += sum(pool.map(send, wave))
            if keep is not None:
                keep()
    return Pushed(len(missing), reused, sent)


def _waves(order: list[bytes], missing: dict[bytes, list[bytes]]) -> list[list[bytes]]:
    """`order` (children first) cut into waves by height: an object's wave comes after the
    waves of every missing object below it."""
    height: dict[bytes, int] = {}
    for oid in order:
        below = [height[c] for c in missing[oid] if c in height]
        height[oid] = 1 + max(below) if below else 0
    waves: list[list[bytes]] = [[] for _ in range(max(height.values(), default=-1) + 1)]
    for oid in order:
        waves[height[oid]].append(oid)
    return waves


def _children_first(root: bytes, missing: dict[bytes, list[bytes]]) -> list[bytes]:
    """The objects to send, each after every missing object below it (an iterative post-order:
    a push cut anywhere never leaves a tree on the remote without what it reaches, since the
    next push trusts a tree it finds there)."""
    order: list[bytes] = []
    done: set[bytes] = set()
    if root not in missing:
        return order
    stack: list[tuple[bytes, int]] = [(root, 0)]
    while stack:
        oid, i = stack.pop()
        children = missing[oid]
        while i < len(children) and (children[i] in done or children[i] not in missing):
            i += 1
        if i < len(children):
            stack.append((oid, i + 1))
            child = children[i]
            done.add(child)  # entered now; it is emitted after its own children
            stack.append((child, 0))
            continue
        order.append(oid)
    return order


def download(store: Store, remote: Remote, key: RecoveryKey, snapshot_id: str) -> tuple[int, int]:
    """Fetches what the local store lacks of a snapshot's closure, each object opened and
    proven against its ID before it is written; any failure discards everything fetched
    (nothing is written locally). Returns (objects, bytes) fetched."""
    from tillage.store.packs import decode_record

    fetched = 0
    size = 0
    with store.writer() as writer:
        level = [(bytes.fromhex(snapshot_id), int(Kind.SNAPSHOT))]
        seen: set[bytes] = set()
        while level:
            fresh = [(oid, kind) for oid, kind in level if oid not in seen]
            seen.update(oid for oid, _k in fresh)
            local = store.locations([oid for oid, _k in fresh])
            nxt: list[tuple[bytes, int]] = []
            for oid, kind in fresh:
                if oid not in local:
                    try:
                        data = remote.get(name_of(key, "object", oid.hex()))
                    except RemoteMissingError:
                        raise IntegrityError(
                            f"the remote lacks object {oid.hex()[:12]} of snapshot "
                            f"{snapshot_id[:12]}",
                            next_step="push again from a machine that holds that snapshot "
                            "(a push sends what the remote lacks); this store is unchanged",
                        ) from None
                    record = open_object(key, oid, data)
                    got_kind, _id, raw = decode_record(record, oid)
                    if got_kind != kind:
                        raise IntegrityError(f"object {oid.hex()[:12]} is not what it names")
                    writer.put(got_kind, oid, raw)
                    fetched += 1
                    size += len(data)
                    if kind in (Kind.SNAPSHOT, Kind.TREE, Kind.BLOB):
                        nxt.extend(codec.children(raw, kind))
                    continue
                if kind in (Kind.SNAPSHOT, Kind.TREE, Kind.BLOB):
                    nxt.extend(_children(store, oid, kind))
            level = nxt
        writer.commit()  # INV-2: durable before anything names it
    return fetched, size


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
) -> PushOutcome:
    """Seals the folder, then sends it to `ref` (see the module docstring). A ref older than
    this machine saw it is refused (`sync.rollback`) before anything is written, unless
    `accept_rollback`: then the push goes on from the ref as the remote holds it."""
    from tillage.workspace.seal import SealOptions, seal_result

    store = ws.store
    head = seal_result(
        ws,
        SealOptions(
            trigger="sync", label=f"sealed to push to {config.name}/{ref}", skip_unchanged=True
        ),
    ).row
    remote = open_for(config, env, cwd)
    try:
        _ensure_pushable(store, remote, config, ref, accept_rollback)
        key = doc_key(config)
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
                pushed = upload(store, remote, config.key, head.id, lease.keep)
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
) -> None:
    """Checks the remote's key, making its key check on an empty remote, but not on one this
    machine saw refs on: that remote lost everything (a wiped bucket, a disk not mounted on
    its mount point), which is a rollback, refused unless accepted."""
    try:
        ensure_config(
            remote, config.key, create=accept_rollback or not seen_refs.knows(store, remote)
        )
    except NotARemoteError:
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
) -> PullOutcome:
    """Brings `ref` here: fast-forwards the folder when it has not changed since the last sync
    and the remote descends from it; otherwise keeps the incoming snapshot and says diverged."""
    from tillage.workspace.locks import workspace_lock

    store = ws.store
    remote = open_for(config, env, cwd)
    try:
        ensure_config(remote, config.key, create=False)
        key = doc_key(config)
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
            fetched, size = download(store, remote, config.key, incoming)
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
            ws, config, ref, current, bootstrap, fetched, size, (held_for, held)
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
            ws, target, None, seen, head, completion=completion, unmoved=True
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
