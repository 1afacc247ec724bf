"""What this machine has seen of each remote's refs: the newest version of each (its snapshot,
its recent history and its pointer to older heads), so a remote that was rolled back or lost a
ref is refused rather than believed, and a damaged ref can be rewritten from here.

Kept per store, not per workspace (rollback is a property of the remote, whichever workspace
reads it), in `<store>/remotes/seen/<remote>/<ref>.json` (0600, written atomically under a
lock, names keyed hashes): a file rather than a `sync_ref` fact because it changes with every
version seen, holds a history too large for an event, and belongs to the machine. The remote
is known by `identity`: its URL as its transport spells it, until the remote's own config
document carries a repository ID (then that ID, so two URLs of one remote share a memory).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from blake3 import blake3

from tillage.crypto import RecoveryKey
from tillage.features.sync.errors import RollbackError
from tillage.features.sync.refs import RefState, read_ref
from tillage.platform.locks import file_lock
from tillage.store import control

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.remote.base import Remote
    from tillage.store.store import Store

__all__ = [
    "accept",
    "check",
    "continued",
    "identity",
    "knows",
    "read",
    "recall",
    "recalled",
    "remember",
    "rolled_back",
    "seen_at",
    "synced",
    "trust",
]


def identity(remote: Remote) -> str:
    """The remote as this machine's memory knows it. The seam for a repository ID: once the
    remote's config document holds one, return it here."""
    return remote.url


def _hash(text: str) -> str:
    return blake3(text.encode()).hexdigest()[:32]


def _folder(store: Store, remote: Remote) -> Path:
    return store.home / "remotes" / "seen" / _hash(identity(remote))


def told_snapshots(store: Store) -> set[str]:
    """The remote snapshots this machine was told of (each ref's last state seen, and its
    history): a pull or a clone downloads their records before anything here names them, so
    one killed in between leaves records that are the remote's, not a lost timeline."""
    found: set[str] = set()
    for path in (store.home / "remotes" / "seen").glob("*/*.json"):
        doc = _read(path)
        if doc is None:
            continue
        snapshot = doc.get("snapshot")
        if isinstance(snapshot, str):
            found.add(snapshot)
        history = doc.get("history")
        if isinstance(history, list):
            found.update(h for h in history if isinstance(h, str))
    return found


def _path(store: Store, remote: Remote, ref: str) -> Path:
    return _folder(store, remote) / f"{_hash(ref)}.json"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None  # never seen (a damaged memory is a forgotten one: it only weakens a check)
    return doc if isinstance(doc, dict) else None


def _load(path: Path) -> RefState | None:
    doc = _read(path)
    if doc is None:
        return None
    try:
        return RefState(
            ref=str(doc["ref"]),
            snapshot=str(doc["snapshot"]),
            version=int(doc["version"]),
            history=tuple(str(h) for h in doc["history"]),
            older=doc["older"] if isinstance(doc["older"], str) else None,
            machine=str(doc.get("machine", "")),
            pushed_ns=int(doc.get("pushed_ns", 0)),
            token=None,
        )
    except (KeyError, TypeError, ValueError):
        return None


def _accepted(path: Path) -> tuple[int | None, str | None] | None:
    """The older state of the ref the person accepted (version and snapshot, both None for
    an accepted loss), or None."""
    doc = _read(path)
    marker = doc.get("accepted") if doc is not None else None
    if not isinstance(marker, dict):
        return None
    version, snapshot = marker.get("version"), marker.get("snapshot")
    return (
        version if isinstance(version, int) else None,
        snapshot if isinstance(snapshot, str) else None,
    )


def recall(store: Store, remote: Remote, ref: str) -> RefState | None:
    """The newest version of `ref` this machine has seen on `remote`, or None."""
    return _load(_path(store, remote, ref))


def recalled(store: Store, remote: Remote) -> dict[str, RefState]:
    """Every ref of `remote` this machine has seen, by name."""
    out: dict[str, RefState] = {}
    folder = _folder(store, remote)
    with contextlib.suppress(FileNotFoundError):
        for path in sorted(folder.glob("*.json")):
            state = _load(path)
            if state is not None:
                out[state.ref] = state
    return out


def knows(store: Store, remote: Remote) -> bool:
    """Tells whether this machine saw any ref of `remote` (one listing, no file read)."""
    try:
        with os.scandir(_folder(store, remote)) as entries:
            return any(e.name.endswith(".json") for e in entries)
    except FileNotFoundError:
        return False


def rolled_back(seen: RefState | None, found: RefState | None) -> bool:
    """Tells whether `found` is older than `seen`: gone, a lower version, or another snapshot
    at the same version."""
    if seen is None:
        return False
    if found is None or found.version < seen.version:
        return True
    return found.version == seen.version and found.snapshot != seen.snapshot


def _since_accepted(marker: tuple[int | None, str | None] | None, found: RefState | None) -> bool:
    """Tells whether `found` is the state the person accepted or moved on from it (after an
    accepted loss, any head: as a ref seen for the first time)."""
    if marker is None:
        return False
    version, snapshot = marker
    if version is None:
        return True
    if found is None:
        return False
    return found.version > version or (found.version == version and found.snapshot == snapshot)


def continued(store: Store, remote: Remote, ref: str, found: RefState | None) -> RefState | None:
    """What this machine saw of `ref`, when `found` is exactly the older state the person
    accepted (nothing moved since): a push whose head holds the newer work goes on from that,
    so the newer heads stay in the history. None otherwise."""
    path = _path(store, remote, ref)
    seen = _load(path)
    if seen is None or not rolled_back(seen, found) or _accepted(path) != _key_of(found):
        return None
    return seen


def _key_of(found: RefState | None) -> tuple[int | None, str | None]:
    return (found.version, found.snapshot) if found is not None else (None, None)


def check(store: Store, remote: Remote, ref: str, found: RefState | None, where: str) -> None:
    """Refuses a ref older than this machine saw it: a lower version, another snapshot at the
    same version, or none at all (`sync.rollback`, naming both; `where` names the remote),
    unless it is the very state the person accepted (`accept`)."""
    path = _path(store, remote, ref)
    seen = _load(path)
    if seen is None or not rolled_back(seen, found) or _since_accepted(_accepted(path), found):
        return
    details = {
        "ref": ref,
        "seen_version": seen.version,
        "seen_snapshot": seen.snapshot,
        "found_version": found.version if found is not None else None,
        "found_snapshot": found.snapshot if found is not None else None,
    }
    if found is None:
        what = "holds no head for it"
    elif found.version < seen.version:
        what = f"holds version {found.version} ({found.snapshot[:12]})"
    else:
        what = f"holds another snapshot ({found.snapshot[:12]}) at that version"
    raise RollbackError(
        f"ref {ref!r} of {where} was rolled back: this machine saw version {seen.version} "
        f"({seen.snapshot[:12]}), and the remote now {what}; nothing was changed",
        details=details,
    )


def _lock(store: Store, remote: Remote) -> Any:
    return file_lock(store.locks_dir / f"seen-{_hash(identity(remote))}.lock", what="sync memory")


def _write(
    path: Path, remote: Remote, state: RefState, accepted: Any = None, synced: Any = None
) -> None:
    doc = {
        "remote": identity(remote),
        "ref": state.ref,
        "snapshot": state.snapshot,
        "version": state.version,
        "history": list(state.history),
        "older": state.older,
        "machine": state.machine,
        "pushed_ns": state.pushed_ns,
    }
    if accepted is not None:
        doc["accepted"] = accepted
    if synced:
        doc["synced"] = synced
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    control.rewrite(path, json.dumps(doc).encode(), mode=0o600)


def _synced(path: Path) -> list[list[Any]]:
    """The heads this machine synced (pushed, or pulled and landed) with their versions,
    newest first: what a pull's history walk may start from."""
    doc = _read(path)
    pairs = doc.get("synced") if doc is not None else None
    if not isinstance(pairs, list):
        return []
    return [
        p
        for p in pairs
        if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], int)
    ]


# How many synced heads a memory keeps (one per workspace of this store syncing the ref is
# what matters: the newest synced state of each).
SYNCED_KEPT = 32


def remember(store: Store, remote: Remote, state: RefState) -> None:
    """Records `state` as seen when it is newer than what was (an accepted rollback is then
    behind it, and forgotten)."""
    path = _path(store, remote, state.ref)
    with _lock(store, remote):
        was = _load(path)
        if was is not None and was.version >= state.version:
            return
        _write(path, remote, state, synced=_synced(path))


def synced(store: Store, remote: Remote, state: RefState) -> None:
    """Records that this machine synced `state` (pushed it, or pulled and landed it), so a
    later pull knows at which version its last synced head was, however far the ref moved."""
    path = _path(store, remote, state.ref)
    with _lock(store, remote):
        was = _load(path)
        newest = state if was is None or state.version > was.version else was
        pairs = [[state.snapshot, state.version]]
        pairs += [p for p in _synced(path) if p[0] != state.snapshot][: SYNCED_KEPT - 1]
        marker = _read(path) or {}
        accepted = marker.get("accepted") if newest is was else None
        _write(path, remote, newest, accepted, pairs)


def accept(store: Store, remote: Remote, ref: str, found: RefState | None) -> None:
    """Records that the person accepted `found` (None: the ref's loss) although this machine
    saw newer: that state is no rollback any more, while what was seen stays remembered (a
    push whose head holds it goes on from it, so the newer work stays in the ref's history)."""
    path = _path(store, remote, ref)
    with _lock(store, remote):
        was = _load(path)
        if was is None:
            return
        version, snapshot = _key_of(found)
        marker = {"version": version, "snapshot": snapshot}
        _write(path, remote, was, marker, _synced(path))


def seen_at(store: Store, remote: Remote, ref: str, snapshot: str) -> int | None:
    """The version at which this machine saw `snapshot` as the ref's head (it synced it then,
    or its memory's recent history says so), or None when it does not know."""
    path = _path(store, remote, ref)
    for head, version in _synced(path):
        if head == snapshot:
            return int(version)
    seen = _load(path)
    if seen is None:
        return None
    for offset, head in enumerate(seen.history):
        if head == snapshot:
            return seen.version - offset
    return None


def trust(
    store: Store,
    remote: Remote,
    ref: str,
    found: RefState | None,
    where: str,
    *,
    accept_rollback: bool = False,
) -> RefState | None:
    """Refuses `found` (the ref as just read) when it is older than this machine saw it
    (unless `accept_rollback`: then it is accepted), else remembers it as seen."""
    try:
        check(store, remote, ref, found, where)
    except RollbackError:
        if not accept_rollback:
            raise
        accept(store, remote, ref, found)
        return found
    if found is not None:
        remember(store, remote, found)
    return found


def read(
    store: Store,
    remote: Remote,
    key: RecoveryKey,
    ref: str,
    where: str,
    *,
    accept_rollback: bool = False,
) -> RefState | None:
    """Reads the ref and `trust`s it: what push, pull and work act on."""
    found = read_ref(remote, key, ref)
    return trust(store, remote, ref, found, where, accept_rollback=accept_rollback)
