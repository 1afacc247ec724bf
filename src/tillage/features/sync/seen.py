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
from pathlib import Path

from blake3 import blake3

from tillage.crypto import RecoveryKey
from tillage.features.sync.errors import RollbackError
from tillage.features.sync.refs import RefState, read_ref
from tillage.platform.fs import atomic_write
from tillage.platform.locks import file_lock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.remote.base import Remote
    from tillage.store.store import Store

__all__ = [
    "check",
    "forget",
    "identity",
    "read",
    "recall",
    "recalled",
    "remember",
    "rolled_back",
    "seen_at",
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


def _path(store: Store, remote: Remote, ref: str) -> Path:
    return _folder(store, remote) / f"{_hash(ref)}.json"


def _load(path: Path) -> RefState | None:
    try:
        doc = json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return None  # never seen (a damaged memory is a forgotten one: it only weakens a check)
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


def rolled_back(seen: RefState | None, found: RefState | None) -> bool:
    """Tells whether `found` is older than `seen`: gone, a lower version, or another snapshot
    at the same version."""
    if seen is None:
        return False
    if found is None or found.version < seen.version:
        return True
    return found.version == seen.version and found.snapshot != seen.snapshot


def check(store: Store, remote: Remote, ref: str, found: RefState | None, where: str) -> None:
    """Refuses a ref older than this machine saw it: a lower version, another snapshot at the
    same version, or none at all (`sync.rollback`, naming both; `where` names the remote)."""
    seen = recall(store, remote, ref)
    if seen is None or not rolled_back(seen, found):
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


def remember(store: Store, remote: Remote, state: RefState, *, replace: bool = False) -> None:
    """Records `state` as seen, when it is newer than what was (or, with `replace`, whatever
    was: a rollback the person accepted)."""
    path = _path(store, remote, state.ref)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with file_lock(store.locks_dir / f"seen-{_hash(identity(remote))}.lock", what="sync memory"):
        was = _load(path)
        if not replace and was is not None and was.version >= state.version:
            return
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
        atomic_write(path, json.dumps(doc).encode(), mode=0o600)


def forget(store: Store, remote: Remote, ref: str) -> None:
    """Drops what was seen of `ref` (a loss the person accepted: the next head is new)."""
    lock = file_lock(store.locks_dir / f"seen-{_hash(identity(remote))}.lock", what="sync memory")
    with lock, contextlib.suppress(FileNotFoundError):
        _path(store, remote, ref).unlink()


def seen_at(seen: RefState | None, snapshot: str) -> int | None:
    """The version at which this machine saw `snapshot` as the ref's head (from its memory's
    recent history), or None when it does not know."""
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
    accept: bool = False,
) -> RefState | None:
    """Refuses `found` (the ref as just read) when it is older than this machine saw it
    (unless `accept`: then it becomes what this machine knows), else remembers it as seen."""
    try:
        check(store, remote, ref, found, where)
    except RollbackError:
        if not accept:
            raise
        if found is None:
            forget(store, remote, ref)
        else:
            remember(store, remote, found, replace=True)
        return found
    if found is not None:
        remember(store, remote, found)
    return found


def read(
    store: Store, remote: Remote, key: RecoveryKey, ref: str, where: str, *, accept: bool = False
) -> RefState | None:
    """Reads the ref and `trust`s it: what push, pull and work act on."""
    return trust(store, remote, ref, read_ref(remote, key, ref), where, accept=accept)
