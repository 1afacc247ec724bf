"""Claims: advisory leases on path globs, shared by a workspace and all its forks.

A claim is a fact in the publication log (`claim`, its `claimed` event; `release`, its
`released` event), kept for the family: the workspace at the root of the fork tree
(`family.root_of`), so a claim taken in a fork is seen from its parent and the other way round.
A claim covers what its glob covers (core/globs.py); a claim that another owner's live claim
overlaps is refused, naming the holder. Expiry needs no fact: an expired claim is simply not
live (`expires_ns` at or before now), and vanishes from every answer.

Taking a claim checks and publishes under one lock per family (`claims-<family>.lock`), with
the index caught up with the log inside it: of two processes claiming overlapping globs at the
same moment, exactly one wins.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

from tillage.core import globs
from tillage.errors import AmbiguousError, echo
from tillage.features.radar.claim_errors import (
    BadOwnerError,
    BadTtlError,
    ClaimHeldError,
    ClaimNotFoundError,
    ClaimNotOwnerError,
)
from tillage.platform import clock
from tillage.platform.locks import file_lock
from tillage.platform.names import random_hex
from tillage.store.rows import ClaimRow
from tillage.store.store import Store
from tillage.workspace.attach import Workspace
from tillage.workspace.family import root_of

# A crashed agent's claim must not block the others for long: an hour unless told otherwise.
DEFAULT_TTL_SECONDS = 3600
# The longest lease: a month. There is no claim without expiry (`--ttl-seconds 0` is refused).
MAX_TTL_SECONDS = 30 * 24 * 3600
MAX_OWNER = 200
MIN_ID_PREFIX = 6
ID_BYTES = 8  # 16 hex characters


@dataclass(frozen=True)
class Taken:
    """A claim as taken: the claim, and whether it renewed the owner's claim on the same
    pattern (same ID, later expiry) rather than adding one."""

    claim: ClaimRow
    renewed: bool


def family_of(ws: Workspace) -> str:
    """The ID claims are kept under: the root of the fork tree holding `ws`."""
    return root_of(ws.store, ws.id)


def is_live(claim: ClaimRow, now_ns: int) -> bool:
    """Tells whether a claim still holds at `now_ns` (None: it never expires)."""
    return claim.expires_ns is None or claim.expires_ns > now_ns


def live_claims(store: Store, family: str, now_ns: int | None = None) -> list[ClaimRow]:
    """The family's claims that have not expired, oldest first."""
    now = clock.now_ns() if now_ns is None else now_ns
    return [c for c in store.claims(family) if is_live(c, now)]


def check_owner(owner: str) -> str:
    """Returns the owner as given, or raises BadOwnerError for an empty, over-long or
    control-character name."""
    if not owner.strip():
        raise BadOwnerError("a claim needs an owner (--owner)")
    if len(owner) > MAX_OWNER or any(ord(ch) < 32 or ord(ch) == 127 for ch in owner):
        raise BadOwnerError(
            f"the owner {echo(owner)} is not a short printable name (at most {MAX_OWNER})"
        )
    return owner


def check_ttl(ttl_seconds: int) -> int:
    """Returns the time to live, or raises BadTtlError outside 1 s .. MAX_TTL_SECONDS."""
    if not 1 <= ttl_seconds <= MAX_TTL_SECONDS:
        raise BadTtlError(
            f"--ttl-seconds {ttl_seconds} is out of range: a claim lives 1 to "
            f"{MAX_TTL_SECONDS} seconds (a claim that never expires would outlive a crash)"
        )
    return ttl_seconds


def _lock(store: Store, family: str) -> AbstractContextManager[None]:
    """The lock that makes check-then-publish one step for a family's claims."""
    return file_lock(store.locks_dir / f"claims-{family}.lock", what="the claims of this family")


def take(ws: Workspace, pattern: str, owner: str, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> Taken:
    """Claims `pattern` for `owner` for `ttl_seconds`. Refused (ClaimHeldError, naming the
    holder) when a live claim of another owner overlaps it; the same owner's overlapping
    claims are allowed, and a claim on the very same pattern is renewed (its ID kept)."""
    normalized = globs.normalize(pattern)
    globs.parse(normalized)  # a malformed class is refused before anything is locked
    check_owner(owner)
    check_ttl(ttl_seconds)
    store = ws.store
    family = family_of(ws)
    with _lock(store, family):
        store.catch_up()
        now = clock.now_ns()
        live = live_claims(store, family, now)
        for other in live:
            if other.owner == owner:
                continue
            where = globs.witness(other.pattern, normalized)
            if where is not None:
                raise _held(other, normalized, where)
        same = next((c for c in live if c.owner == owner and c.pattern == normalized), None)
        claim_id = same.id if same is not None else random_hex(ID_BYTES)
        expires_ns = now + ttl_seconds * 1_000_000_000
        record = store.publish(
            "claim",
            {
                "id": claim_id,
                "family": family,
                "workspace": ws.id,
                "pattern": normalized,
                "owner": owner,
                "expires_ns": expires_ns,
            },
        )
    claim = ClaimRow(
        claim_id, family, normalized, owner, expires_ns, record.at_ns, ws.id, str(ws.root)
    )
    return Taken(claim, renewed=same is not None)


def _expires_text(claim: ClaimRow) -> str | None:
    return None if claim.expires_ns is None else clock.rfc3339(claim.expires_ns)


def _held(holder: ClaimRow, pattern: str, where: str) -> ClaimHeldError:
    expires = _expires_text(holder)
    until = f"until {expires}" if expires else "with no expiry"
    return ClaimHeldError(
        f"{echo(pattern)} overlaps {echo(holder.pattern)}, claimed by {echo(holder.owner)} "
        f"{until} (claim {holder.id}; both cover {echo(where)})",
        details={
            "holder": holder.owner,
            "claim": holder.id,
            "pattern": holder.pattern,
            "expires_at": expires,
            "path": where,
        },
    )


def find(store: Store, family: str, ref: str, now_ns: int) -> ClaimRow:
    """The live claim `ref` names (its ID, or a unique prefix of at least 6 characters)."""
    wanted = ref.strip().lower()
    live = live_claims(store, family, now_ns)
    exact = [c for c in live if c.id == wanted]
    if exact:
        return exact[0]
    found = [c for c in live if len(wanted) >= MIN_ID_PREFIX and c.id.startswith(wanted)]
    if len(found) > 1:
        raise AmbiguousError(f"{echo(ref)} matches more than one claim")
    if not found:
        raise ClaimNotFoundError(
            f"no live claim {echo(ref)} (it was released, it expired, or it never was)"
        )
    return found[0]


def release(ws: Workspace, ref: str, owner: str) -> ClaimRow:
    """Releases the live claim `ref` (ID or unique prefix) held by `owner`; another owner's
    claim is refused (ClaimNotOwnerError naming the holder), an unknown or expired one is
    ClaimNotFoundError. Returns the claim that was released."""
    check_owner(owner)
    store = ws.store
    family = family_of(ws)
    with _lock(store, family):
        store.catch_up()
        claim = find(store, family, ref, clock.now_ns())
        if claim.owner != owner:
            expires = _expires_text(claim)
            raise ClaimNotOwnerError(
                f"claim {claim.id} on {echo(claim.pattern)} is held by {echo(claim.owner)}, "
                f"not {echo(owner)}",
                details={
                    "holder": claim.owner,
                    "claim": claim.id,
                    "pattern": claim.pattern,
                    "expires_at": expires,
                },
            )
        store.publish(
            "release",
            {"id": claim.id, "workspace": ws.id, "pattern": claim.pattern, "owner": claim.owner},
        )
    return claim


def release_taken_in(store: Store, family: str, taken_in: str, *, by: str) -> list[ClaimRow]:
    """Releases every live claim the workspace `taken_in` took (a fork being retired: no one
    works there any more), whoever owns it, each with the `release` fact that `release`
    publishes: a `released` event of the workspace `by` (the one retiring the fork, where its
    events are read). Returns them, oldest first. The fork is usually removed already: its
    claims are no longer live for anyone (Store.claims), and are released here so that the
    log says they ended."""
    with _lock(store, family):
        store.catch_up()
        now = clock.now_ns()
        taken = [
            c
            for c in store.claims(family, retired=True)
            if c.workspace == taken_in and is_live(c, now)
        ]
        for claim in taken:
            store.publish(
                "release",
                {
                    "id": claim.id,
                    "workspace": by,
                    "pattern": claim.pattern,
                    "owner": claim.owner,
                },
            )
    return taken


def listing(ws: Workspace) -> list[ClaimRow]:
    """The live claims of the workspace's family, oldest first."""
    ws.store.catch_up()
    return live_claims(ws.store, family_of(ws))


def reaching(claims: list[ClaimRow], path: str) -> list[ClaimRow]:
    """The claims among `claims` that cover `path` or something below it (globs.reaches):
    those a collision on `path` concerns, when it is a folder."""
    return [c for c in claims if globs.reaches(c.pattern, path)]
