"""The radar, claims and try verbs: `till radar`, `claim`, `claims`, `release`, `try`."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import AmbiguousError, BusyError, IntegrityError
from tillage.features.radar.claim_errors import (
    BadOwnerError,
    BadPatternError,
    BadTtlError,
    ClaimHeldError,
    ClaimNotFoundError,
    ClaimNotOwnerError,
)
from tillage.platform.errors import DiskFullError
from tillage.verbs.contract import (
    Audience,
    Contract,
    Effect,
    Scope,
    ToolLimit,
    ToolSpec,
    Verb,
    param,
)
from tillage.verbs.invoke import Context
from tillage.verbs.views import SnapshotInfo, snapshot_info

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Declared here (the feature module says the same, and a test holds them equal) so listing
# contracts imports no feature code.
DEFAULT_TTL_SECONDS = 3600
MAX_TTL_SECONDS = 30 * 24 * 3600


# -- radar -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RadarRequest:
    family: bool = param(
        "compare the whole fork family from its root workspace (inside a fork, its sibling "
        "forks too), not just this workspace and the forks below it",
        default=False,
    )


@dataclass(frozen=True)
class ClaimRef:
    id: str
    owner: str
    pattern: str
    # The folder and workspace ID that took the claim (null: its record does not say).
    workspace: str | None
    workspace_id: str | None
    # True when it was taken in one of the places colliding (`forks`, or the workspace).
    party: bool


@dataclass(frozen=True)
class ConflictInfo:
    path: str
    forks: tuple[str, ...]
    workspace: bool
    # Live claims (of the workspace's family) that cover the path or anything below it (a
    # conflict on a folder concerns what is in it): who said they work there.
    claimed_by: tuple[ClaimRef, ...]
    # `unclaimed`: no live claim covers it. `covered`: every claim covering it has one owner
    # and was taken in one of the colliding places. `contested`: claims of two or more owners
    # cover it, or one was taken in a place that is not colliding (or not known).
    claim: str


@dataclass(frozen=True)
class RadarResult:
    # Paths changed in two or more places: forks by name (`a/b`: fork b of fork a), and
    # whether the workspace itself changed it since the fork's base. A folder's removal (or
    # its change into a file) against a touch beneath it is one conflict at the folder.
    conflicts: tuple[ConflictInfo, ...]
    # Live forks compared (forks of forks included).
    forks_scanned: int
    # `conflict` events this look appended (a collision that opened, changed or resolved).
    events: int
    # The folder of the workspace compared with its forks (`workspace` in a conflict means
    # it): this one, or with --family the root of its fork family.
    scanned: str


def radar(ctx: Context, req: RadarRequest) -> RadarResult:
    from tillage.features.radar.claims import listing
    from tillage.features.radar.radar import observe_scan

    ws = ctx.workspace
    scanned_id, scanned = ws.id, str(ws.root)
    if req.family:
        from tillage.workspace.family import root_of

        scanned_id = root_of(ws.store, ws.id)
        row = ws.store.workspace(scanned_id)
        scanned = row.root if row is not None else scanned
    seen = observe_scan(ws.store, scanned_id)
    live = listing(ws) if seen.collisions else []
    places = dict(seen.places)
    return RadarResult(
        conflicts=tuple(_conflict_info(c, live, places) for c in seen.collisions),
        forks_scanned=seen.forks_scanned,
        events=seen.events,
        scanned=scanned,
    )


def _conflict_info(collision: Any, live: list[Any], places: dict[str, str]) -> ConflictInfo:
    """A collision with the live claims over it and what they say (core.radar.claim_state)."""
    from tillage.core.radar import claim_state, is_party
    from tillage.features.radar.claims import reaching

    over = reaching(live, collision.path)
    where = [places.get(k.workspace) if k.workspace is not None else None for k in over]
    return ConflictInfo(
        collision.path,
        collision.forks,
        collision.workspace,
        tuple(
            ClaimRef(k.id, k.owner, k.pattern, k.root, k.workspace, is_party(collision, place))
            for k, place in zip(over, where, strict=True)
        ),
        claim_state(collision, [(k.owner, p) for k, p in zip(over, where, strict=True)]),
    )


# -- claims ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimInfo:
    id: str
    pattern: str
    owner: str
    # RFC 3339 UTC; null only for a claim without expiry (none is taken by this version).
    expires_at: str | None
    claimed_at: str
    # The folder (absolute path) of the workspace or fork that took it, and that workspace's
    # ID (`till status` shows it as `id`); null for a claim whose record does not say.
    workspace: str | None
    workspace_id: str | None


def _claim_info(row: Any) -> ClaimInfo:
    from tillage.platform.clock import rfc3339

    return ClaimInfo(
        id=row.id,
        pattern=row.pattern,
        owner=row.owner,
        expires_at=None if row.expires_ns is None else rfc3339(row.expires_ns),
        claimed_at=rfc3339(row.claimed_ns),
        workspace=row.root,
        workspace_id=row.workspace,
    )


@dataclass(frozen=True)
class ClaimRequest:
    pattern: str = param(
        "a workspace-relative glob: `*` and `?` within a name, `[...]`, `**` for any depth; "
        "a plain name covers the folder's contents too",
        positional=True,
    )
    owner: str = param("who holds the claim (an agent or person's name)")
    ttl_seconds: int = param(
        "how long the claim lives, 1 to 2592000 seconds (it vanishes after)",
        default=DEFAULT_TTL_SECONDS,
        metavar="N",
    )


@dataclass(frozen=True)
class ClaimResult:
    claim: ClaimInfo
    # True when the owner already held this very pattern: same ID, later expiry.
    renewed: bool

    def undo_plan(self, _req: ClaimRequest) -> dict[str, Any] | None:
        """`till undo`: release the claim taken (a renewal only moved its expiry)."""
        if self.renewed:
            return {"kind": "none", "why": "a renewal only moved the claim's expiry"}
        return {"kind": "release", "claim": self.claim.id, "owner": self.claim.owner}


def claim(ctx: Context, req: ClaimRequest) -> ClaimResult:
    from tillage.features.radar.claims import take

    taken = take(ctx.workspace, req.pattern, req.owner, req.ttl_seconds)
    return ClaimResult(claim=_claim_info(taken.claim), renewed=taken.renewed)


@dataclass(frozen=True)
class ClaimsRequest:
    pass


@dataclass(frozen=True)
class ClaimsResult:
    # Live claims of the workspace and all its forks, oldest first; expired ones are gone.
    claims: tuple[ClaimInfo, ...]


def claims(ctx: Context, req: ClaimsRequest) -> ClaimsResult:
    from tillage.features.radar.claims import listing

    return ClaimsResult(claims=tuple(_claim_info(c) for c in listing(ctx.workspace)))


@dataclass(frozen=True)
class ReleaseRequest:
    claim: str = param("the claim's ID (or a unique prefix of 6 or more)", positional=True)
    owner: str = param("the owner that took it")


@dataclass(frozen=True)
class ReleaseResult:
    # The claim as it was until released.
    released: ClaimInfo

    def undo_plan(self, _req: ReleaseRequest) -> dict[str, Any] | None:
        """`till undo`: the claim back as it was taken (its expiry unchanged)."""
        return {"kind": "claim", "claim": self.released.id}


def release(ctx: Context, req: ReleaseRequest) -> ReleaseResult:
    from tillage.features.radar.claims import release as release_claim

    return ReleaseResult(released=_claim_info(release_claim(ctx.workspace, req.claim, req.owner)))


# -- try ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TryRequest:
    command: tuple[str, ...] = param(
        "the command, after `--`; one word runs through /bin/sh -c, several are the argv",
        remainder=True,
        metavar="CMD",
    )
    label: str | None = param(
        "a label for both snapshots (default: `try: CMD`)",
        default=None,
        short="-m",
        flag="--label",
        aliases=("--message",),
        metavar="LABEL",
    )


@dataclass(frozen=True)
class TryResult:
    before: SnapshotInfo
    after: SnapshotInfo
    exit_code: int
    # The command's stdout and stderr together (the last 64 KiB).
    output: str
    # The snapshot to rewind to for putting the folder back as it was before the attempt
    # (`before`'s ID), as a merge's or a rewind's `undo` is.
    undo: str
    # The exact command that does it: `till rewind UNDO --yes`.
    undo_command: str

    def exit_status(self) -> int:
        """`till try` exits with the command's own status (CONTRACT: global rules)."""
        return self.exit_code


def try_run(ctx: Context, req: TryRequest) -> TryResult:
    from tillage.features.radar.trying import try_command, undo_command

    tried = try_command(
        ctx.workspace,
        req.command,
        folder=ctx.settings.folder,
        label=req.label,
        agent=ctx.settings.agent,
        launch=ctx.settings.launch,
        on_progress=ctx.on_progress,
    )
    return TryResult(
        before=snapshot_info(tried.before),
        after=snapshot_info(tried.after),
        exit_code=tried.exit_code,
        output=tried.output,
        undo=tried.before.id,
        undo_command=undo_command(tried.before.id),
    )


CLAIM_ERRORS = (BadPatternError, BadOwnerError, BadTtlError, BusyError)

VERBS = (
    Verb(
        Contract(
            name="radar.scan",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=RadarRequest,
            result=RadarResult,
            cli="radar",
            errors=(BusyError, IntegrityError),
            event="conflict",
            doc="Paths changed in two or more places among this workspace and its live forks "
            "(each fork since its base, the workspace since each fork's base), from sealed "
            "states only: seal first to see live edits. A folder removed or made a file in one "
            "place collides with anything touched beneath it in another (`lib/` deleted while "
            "`lib/new.py` is added), as does a file where another place has a folder: that "
            "conflict names the folder, once, with both places. Each collision that opened, "
            "changed or resolved since the last look is appended as a `conflict` event. Inside "
            "a fork, --family compares the whole family from its root. Each conflict lists the "
            "live claims covering its path or anything below it (`claimed_by`, each with the "
            "folder that took it and `party`: taken in one of the colliding places) and "
            "`claim`: `unclaimed` (none), `covered` (all held by one owner and taken in a "
            "colliding place: the others walked into that owner's work), or `contested` (two "
            "or more owners, or a claim taken in a place that is not colliding).",
            tool=ToolSpec(
                doc="Paths changed in two or more places among this workspace and its live "
                "forks (each fork since its base, the workspace since each fork's base), from "
                "sealed states only: seal first to see live edits. A folder removed or made a "
                "file in one place collides with anything touched beneath it in another, as "
                "does a file where another place has a folder. Each collision that opened, "
                "changed or resolved since the last look is appended as a `conflict` event. "
                "Inside a fork, `family: true` compares the whole family from its root. Each "
                "conflict lists the live claims covering its path (`claimed_by`) and `claim`: "
                "`unclaimed`, `covered` (one owner, taken in a colliding place) or `contested`."
            ),
        ),
        radar,
    ),
    Verb(
        Contract(
            name="claim.take",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=ClaimRequest,
            result=ClaimResult,
            cli="claim",
            errors=(*CLAIM_ERRORS, ClaimHeldError),
            event="claimed",
            doc="Take an advisory lease on a path glob, shared by the workspace and all its "
            "forks, for --ttl-seconds (default 3600). A live claim of another owner that "
            "overlaps it (some path both cover) is a conflict naming the holder; the same "
            "owner may overlap its own claims, and claiming the same pattern again renews it "
            "(same ID). A plain name covers that file or folder and all below it; `src/*` "
            "covers src's entries only, `src/**` every depth. Claim IDs are 16 hex characters. "
            "A claim names the folder (`workspace`) and the workspace ID (`workspace_id`) that "
            "took it.",
            tool=ToolSpec(
                limits=(ToolLimit("ttl_seconds", DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS),),
                doc="Take an advisory lease on a path glob, shared by the workspace and all "
                "its forks, for `ttl_seconds`. A live claim of another owner that overlaps it "
                "(some path both cover) is a conflict naming the holder; the same owner may "
                "overlap its own claims, and claiming the same pattern again renews it (same "
                "ID). A plain name covers that file or folder and all below it; `src/*` covers "
                "src's entries only, `src/**` every depth. Claim IDs are 16 hex characters.",
                docs=(("ttl_seconds", "how long the claim lives, in seconds (it vanishes after)"),),
            ),
        ),
        claim,
    ),
    Verb(
        Contract(
            name="claim.list",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=ClaimsRequest,
            result=ClaimsResult,
            cli="claims",
            doc="The live claims of the workspace and all its forks; expired ones are gone.",
        ),
        claims,
    ),
    Verb(
        Contract(
            name="claim.release",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=ReleaseRequest,
            result=ReleaseResult,
            cli="release",
            errors=(
                *CLAIM_ERRORS,
                ClaimNotOwnerError,
                ClaimNotFoundError,
                AmbiguousError,
            ),
            event="released",
            doc="Release a live claim by ID (or a unique prefix of 6 or more); only its owner "
            "can (another owner's is a conflict naming the holder); an unknown or expired claim "
            "is not_found. `released` is the claim object as it was.",
        ),
        release,
    ),
    Verb(
        Contract(
            name="try.run",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=TryRequest,
            result=TryResult,
            cli="try",
            errors=(BusyError, DiskFullError, IntegrityError),
            live_commands=True,
            tool=ToolSpec(
                doc="Run a command in the workspace itself (not a copy: it can change or "
                "delete any file there), sealing the folder before (trigger try_before) and "
                "after (try_after, even when it fails). Its exit status and the end of its "
                "output come back. `undo` is the snapshot that puts the folder back as it was "
                "before: call workspace_restore with it and `confirm: true` (`undo_command` "
                "says that call). Stopped before it ends, it stops the command, seals what it "
                "did and answers `interrupted` with `details` {before, after, undo, "
                "undo_command}. To try something risky without touching the folder, use "
                "workspace_fork or workspace_run instead.",
                docs=(("command", "the command line to run in the workspace, through /bin/sh -c"),),
            ),
            doc="Seal (trigger try_before), run the command in the workspace, seal again "
            "(try_after, even when it fails) and exit with its status. `undo` is the snapshot "
            "to rewind to for putting the folder back as it was before (`before`'s ID, as a "
            "merge's or a rewind's `undo`), `undo_command` the command that does it. Interrupted "
            "(Ctrl-C, SIGTERM), it stops the command, seals what it did (try_after) and answers "
            "`interrupted` with `details` {before, after, undo, undo_command} (snapshot IDs; "
            "`after` null when that seal failed).",
        ),
        try_run,
    ),
)
