"""Sync: a workspace's exact state to a remote and back, encrypted below the transport.

The design is docs/design/sync.md. In short: objects go up bottom-up, sealed under keyed names
(a tree on the remote means its whole closure is there, so an incremental push descends only
into what the remote lacks); a ref is one sealed document changed by compare-and-swap under a
lease; what this machine last synced is a `sync_ref` fact, which decides whether a pull
fast-forwards or diverged and whether a push would replace someone's newer work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.crypto import (
    RecoveryKey,
    key_check,
    name_of,
    open_document,
    open_object,
    seal_document,
    seal_object,
    verify_key_check,
)
from tillage.errors import IntegrityError
from tillage.features.sync.errors import (
    LeaseExpiredError,
    LeaseHeldError,
    NotARemoteError,
    PullFirstError,
    RefMissingError,
)
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
HISTORY = 1000  # snapshots a ref remembers: a pull fast-forwards from any of them
LEASE_NS = 10 * 60 * 1_000_000_000
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


@dataclass(frozen=True)
class RefState:
    snapshot: str
    history: tuple[str, ...]
    token: str


def read_ref(remote: Remote, key: RecoveryKey, ref: str) -> RefState | None:
    name = name_of(key, "ref", ref)
    found = remote.read_versioned(name)
    if found is None:
        return None
    doc = open_document(key, name, found.data)
    if doc.get("ref") != ref or not isinstance(doc.get("snapshot"), str):
        raise IntegrityError(f"the remote's head of ref {ref!r} does not hold a snapshot")
    return RefState(doc["snapshot"], tuple(doc.get("history") or ()), found.token)


def lease_ns(env: Mapping[str, str]) -> int:
    """How long a lease holds without renewal: `TILLAGE_SYNC_LEASE_SECONDS` (tests, slow
    links), else ten minutes."""
    text = env.get("TILLAGE_SYNC_LEASE_SECONDS", "")
    return int(float(text) * 1_000_000_000) if text.replace(".", "", 1).isdigit() else LEASE_NS


class Lease:
    """The single writer of one ref: created, renewed by its holder (also while a long upload
    runs), taken over only when it expired and the caller said --takeover, and released by a
    compare-and-swap to a `released` document (never a delete that could remove a takeover)."""

    def __init__(
        self, remote: Remote, key: RecoveryKey, ref: str, holder: str, ttl_ns: int = LEASE_NS
    ) -> None:
        self.remote, self.key, self.ref, self.holder = remote, key, ref, holder
        self.name = name_of(key, "lease", ref)
        self.ttl_ns = ttl_ns
        self.token: str | None = None
        self.renewed_ns = 0

    def _doc(self, *, released: bool = False) -> bytes:
        # The real clock: a lease is read on other machines, whatever TILLAGE_NOW says here.
        now = time.time_ns()
        doc = {
            "ref": self.ref,
            "holder": self.holder,
            "expires_ns": 0 if released else now + self.ttl_ns,
            "released": released,
        }
        return seal_document(self.key, self.name, doc)

    def _write(self, expect: str | None, *, released: bool = False) -> bool:
        data = self._doc(released=released)
        if not self.remote.write_if(self.name, data, expect):
            return False
        found = self.remote.read_versioned(self.name)
        self.token = found.token if found is not None and found.data == data else None
        self.renewed_ns = time.time_ns()
        return True

    def acquire(self, *, takeover: bool) -> None:
        for _ in range(3):
            found = self.remote.read_versioned(self.name)
            if found is None:
                if self._write(None):
                    return
                continue
            held = open_document(self.key, self.name, found.data)
            free = bool(held.get("released")) or held.get("holder") == self.holder
            expired = int(held.get("expires_ns", 0)) < time.time_ns()
            if not free and not expired:
                raise LeaseHeldError(f"another machine is pushing to ref {self.ref!r}")
            if not free and not takeover:
                raise LeaseExpiredError(
                    f"ref {self.ref!r} is leased to another machine whose push never finished"
                )
            if self._write(found.token):
                return
        raise LeaseHeldError(f"another machine is pushing to ref {self.ref!r}")

    def keep(self) -> None:
        """Renews the lease when a third of its time has gone (a long upload keeps it)."""
        if self.token is None or time.time_ns() - self.renewed_ns < self.ttl_ns // 3:
            return
        if not self._write(self.token):
            raise LeaseHeldError(f"ref {self.ref!r} was taken over while this push ran")

    def release(self) -> None:
        if self.token is not None:
            self._write(self.token, released=True)


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
) -> PushOutcome:
    """Seals the folder, then sends it to `ref` (see the module docstring)."""
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
        ensure_config(remote, config.key, create=True)
        lease = Lease(remote, config.key, ref, machine_id(store), lease_ns(env))
        lease.acquire(takeover=takeover)
        try:
            current = read_ref(remote, config.key, ref)
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
            history = [head.id, *(h for h in (current.history if current else ()) if h != head.id)]
            name = name_of(config.key, "ref", ref)
            doc = {
                "ref": ref,
                "snapshot": head.id,
                "history": history[:HISTORY],
                "machine": machine_id(store),
                "pushed_ns": time.time_ns(),
            }
            if not remote.write_if(
                name, seal_document(config.key, name, doc), current.token if current else None
            ):
                raise PullFirstError(f"another push to ref {ref!r} landed first")
            _record(store, ws, config, ref, head.id, head.id)
        finally:
            lease.release()
    finally:
        remote.close()
    return PushOutcome(head, ref, pushed)


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
) -> PullOutcome:
    """Brings `ref` here: fast-forwards the folder when it has not changed since the last sync
    and the remote descends from it; otherwise keeps the incoming snapshot and says diverged."""
    from tillage.workspace.locks import workspace_lock

    store = ws.store
    remote = open_for(config, env, cwd)
    try:
        ensure_config(remote, config.key, create=False)
        current = read_ref(remote, config.key, ref)
        if current is None:
            raise RefMissingError(f"nothing was pushed to ref {ref!r} of {config.name}")
        last = store.sync_ref(ws.id, config.name, ref)
        incoming = current.snapshot
        if last is not None and last.snapshot == incoming:
            return PullOutcome("up_to_date", store.head(ws.id), incoming, 0, 0)
        with store.sharing():
            fetched, size = download(store, remote, config.key, incoming)
            _publish_incoming(store, ws, incoming, last.snapshot if last else None)
    finally:
        remote.close()
    failpoints.hit("sync.pull.fetched")
    # One lock from the seal the decision reads to the last byte landed, and the landing
    # refuses a folder that moved since that seal: an edit made meanwhile is never overwritten.
    with workspace_lock(ws), store.sharing():
        return _decide_and_land(ws, config, ref, current, bootstrap, fetched, size)


def _decide_and_land(
    ws: Workspace,
    config: RemoteConfig,
    ref: str,
    current: RefState,
    bootstrap: bool,
    fetched: int,
    size: int,
) -> PullOutcome:
    """The pull's decision and landing (the caller holds the workspace lock)."""
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
    forward = last is not None and clean and last.snapshot in current.history
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
