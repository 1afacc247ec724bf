"""`till remote check` and `till remote repair`: is every pack the index names there and whole,
is every ref's head closure indexed, and put right what is not.

Check (restic's `check`, `--read-data` its `check --read-data`): every index opens; every pack
an index names is on the remote and its sealed trailer opens and gives the size the index
says (one ranged read a pack), or, with `read_data`, the whole pack is read and every blob the
index places there opens and proves against its ID; every ref's head and everything it reaches
is named by an index (the trees are read from the remote). Packs no index names (a push cut
before its index) are counted, not problems: the next push adopts them.

Repair only adds and supersedes: it copies every blob still readable out of a damaged pack
into a new one (sealed bytes moved as they are), sends from this machine's store what is left
and what the refs' closures lack, writes one index naming every good pack, and only then
removes the indexes it replaced and the damaged packs it emptied. What it cannot repair
(blobs this machine lacks) it lists with the machine that pushed the ref.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.crypto import MasterKey, open_document, open_object
from tillage.errors import IntegrityError
from tillage.features.sync import remote_index
from tillage.features.sync.packs import TRAILER, PackBuilder, open_header, open_trailer, pack_size
from tillage.features.sync.remote_index import IndexedPack, Problem, RemoteIndex
from tillage.features.sync.transfer import GET_THREADS, BlobSource, send_objects
from tillage.remote.errors import RemoteMissingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from tillage.remote.base import Remote
    from tillage.store.store import Store

__all__ = ["CheckReport", "RepairReport", "Unrepaired", "check", "repair"]

SHOWN_PER_REF = 10  # objects named one by one per ref; the rest are counted


@dataclass(frozen=True)
class CheckReport:
    ok: bool
    packs: int
    blobs: int
    refs: int
    unindexed_packs: int
    problems: tuple[Problem, ...]


@dataclass(frozen=True)
class Unrepaired:
    """An object no pack holds whole and this machine's store lacks: `ref` needs it, and the
    machine that pushed that ref (`pushed_by`, a machine ID) may hold it."""

    object: str
    ref: str
    pushed_by: str | None


@dataclass(frozen=True)
class RepairReport:
    ok: bool
    problems: tuple[Problem, ...]
    salvaged_objects: int
    resent_objects: int
    reindexed_packs: int
    removed_packs: int
    removed_indexes: int
    unrepaired: tuple[Unrepaired, ...]


@dataclass
class _Refs:
    """Each ref's head as the remote holds it: (hashed name, ref, snapshot, machine)."""

    heads: list[tuple[str, str, str, str | None]] = field(default_factory=list)


def _pack_problem(
    remote: Remote, master: MasterKey, pack: IndexedPack, read_data: bool
) -> tuple[Problem | None, dict[bytes, bytes]]:
    """What is wrong with one indexed pack (None: nothing), and, when it was read whole, the
    sealed bytes of every blob of it that opens and proves (what a repair can salvage)."""
    from tillage.store.packs import decode_record

    name = pack.name
    good: dict[bytes, bytes] = {}
    try:
        if not read_data:
            offset, length = open_trailer(master, name, remote.get_range(name, -TRAILER, TRAILER))
            if pack_size(offset, length) != pack.size:
                return Problem(
                    name,
                    f"its trailer says {pack_size(offset, length)} bytes, its index {pack.size}",
                ), good
            return None, good
        body = remote.get(name)
    except RemoteMissingError:
        return Problem(name, "missing: an index names it, the remote does not hold it"), good
    except IntegrityError as exc:
        return Problem(name, f"damaged: {exc.message}"), good
    wrong: list[str] = []
    if len(body) != pack.size:
        wrong.append(f"{len(body)} bytes, its index says {pack.size}")
    try:
        offset, length = open_trailer(master, name, body[-TRAILER:])
        listed = {e.id for e in open_header(master, name, body[offset : offset + length])}
        if not {e.id for e in pack.entries} <= listed:
            wrong.append("its header does not list every blob its index places there")
    except IntegrityError as exc:
        wrong.append(exc.message)
    bad = 0
    for e in pack.entries:
        sealed = body[e.offset : e.offset + e.length]
        try:
            kind, _id, _raw = decode_record(open_object(master, e.id, sealed), e.id)
            if kind != e.kind:
                raise IntegrityError("not the kind its index says")
            good[e.id] = sealed
        except IntegrityError:
            bad += 1
    if bad:
        wrong.append(f"{bad} of its {len(pack.entries)} blobs do not open or prove")
    return (Problem(name, "damaged: " + "; ".join(wrong)) if wrong else None), good


def _check_packs(
    remote: Remote, master: MasterKey, index: RemoteIndex, read_data: bool
) -> tuple[list[Problem], dict[str, dict[bytes, bytes]]]:
    """Every indexed pack checked, several at once: the problems, and for each damaged pack
    read whole, its blobs that still prove."""
    listed = set(remote.list(remote_index.PACKS_PREFIX))
    index.listed_packs = listed
    problems: list[Problem] = []
    salvage: dict[str, dict[bytes, bytes]] = {}
    present = [p for p in index.packs.values() if p.name in listed]
    for pack in index.packs.values():
        if pack.name not in listed:
            problems.append(
                Problem(pack.name, "missing: an index names it, the remote does not hold it")
            )
    with ThreadPoolExecutor(GET_THREADS, thread_name_prefix="tillage-check") as pool:
        answers = list(pool.map(lambda p: _pack_problem(remote, master, p, read_data), present))
    for pack, (problem, good) in zip(present, answers, strict=True):
        if problem is not None:
            problems.append(problem)
            salvage[pack.name] = good
    return problems, salvage


def _heads(remote: Remote, master: MasterKey, problems: list[Problem]) -> _Refs:
    refs = _Refs()
    for name in remote.list("refs/"):
        try:
            doc = open_document(master, name, remote.get(name))
        except (IntegrityError, RemoteMissingError) as exc:
            problems.append(Problem(name, f"the ref's head does not open: {exc}"))
            continue
        snapshot = doc.get("snapshot")
        if isinstance(snapshot, str):
            machine = doc.get("machine")
            refs.heads.append(
                (name, str(doc.get("ref")), snapshot, machine if isinstance(machine, str) else None)
            )
    return refs


def _walk(
    source: BlobSource,
    snapshot_id: str,
    usable: set[bytes],
    store: Store | None,
) -> tuple[set[bytes], list[tuple[bytes, int]]]:
    """A ref head's closure, its trees read from the remote (or from `store` when the remote
    cannot give them): the objects reached, and those (with their kind) that no usable pack
    holds."""
    reached: set[bytes] = set()
    lacking: list[tuple[bytes, int]] = []
    level = [(bytes.fromhex(snapshot_id), int(Kind.SNAPSHOT))]
    while level:
        fresh = [(o, k) for o, k in level if o not in reached]
        reached.update(o for o, _k in fresh)
        nxt: list[tuple[bytes, int]] = []
        from_remote: list[tuple[bytes, int]] = []
        metas = [o for o, k in fresh if k != Kind.CHUNK]
        here = store.locations(metas) if store is not None else {}
        for oid, kind in fresh:
            if oid not in usable:
                lacking.append((oid, kind))
                if kind != Kind.CHUNK and oid in here and store is not None:
                    nxt.extend(codec.children(store.read(oid), kind))
            elif kind != Kind.CHUNK:
                from_remote.append((oid, kind))
        what = f"snapshot {snapshot_id[:12]}"
        try:  # the level at once (a few ranged reads a pack), then one by one to tell which
            got = {f.id: f.raw for f in source.fetch(from_remote, what)}
        except IntegrityError:
            got = {}
            for oid, kind in from_remote:
                try:
                    (one,) = source.fetch([(oid, kind)], what)
                except IntegrityError:
                    continue
                got[oid] = one.raw
        for oid, kind in from_remote:
            found = got.get(oid)
            if found is not None:
                nxt.extend(codec.children(found, kind))
                continue
            lacking.append((oid, kind))
            if oid in here and store is not None:
                nxt.extend(codec.children(store.read(oid), kind))
        level = nxt
    return reached, lacking


def check(remote: Remote, master: MasterKey, cache: Path | None, *, read_data: bool) -> CheckReport:
    """Checks the remote (see the module's docstring); changes nothing on it."""
    problems: list[Problem] = []
    index = remote_index.load(remote, master, cache, problems=problems)
    pack_problems, _salvage = _check_packs(remote, master, index, read_data)
    problems += pack_problems
    bad = {p.object for p in pack_problems}
    usable = {oid for oid, where in index.blobs.items() if where.pack not in bad}
    refs = _heads(remote, master, problems)
    source = BlobSource(remote, master, index)
    for _name, ref, snapshot, _machine in refs.heads:
        _reached, lacking = _walk(source, snapshot, usable, None)
        for oid, _kind in lacking[:SHOWN_PER_REF]:
            problems.append(Problem(oid.hex(), f"ref {ref!r} reaches it; no whole pack holds it"))
        if len(lacking) > SHOWN_PER_REF:
            problems.append(
                Problem(f"ref {ref}", f"{len(lacking)} objects of its head are in no whole pack")
            )
    return CheckReport(
        ok=not problems,
        packs=len(index.packs),
        blobs=len(index.blobs),
        refs=len(refs.heads),
        unindexed_packs=len(index.unindexed()),
        problems=tuple(problems),
    )


def repair(
    store: Store, remote: Remote, master: MasterKey, cache: Path | None, *, read_data: bool
) -> RepairReport:
    """Repairs the remote (see the module's docstring)."""
    problems: list[Problem] = []
    index = remote_index.load(remote, master, cache, problems=problems)
    pack_problems, salvage = _check_packs(remote, master, index, read_data)
    problems += pack_problems
    bad = {p.object for p in pack_problems}
    if not read_data:
        # A pack found wrong by its trailer is read whole now, to salvage what still proves.
        for name in bad:
            if name in index.packs and name in (index.listed_packs or set()):
                _problem, salvage[name] = _pack_problem(remote, master, index.packs[name], True)
    old_indexes = list(index.documents)
    adopted = [p for p in remote_index.adopt_unindexed(remote, master, index) if p.name not in bad]
    good_packs = [p for p in index.packs.values() if p.name not in bad]
    usable = {e.id for p in good_packs for e in p.entries}

    # Blobs of damaged packs that still prove, copied sealed as they are into new packs.
    builder = PackBuilder()
    built: list[PackBuilder] = []
    salvaged = 0
    for name in sorted(salvage):
        for e in index.packs[name].entries:
            sealed = salvage[name].get(e.id)
            if sealed is None or e.id in usable:
                continue
            builder.add(e.id, e.kind, sealed)
            usable.add(e.id)
            salvaged += 1
            if builder.full:
                built.append(builder)
                builder = PackBuilder()
    if builder.entries:
        built.append(builder)
    new_packs: list[IndexedPack] = []
    for b in built:
        body = b.finish(master)
        remote.put(b.name, body)
        new_packs.append(IndexedPack(b.name, len(body), tuple(b.entries)))

    # What the refs' closures lack: sent from this machine's store, or listed as unrepaired.
    merged = RemoteIndex()
    for pack in [*good_packs, *new_packs]:
        merged.add(pack)
    source = BlobSource(remote, master, merged)
    refs = _heads(remote, master, problems)
    resend: dict[bytes, int] = {}
    unrepaired: dict[bytes, Unrepaired] = {}
    for _name, ref, snapshot, machine in refs.heads:
        _reached, lacking = _walk(source, snapshot, usable, store)
        here = store.locations([oid for oid, _k in lacking])
        for oid, kind in lacking:
            if oid in here:
                resend[oid] = kind
            else:
                unrepaired.setdefault(oid, Unrepaired(oid.hex(), ref, machine))
    with store.sharing():
        new_packs += send_objects(store, remote, master, list(resend.items()))

    removed_packs = removed_indexes = 0
    changed = bool(new_packs or bad or adopted or problems)
    if changed:
        kept = RemoteIndex(documents=dict.fromkeys(old_indexes, ()))
        # One index naming every good pack; only then, it durable, what it supersedes goes.
        remote_index.write_superseding(remote, master, kept, [*good_packs, *new_packs], cache)
        removed_indexes += len(old_indexes)
        for p in problems:
            if p.object.startswith(remote_index.INDEX_PREFIX):
                remote.delete(p.object)  # an index that does not open: its packs adopted
                removed_indexes += 1
        for name in bad:
            if name in (index.listed_packs or set()):
                remote.delete(name)  # every blob of it that proves was copied first
                removed_packs += 1
    return RepairReport(
        ok=not unrepaired,
        problems=tuple(problems),
        salvaged_objects=salvaged,
        resent_objects=len(resend),
        reindexed_packs=len(adopted),
        removed_packs=removed_packs,
        removed_indexes=removed_indexes,
        unrepaired=tuple(unrepaired.values()),
    )
