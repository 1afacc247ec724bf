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

import time
from collections.abc import Callable
from dataclasses import dataclass

from tillage.core import codec
from tillage.crypto import (
    RecoveryKey,
    name_of,
    open_document,
    seal_document,
)
from tillage.errors import IntegrityError
from tillage.features.sync import remote_index, repository, transfer
from tillage.features.sync.errors import (
    LeaseExpiredError,
    LeaseHeldError,
    PullFirstError,
    RefMissingError,
)
from tillage.features.sync.remotes import RemoteConfig, machine_id
from tillage.features.sync.repository import Opened
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
HISTORY = 1000  # snapshots a ref remembers: a pull fast-forwards from any of them
LEASE_NS = 10 * 60 * 1_000_000_000


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
    `create`, makes it in an empty place (features/sync/repository.py). Refs and leases take
    their key from the answer: `opened.key_for_documents`."""
    return repository.ensure(remote, key, create_missing=create)[0]


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
) -> Pushed:
    """Sends what the remote's index lacks of a snapshot's closure, in packs, then the index
    that names them (features/sync/transfer.py): durable before the ref can name them."""
    sent = transfer.send(
        store, remote, opened.master, snapshot_id, _index_cache(store, opened), keep
    )
    return Pushed(sent.objects, sent.reused, sent.bytes)


def download(store: Store, remote: Remote, opened: Opened, snapshot_id: str) -> tuple[int, int]:
    """Fetches what the local store lacks of a snapshot's closure from the remote's packs,
    each object opened and proven against its ID before it is written; any failure discards
    everything fetched (nothing is written locally). Returns (objects, bytes) fetched."""
    index = remote_index.load(remote, opened.master, _index_cache(store, opened))
    source = transfer.BlobSource(remote, opened.master, index)
    return transfer.fetch_closure(store, source, snapshot_id)


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
        opened = ensure_config(remote, config.key, create=True)
        key = opened.key_for_documents  # refs and leases: under the master key
        lease = Lease(remote, key, ref, machine_id(store), lease_ns(env))
        lease.acquire(takeover=takeover)
        try:
            current = read_ref(remote, key, ref)
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
                pushed = upload(store, remote, opened, head.id, lease.keep)
            history = [head.id, *(h for h in (current.history if current else ()) if h != head.id)]
            name = name_of(key, "ref", ref)
            doc = {
                "ref": ref,
                "snapshot": head.id,
                "history": history[:HISTORY],
                "machine": machine_id(store),
                "pushed_ns": time.time_ns(),
            }
            if not remote.write_if(
                name, seal_document(key, name, doc), current.token if current else None
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
    from tillage.workspace import rewind
    from tillage.workspace.seal import SealOptions, seal_result

    store = ws.store
    remote = open_for(config, env, cwd)
    try:
        opened = ensure_config(remote, config.key, create=False)
        current = read_ref(remote, opened.key_for_documents, ref)
        if current is None:
            raise RefMissingError(f"nothing was pushed to ref {ref!r} of {config.name}")
        last = store.sync_ref(ws.id, config.name, ref)
        incoming = current.snapshot
        if last is not None and last.snapshot == incoming:
            return PullOutcome("up_to_date", store.head(ws.id), incoming, 0, 0)
        with store.sharing():
            fetched, size = download(store, remote, opened, incoming)
            _publish_incoming(store, ws, incoming, last.snapshot if last else None)
    finally:
        remote.close()
    head = seal_result(
        ws, SealOptions(trigger="manual", label="before pull", skip_unchanged=True)
    ).row
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
    rewind.apply(ws, target, None)
    landed = _twin(ws, target, f"pulled {incoming[:12]} from {config.name}/{ref}")
    _record(store, ws, config, ref, incoming, landed.id)
    return PullOutcome(
        "fast_forwarded" if forward else "bootstrapped", landed, incoming, fetched, size
    )


def _twin(ws: Workspace, target: SnapshotRow, label: str) -> SnapshotRow:
    """The local snapshot holding exactly what a pull landed: the target's own tree, not a new
    walk of the folder (an edit made while the pull applied is the next seal's change, never
    recorded as synced)."""
    from tillage.workspace.locks import workspace_lock
    from tillage.workspace.seal import SealOptions, publish_tree, snapshot_record

    notes = list(snapshot_record(ws.store, target.id).fidelity)
    options = SealOptions(trigger="sync", label=label, merged_from=target.id)
    with workspace_lock(ws), ws.store.writer() as writer:
        return publish_tree(
            ws.store,
            ws.id,
            writer,
            bytes.fromhex(target.tree),
            target.files,
            target.bytes,
            notes,
            options,
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
