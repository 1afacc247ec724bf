"""A remote's refs as this machine can vouch for them: `till remote refs` lists each (a damaged
one, or one older than this machine saw, with its problem instead of failing the listing), and
`till remote repair-ref` rewrites a damaged or lost ref from this machine's memory of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import ConflictError, IntegrityError
from tillage.features.sync import seen
from tillage.features.sync.errors import RefMissingError, RollbackError
from tillage.features.sync.refs import Lease, RefState, doc_key, lease_ns, open_ref, write_ref
from tillage.features.sync.remotes import RemoteConfig, machine_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from tillage.store.store import Store

# A ref's problem in a listing: `damaged` (its document does not open, or holds no head),
# `rolled_back` (older than this machine saw it), `missing` (this machine saw it; it is gone).
DAMAGED, ROLLED_BACK, MISSING = "damaged", "rolled_back", "missing"


@dataclass(frozen=True)
class RefEntry:
    """One ref of a remote. `ref` is null for a damaged document this machine cannot name;
    `seen_version` is the newest version this machine saw (null: never)."""

    ref: str | None
    snapshot: str | None
    version: int | None
    pushed_at: str | None
    machine: str | None
    problem: str | None
    seen_version: int | None


def list_refs(
    store: Store, config: RemoteConfig, env: Mapping[str, str], cwd: str
) -> list[RefEntry]:
    """Every ref the remote holds, and every ref this machine saw there that it lost."""
    from tillage.crypto import name_of
    from tillage.features.sync.engine import ensure_config, open_for
    from tillage.platform import clock

    remote = open_for(config, env, cwd)
    try:
        opened = ensure_config(remote, config.key, create=False)
        key = doc_key(opened)
        memory = seen.recalled(store, remote)
        known = {name_of(key, "ref", ref): ref for ref in memory}
        entries: list[RefEntry] = []
        listed: set[str] = set()
        for name in remote.list("refs/"):
            found = remote.read_versioned(name)
            if found is None:
                continue  # removed while listed: it is one of the missing, if it was seen
            try:
                state = open_ref(key, name, found.data, found.token, known.get(name))
            except IntegrityError:
                ref = known.get(name)
                listed.add(ref or name)
                was = memory.get(ref) if ref else None
                entries.append(
                    RefEntry(ref, None, None, None, None, DAMAGED, was.version if was else None)
                )
                continue
            listed.add(state.ref)
            was = memory.get(state.ref)
            problem = None
            try:
                seen.check(store, remote, state.ref, state, config.name)
            except RollbackError:
                problem = ROLLED_BACK
            else:
                seen.remember(store, remote, state)
            entries.append(
                RefEntry(
                    state.ref,
                    state.snapshot,
                    state.version,
                    clock.rfc3339(state.pushed_ns) if state.pushed_ns else None,
                    state.machine or None,
                    problem,
                    was.version if was else None,
                )
            )
        for ref, was in memory.items():
            if ref not in listed:
                entries.append(RefEntry(ref, None, None, None, None, MISSING, was.version))
    finally:
        remote.close()
    return sorted(entries, key=lambda e: (e.ref is None, e.ref or ""))


@dataclass(frozen=True)
class RepairOutcome:
    """What a repair did: `problem` is what it found (`damaged`, `missing`, or None for a
    sound ref, left as it is), `state` the ref as it is now."""

    problem: str | None
    state: RefState


def repair_ref(
    store: Store, config: RemoteConfig, env: Mapping[str, str], cwd: str, ref: str
) -> RepairOutcome:
    """Rewrites a damaged or missing ref from the newest version of it this machine saw
    (that snapshot, its history and older segments, at the next version), under the ref's
    lease, after sending what that snapshot reaches and the remote lacks (when this store
    holds it); a sound ref is left alone. Refused when this machine never saw the ref."""
    from tillage.crypto import name_of
    from tillage.features.sync.engine import ensure_config, open_for, upload

    remote = open_for(config, env, cwd)
    try:
        opened = ensure_config(remote, config.key, create=False)
        key = doc_key(opened)
        memory = seen.recall(store, remote, ref)
        if memory is None:
            raise RefMissingError(
                f"this machine never saw ref {ref!r} of {config.name}: it has nothing to "
                "rewrite it from",
                next_step=f"run `till remote repair-ref --ref {ref}` on a machine that pushed "
                "or pulled it (`till remote refs` there shows its version)",
            )
        lease = Lease(remote, key, ref, machine_id(store), lease_ns(env))
        lease.acquire(takeover=False, damaged=True)
        try:
            name = name_of(key, "ref", ref)
            found = remote.read_versioned(name)
            if found is not None:
                try:
                    state = open_ref(key, name, found.data, found.token, ref)
                except IntegrityError:
                    pass
                else:
                    return RepairOutcome(None, state)
            if store.locations([bytes.fromhex(memory.snapshot)]):
                # What the head reaches goes up first (only what the remote lacks: one
                # existence check when it holds it all), so the rewritten ref can be pulled.
                with store.sharing():
                    upload(store, remote, opened, memory.snapshot, lease.keep)
            written = write_ref(
                remote,
                key,
                ref,
                memory.snapshot,
                memory,
                machine_id(store),
                expect=found.token if found is not None else None,
            )
            if written is None:
                raise ConflictError(
                    f"ref {ref!r} of {config.name} changed while it was repaired",
                    next_step="see it with `till remote refs`, then repair again if it is "
                    "still damaged",
                )
            seen.remember(store, remote, written)
        finally:
            lease.release()
    finally:
        remote.close()
    return RepairOutcome(DAMAGED if found is not None else MISSING, written)
