"""Moving a snapshot's closure to and from a format-2 remote: blobs into packs on the way up,
out of packs (whole, or by ranged reads) on the way down.

Up (`send`): the closure is walked in the local store and exactly the objects the remote's
index lacks are sealed into packs (metadata — snapshots, trees, chunk lists — apart from file
chunks, so a pull's walk of the trees reads few packs; both in one pack when a push is small),
put several at a time, and named by one new index once all are durable. Down (`BlobSource`):
wanted blobs are grouped by pack and each pack is read in one request when most of it is
wanted, else by ranged reads of the stretches that are, several packs at once; every blob is
opened and proven against its ID before anyone sees it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.core.progress import ProgressFn, meter
from tillage.crypto import MasterKey, open_object, seal_object
from tillage.errors import IntegrityError
from tillage.features.sync import remote_index
from tillage.features.sync.packs import TARGET, PackBuilder
from tillage.features.sync.remote_index import IndexedPack, Located, RemoteIndex
from tillage.remote.errors import RemoteMissingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from tillage.remote.base import Remote
    from tillage.store.store import Store

__all__ = ["BlobSource", "Fetched", "Sent", "closure", "fetch_closure", "send", "send_objects"]

PUT_THREADS = 4
GET_THREADS = 8
# A pack is read whole when the blobs wanted from it are at least this share of it, else the
# stretches wanted (blobs closer than GAP merged into one read).
WHOLE_SHARE = 0.5
GAP = 256 << 10
_META = (Kind.SNAPSHOT, Kind.TREE, Kind.BLOB)

_REPAIR_NEXT = (
    "run `till remote check` to see what the remote lacks, then `till remote repair` on a "
    "machine that holds the snapshot; this store is unchanged"
)


def _children(store: Store, object_id: bytes, kind: int) -> list[tuple[bytes, int]]:
    if kind == Kind.CHUNK:
        return []
    return codec.children(store.read(object_id), kind)


def closure(store: Store, snapshot_id: str) -> list[tuple[bytes, int]]:
    """Every object a stored snapshot reaches (itself first), each once, from the local
    store (chunks are not read)."""
    root = bytes.fromhex(snapshot_id)
    out: list[tuple[bytes, int]] = [(root, Kind.SNAPSHOT)]
    seen = {root}
    at = 0
    while at < len(out):
        oid, kind = out[at]
        at += 1
        for child in _children(store, oid, kind):
            if child[0] not in seen:
                seen.add(child[0])
                out.append(child)
    return out


@dataclass(frozen=True)
class Fetched:
    """One blob read from the remote, opened and proven: its record as the store keeps it."""

    id: bytes
    kind: int
    raw: bytes
    sealed: int  # its size on the remote
    record: bytes


@dataclass(frozen=True)
class Sent:
    """What a push sent: objects (and the pack and index bytes they took) and reused."""

    objects: int
    reused: int
    bytes: int
    packs: int


def send_objects(
    store: Store,
    remote: Remote,
    master: MasterKey,
    objects: list[tuple[bytes, int]],
    keep: Callable[[], None] | None = None,
    on_progress: ProgressFn | None = None,
) -> list[IndexedPack]:
    """Seals `objects` (from the local store) into packs and puts them, PUT_THREADS at a
    time; returns the packs, every one durable. Names no index: the caller writes it.
    `on_progress` hears each object sealed for sending (`uploading`)."""
    meta, data = PackBuilder(), PackBuilder()
    tally = meter(on_progress, "uploading", len(objects), unit="object")
    done: list[IndexedPack] = []
    pending: deque[Future[IndexedPack]] = deque()

    def put(builder: PackBuilder) -> IndexedPack:
        body = builder.finish(master)
        remote.put(builder.name, body)
        return IndexedPack(builder.name, len(body), tuple(builder.entries))

    with ThreadPoolExecutor(PUT_THREADS, thread_name_prefix="tillage-push") as pool:

        def submit(builder: PackBuilder) -> None:
            pending.append(pool.submit(put, builder))
            while len(pending) > PUT_THREADS:  # bounded memory: a few packs in flight
                done.append(pending.popleft().result())
            if keep is not None:
                keep()

        for oid, kind in objects:
            sealed = seal_object(master, oid, store.read_record(oid))
            if tally is not None:
                tally.add(1, len(sealed))
            builder = meta if kind in _META else data
            builder.add(oid, kind, sealed)
            if builder.full:
                submit(builder)
                if builder is meta:
                    meta = PackBuilder()
                else:
                    data = PackBuilder()
        if meta.entries and data.entries and meta.size + data.size < TARGET:
            for entry, part in zip(meta.entries, meta.parts, strict=True):
                data.add(entry.id, entry.kind, part)  # a small push: one pack
            meta = PackBuilder()
        for builder in (meta, data):
            if builder.entries:
                submit(builder)
        while pending:
            done.append(pending.popleft().result())
    return done


def send(
    store: Store,
    remote: Remote,
    master: MasterKey,
    snapshot_id: str,
    cache: Path | None,
    keep: Callable[[], None] | None = None,
    on_progress: ProgressFn | None = None,
) -> Sent:
    """Sends what the remote's index lacks of a snapshot's closure, then one index naming the
    new packs (and any pack a cut push left unindexed, adopted by its own header)."""
    index = remote_index.load(remote, master, cache)
    adopted = remote_index.adopt_unindexed(remote, master, index)
    objects = closure(store, snapshot_id)
    missing = [(oid, kind) for oid, kind in objects if oid not in index.blobs]
    packs = send_objects(store, remote, master, missing, keep, on_progress)
    if len(index.documents) >= remote_index.COMPACT_AT:
        remote_index.write_superseding(remote, master, index, packs, cache)
    elif packs or adopted:
        remote_index.write_index(remote, master, [*adopted, *packs], cache)
    sent = sum(p.size for p in packs)
    return Sent(len(missing), len(objects) - len(missing), sent, len(packs))


# -- down ---------------------------------------------------------------------------------------


class BlobSource:
    """Reads blobs from the remote by its index, several packs at once; every blob opened and
    proven against its ID (`decode_record`) before it is handed out. Metadata blobs a whole
    pack read brought along are kept for the next `fetch`, so a walk of the trees level by
    level costs a request per pack, not per level."""

    def __init__(self, remote: Remote, master: MasterKey, index: RemoteIndex) -> None:
        self.remote, self.master, self.index = remote, master, index
        self.spare: dict[bytes, bytes] = {}  # sealed metadata blobs read along
        self.requests = 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.requests += 1

    def locate(self, oid: bytes, what: str) -> Located:
        found = self.index.blobs.get(oid)
        if found is None:
            raise IntegrityError(
                f"the remote lacks object {oid.hex()[:12]} of {what}", next_step=_REPAIR_NEXT
            )
        return found

    def fetch(self, wanted: list[tuple[bytes, int]], what: str) -> Iterator[Fetched]:
        """Yields every wanted blob (opened and proven), in no set order; IntegrityError when
        one is missing, damaged or not the kind its parent names."""
        from tillage.store.packs import decode_record

        by_pack: dict[str, list[tuple[bytes, int, Located]]] = {}
        ready: list[tuple[bytes, int, bytes]] = []
        for oid, kind in wanted:
            spare = self.spare.pop(oid, None)
            if spare is not None:
                ready.append((oid, kind, spare))
                continue
            where = self.locate(oid, what)
            by_pack.setdefault(where.pack, []).append((oid, kind, where))

        def opened(oid: bytes, kind: int, sealed: bytes) -> Fetched:
            record = open_object(self.master, oid, sealed)
            got, _id, raw = decode_record(record, oid)
            if got != kind:
                raise IntegrityError(f"object {oid.hex()[:12]} is not what it names")
            return Fetched(oid, kind, raw, len(sealed), record)

        for oid, kind, sealed in ready:
            yield opened(oid, kind, sealed)
        if not by_pack:
            return
        with ThreadPoolExecutor(
            min(GET_THREADS, len(by_pack)), thread_name_prefix="tillage-pull"
        ) as pool:
            futures = {
                pool.submit(self._read_pack, pack, items, opened) for pack, items in by_pack.items()
            }
            while futures:
                finished, futures = wait(futures, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield from future.result()

    def _read_pack(
        self,
        pack: str,
        items: list[tuple[bytes, int, Located]],
        opened: Callable[[bytes, int, bytes], Fetched],
    ) -> list[Fetched]:
        info = self.index.packs[pack]
        items.sort(key=lambda item: item[2].offset)
        wanted_bytes = sum(where.length for _o, _k, where in items)
        out: list[Fetched] = []
        try:
            if wanted_bytes >= WHOLE_SHARE * info.size:
                body = self.remote.get(pack)
                self._count()
                if len(body) != info.size:
                    raise IntegrityError(
                        f"the remote's pack {pack} is {len(body)} bytes, not the {info.size} "
                        "its index says",
                        next_step=_REPAIR_NEXT,
                    )
                wanted = {oid for oid, _k, _w in items}
                for entry in info.entries:
                    if entry.id not in wanted and entry.kind in _META:
                        self.spare.setdefault(
                            entry.id, body[entry.offset : entry.offset + entry.length]
                        )
                for oid, kind, where in items:
                    out.append(opened(oid, kind, body[where.offset : where.offset + where.length]))
                return out
            for start, end, group in _spans(items):
                data = self.remote.get_range(pack, start, end - start)
                self._count()
                if len(data) != end - start:
                    raise IntegrityError(
                        f"the remote's pack {pack} is shorter than its index says",
                        next_step=_REPAIR_NEXT,
                    )
                for oid, kind, where in group:
                    at = where.offset - start
                    out.append(opened(oid, kind, data[at : at + where.length]))
        except RemoteMissingError:
            raise IntegrityError(
                f"the remote lacks its pack {pack}, which its index names", next_step=_REPAIR_NEXT
            ) from None
        return out


def _spans(
    items: list[tuple[bytes, int, Located]],
) -> list[tuple[int, int, list[tuple[bytes, int, Located]]]]:
    """The stretches of a pack to read: blobs (sorted by offset) closer than GAP merged."""
    spans: list[tuple[int, int, list[tuple[bytes, int, Located]]]] = []
    for item in items:
        where = item[2]
        if spans and where.offset - spans[-1][1] <= GAP:
            start, end, group = spans[-1]
            group.append(item)
            spans[-1] = (start, max(end, where.offset + where.length), group)
        else:
            spans.append((where.offset, where.offset + where.length, [item]))
    return spans


def fetch_closure(
    store: Store, source: BlobSource, snapshot_id: str, on_progress: ProgressFn | None = None
) -> tuple[int, int]:
    """Fetches what the local store lacks of a snapshot's closure through one writer whose
    packs are discarded on any failure (nothing is written locally then): the metadata level
    by level, then every chunk, grouped by pack. Returns (objects, sealed bytes) fetched.
    `on_progress` hears each object fetched (`fetching`), toward a total once it is known:
    when the trees are read and only the chunks are left."""
    fetched = size = 0
    tally = meter(on_progress, "fetching", unit="object")
    what = f"snapshot {snapshot_id[:12]}"
    chunks: list[tuple[bytes, int]] = []
    with store.writer() as writer:
        level: list[tuple[bytes, int]] = [(bytes.fromhex(snapshot_id), Kind.SNAPSHOT)]
        seen: set[bytes] = set()
        while level:
            fresh = []
            for oid, kind in level:
                if oid not in seen:
                    seen.add(oid)
                    fresh.append((oid, kind))
            local = store.locations([oid for oid, _k in fresh])
            nxt: list[tuple[bytes, int]] = []
            need: list[tuple[bytes, int]] = []
            for oid, kind in fresh:
                if oid in local:
                    nxt.extend(_children(store, oid, kind))
                elif kind == Kind.CHUNK:
                    chunks.append((oid, kind))
                else:
                    need.append((oid, kind))
            for got in source.fetch(need, what):
                writer.put_record(got.kind, got.id, got.record, len(got.raw))
                fetched += 1
                size += got.sealed
                if tally is not None:
                    tally(fetched, size)
                nxt.extend(codec.children(got.raw, got.kind))
            level = nxt
        if tally is not None:
            tally.files_total = fetched + len(chunks)
        for got in source.fetch(chunks, what):
            writer.put_record(got.kind, got.id, got.record, len(got.raw))
            fetched += 1
            size += got.sealed
            if tally is not None:
                tally(fetched, size)
        writer.commit()  # INV-2: durable before anything names it
    return fetched, size
