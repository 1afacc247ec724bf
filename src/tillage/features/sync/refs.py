"""A remote's refs: the sealed head document of each named ref, its compare-and-swap write, the
history behind it (recent heads in the document, older ones in sealed segments) and the lease
that makes one machine at a time its writer.

A ref document is `{ref, snapshot, version, history, older, machine, pushed_ns}`. `version`
grows by one with every write (a push or a repair), and `history[i]` is the head the ref held
at version `version - i`: the write of version `v` puts its head first. When the document
would hold more than `HISTORY` heads, its oldest ones are sealed into a *segment*
(`{ref, newest, heads, older}`, `newest` the version of `heads[0]`), an immutable document
named by a keyed hash of the ref, its newest version and its content, and the ref's `older`
points to it (each segment to the one before). So whether a ref ever held a snapshot has no
horizon: the segments are walked on demand, newest first, and kept once read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from blake3 import blake3

from tillage.crypto import RecoveryKey, name_of, open_document, seal_document
from tillage.errors import IntegrityError
from tillage.features.sync.errors import LeaseDamagedError, LeaseExpiredError, LeaseHeldError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

    from tillage.features.sync.repository import Opened
    from tillage.remote.base import Remote

__all__ = [
    "HISTORY",
    "LEASE_NS",
    "Lease",
    "RefState",
    "doc_key",
    "holds",
    "lease_ns",
    "open_ref",
    "read_ref",
    "repair_step",
    "write_ref",
]

# Heads a ref document holds itself; a write past this seals the oldest half into a segment.
# Read at call time, so a test may lower it.
HISTORY = 256
LEASE_NS = 10 * 60 * 1_000_000_000


def doc_key(opened: Opened) -> RecoveryKey:
    """The key refs, segments and leases are named and sealed with: the remote's master key
    (format 2), which every recovery key's key file opens, so a rekey leaves them as they
    are. (A MasterKey has RecoveryKey's shape: `name_of` and `seal_document` take it.)"""
    return opened.key_for_documents


def repair_step(ref: str) -> str:
    """The command that rewrites a damaged or lost ref from what this machine saw of it."""
    return f"till remote repair-ref --ref {ref}"


@dataclass(frozen=True)
class RefState:
    """One version of a ref as the remote holds it; `token` is what its compare-and-swap
    compares (None for a state rebuilt from this machine's memory, never read)."""

    ref: str
    snapshot: str
    version: int
    history: tuple[str, ...]
    older: str | None
    machine: str
    pushed_ns: int
    token: str | None


def _state(ref: str, doc: Mapping[str, Any], token: str | None) -> RefState | None:
    """The state a ref document describes, or None when it is not one of `ref`."""
    snapshot, version = doc.get("snapshot"), doc.get("version", 0)
    history, older = doc.get("history") or [snapshot], doc.get("older")
    if (
        doc.get("ref") != ref
        or not isinstance(snapshot, str)
        or not _is_id(snapshot)
        or not isinstance(version, int)
        or isinstance(version, bool)
        or version < 0
        or not isinstance(history, list)
        or not all(_is_id(h) for h in history)
        or not (older is None or isinstance(older, str))
    ):
        return None
    machine, pushed = doc.get("machine"), doc.get("pushed_ns")
    return RefState(
        ref,
        snapshot,
        version,
        tuple(history),
        older,
        machine if isinstance(machine, str) else "",
        pushed if isinstance(pushed, int) else 0,
        token,
    )


def _is_id(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def read_ref(remote: Remote, key: RecoveryKey, ref: str) -> RefState | None:
    """The ref's head as the remote holds it; None when nothing was pushed to it. A document
    that does not open, or is not a head of `ref`, is `integrity`, its next step the repair
    (run where the ref's history is known)."""
    name = name_of(key, "ref", ref)
    found = remote.read_versioned(name)
    if found is None:
        return None
    return open_ref(key, name, found.data, found.token, ref)


def open_ref(
    key: RecoveryKey, name: str, data: bytes, token: str | None, ref: str | None = None
) -> RefState:
    """The ref document stored under `name` (of `ref`, when the caller knows which: a
    listing does not); `integrity` naming the repair when it does not open or is no head of
    the ref that name is for."""
    try:
        doc = open_document(key, name, data)
    except IntegrityError as err:
        raise _damaged(ref, str(err)) from None
    claimed = doc.get("ref")
    if ref is None and isinstance(claimed, str) and name_of(key, "ref", claimed) == name:
        ref = claimed
    state = _state(ref, doc, token) if ref is not None else None
    if state is None:
        raise _damaged(ref, f"the remote's head {name!r} does not hold a snapshot")
    return state


def _damaged(ref: str | None, message: str) -> IntegrityError:
    which = repr(ref) if ref is not None else "REF"
    return IntegrityError(
        message,
        next_step=f"on a machine that pushed or pulled ref {which}, run "
        f"`{repair_step(ref or 'REF')}` (it rewrites the head from what that machine saw); "
        "nothing was changed here",
        details={"ref": ref},
    )


def write_ref(
    remote: Remote,
    key: RecoveryKey,
    ref: str,
    head: str,
    current: RefState | None,
    machine: str,
    *,
    expect: str | None,
) -> RefState | None:
    """Compare-and-swaps the ref to `head` at the version after `current`'s (1 for a new
    ref), `current`'s history behind it, against the token `expect` (None: the ref must be
    absent). Returns the state written, or None when another writer got there first."""
    version = current.version + 1 if current is not None else 1
    history = [head, *(current.history if current is not None else ())]
    older = current.older if current is not None else None
    bound = max(2, HISTORY)
    if len(history) > bound:
        keep = len(history) - bound // 2
        older = _seal_segment(remote, key, ref, version - keep, history[keep:], older)
        history = history[:keep]
    name = name_of(key, "ref", ref)
    pushed_ns = time.time_ns()
    doc = {
        "ref": ref,
        "snapshot": head,
        "version": version,
        "history": history,
        "older": older,
        "machine": machine,
        "pushed_ns": pushed_ns,
    }
    if not remote.write_if(name, seal_document(key, name, doc), expect):
        return None
    return RefState(ref, head, version, tuple(history), older, machine, pushed_ns, None)


def _seal_segment(
    remote: Remote, key: RecoveryKey, ref: str, newest: int, heads: list[str], older: str | None
) -> str:
    """Puts an immutable segment of older heads and returns its name: a keyed hash of the ref,
    its newest version and its content: two writers of the same segment write it under one
    name, and different segments never share one."""
    import json

    body = {"ref": ref, "newest": newest, "heads": heads, "older": older}
    digest = blake3(json.dumps(body, sort_keys=True).encode()).hexdigest()
    name = name_of(key, "segment", f"{ref}\0{newest}\0{digest}")
    remote.put(name, seal_document(key, name, body))
    return name


# Segments read in this process (immutable, and named by their content under the key).
_SEGMENTS: dict[str, tuple[int, tuple[str, ...], str | None]] = {}
_SEGMENT_CACHE = 4096


def _segment(
    remote: Remote, key: RecoveryKey, ref: str, name: str
) -> tuple[int, tuple[str, ...], str | None] | None:
    """A segment's (newest version, heads, older), or None when it is absent or does not open
    (the history ends there: what lies beyond is not proven)."""
    from tillage.remote.errors import RemoteMissingError

    cached = _SEGMENTS.get(name)
    if cached is not None:
        return cached
    try:
        doc = open_document(key, name, remote.get(name))
    except (RemoteMissingError, IntegrityError):
        return None
    newest, heads, older = doc.get("newest"), doc.get("heads"), doc.get("older")
    if (
        doc.get("ref") != ref
        or not isinstance(newest, int)
        or not isinstance(heads, list)
        or not all(_is_id(h) for h in heads)
        or not (older is None or isinstance(older, str))
    ):
        return None
    if len(_SEGMENTS) >= _SEGMENT_CACHE:
        _SEGMENTS.clear()
    _SEGMENTS[name] = found = (newest, tuple(heads), older)
    return found


def _heads(
    remote: Remote, key: RecoveryKey, state: RefState, floor: int
) -> Iterator[tuple[int, str]]:
    """(version, head) of every version of the ref from `state`'s down to `floor`, newest
    first: the document's own history, then its segments."""
    version = state.version
    for head in state.history:
        if version < floor:
            return
        yield version, head
        version -= 1
    older = state.older
    while older is not None:
        segment = _segment(remote, key, state.ref, older)
        if segment is None:
            return
        newest, heads, older = segment
        for offset, head in enumerate(heads):
            if newest - offset < floor:
                return
            yield newest - offset, head


def holds(
    remote: Remote, key: RecoveryKey, state: RefState, snapshot: str, at: int | None = None
) -> bool:
    """Tells whether the ref ever held `snapshot` (at or before `state`). `at`, when this
    machine saw `snapshot` as the head at that version, bounds the walk: only versions from
    `at` on are read (what was pushed while this machine was away), never the whole past."""
    floor = at if at is not None and at <= state.version else 0
    return any(head == snapshot for _v, head in _heads(remote, key, state, floor))


# -- the lease ----------------------------------------------------------------------------------


def lease_ns(env: Mapping[str, str]) -> int:
    """How long a lease holds without renewal: `TILLAGE_SYNC_LEASE_SECONDS` (tests, slow
    links), else ten minutes."""
    text = env.get("TILLAGE_SYNC_LEASE_SECONDS", "")
    return int(float(text) * 1_000_000_000) if text.replace(".", "", 1).isdigit() else LEASE_NS


class Lease:
    """The single writer of one ref: created, renewed by its holder (also while a long upload
    runs), taken over only when it expired (or is damaged: it does not open, or is no lease of
    this ref) and the caller said --takeover, and released by a compare-and-swap to a
    `released` document (never a delete that could remove a takeover)."""

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

    def _held(self, data: bytes) -> dict[str, Any] | None:
        """The lease document in `data`, or None when it is damaged."""
        try:
            doc = open_document(self.key, self.name, data)
        except IntegrityError:
            return None
        expires = doc.get("expires_ns", 0)
        if doc.get("ref") != self.ref or not isinstance(expires, int):
            return None
        return doc

    def acquire(self, *, takeover: bool, damaged: bool = False) -> None:
        """Takes the lease, or says why not: `busy` while another machine's is live, an
        expired one only with `takeover`, a damaged one with `takeover` or `damaged` (a
        repair, which mends what it finds damaged)."""
        for _ in range(3):
            found = self.remote.read_versioned(self.name)
            if found is None:
                if self._write(None):
                    return
                continue
            held = self._held(found.data)
            if held is None:
                if not (takeover or damaged):
                    raise LeaseDamagedError(
                        f"the lease of ref {self.ref!r} on the remote is damaged (it does not "
                        "open as a lease of that ref): no machine can renew it"
                    )
            else:
                free = bool(held.get("released")) or held.get("holder") == self.holder
                expired = int(held["expires_ns"]) < time.time_ns()
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
