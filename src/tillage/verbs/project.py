"""Projection for scripts: `till project hydrate` lays collections' entries down in a folder and
`till project flush` brings the folder back into them, three-way (tillage.projection).

The folder is the one --repo names (else the current folder); it need not be attached. The
mounts and the baseline pass from one command to the next under the store's home
(projection/runs.py), never in the folder.
"""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import BusyError
from tillage.platform.errors import DiskFullError
from tillage.projection.errors import (
    BadMountError,
    CollectionFailedError,
    FolderUnreadableError,
    NoMountsError,
    PlaceFailedError,
    PlaceReplacedError,
    StateDamagedError,
    UnflushedEditsError,
    UnsafePlacePathError,
)
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context
from tillage.workspace.errors import FolderMissingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


MOUNT_DOC = (
    "a collection a flush writes back, at PREFIX of the folder: PREFIX=sqlite:PATH#TABLE "
    "(TABLE defaults to `entries`; the table is created when missing) or PREFIX=dir:PATH; a "
    "relative PATH is taken from the folder; repeat the flag for more (default: the mounts "
    "the folder's last hydrate recorded)"
)
READ_ONLY_DOC = (
    "a collection hydrated at PREFIX and never written back, in the same forms as --mount; "
    "its files are neither flushed nor reported as orphans"
)


@dataclass(frozen=True)
class ProjectRequest:
    mount: tuple[str, ...] | None = param(MOUNT_DOC, default=None, metavar="PREFIX=URI")
    read_only: tuple[str, ...] | None = param(READ_ONLY_DOC, default=None, metavar="PREFIX=URI")


@dataclass(frozen=True)
class MountInfo:
    """One mount of a hydrate and what it laid down."""

    # Where in the folder ("" for the whole folder).
    prefix: str
    # The canonical URI (`sqlite:/abs/runs.db#artifacts`, `dir:/abs/docs`): the collection ID.
    collection: str
    writable: bool
    # Entries laid down as files.
    entries: int


@dataclass(frozen=True)
class HydrateResult:
    place: str
    mounts: tuple[MountInfo, ...]
    # Files laid down, in all.
    files: int


@dataclass(frozen=True)
class OutcomeInfo:
    """What a flush decided about one path; hashes are hex SHA-256, null for absent."""

    # unchanged, created, written, converged, deleted, orphan, conflict, contested.
    kind: str
    path: str
    # What the projection last committed at the path.
    base: str | None
    # What the collection held when the flush read it.
    theirs: str | None
    # What the folder held.
    ours: str | None
    # The read-only mount of a `readonly` outcome (a flush reports none).
    prefix: str | None


@dataclass(frozen=True)
class FlushResult:
    place: str
    # Every path the flush reached, in path order.
    outcomes: tuple[OutcomeInfo, ...]
    # The outcomes of kind conflict: nothing was written for them.
    conflicts: tuple[OutcomeInfo, ...]
    # The outcomes of kind contested: another run held the entry.
    contested: tuple[OutcomeInfo, ...]
    # How many paths had each kind.
    counts: dict[str, int]


def _folder(ctx: Context) -> Path:
    """The place: it must exist (a flush into a missing folder would read "empty")."""
    folder = ctx.settings.folder
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise FolderMissingError(
            f"{folder} {what}",
            next_step="create the folder first, or give --repo an existing folder",
        )
    return folder


def _specs(ctx: Context, req: ProjectRequest) -> Any:
    """The mounts the flags name (None: none named, use the recorded ones)."""
    from tillage.projection.runs import parse_mounts

    if not req.mount and not req.read_only:
        return None
    return parse_mounts(
        req.mount or (),
        req.read_only or (),
        base=ctx.settings.folder,
        user_home=ctx.settings.user_home,
    )


def project_hydrate(ctx: Context, req: ProjectRequest) -> HydrateResult:
    from tillage.projection.runs import hydrate_folder

    specs = _specs(ctx, req)
    folder = _folder(ctx)
    done = hydrate_folder(ctx.settings.home, folder, specs)
    mounts = tuple(
        MountInfo(prefix=s.prefix, collection=s.uri, writable=s.writable, entries=n)
        for s, n in done.mounts
    )
    return HydrateResult(place=str(folder), mounts=mounts, files=sum(m.entries for m in mounts))


def _outcome(o: Any) -> OutcomeInfo:
    return OutcomeInfo(
        kind=o.kind, path=o.path, base=o.base, theirs=o.theirs, ours=o.ours, prefix=o.prefix
    )


def project_flush(ctx: Context, req: ProjectRequest) -> FlushResult:
    from tillage.projection.runs import flush_folder

    specs = _specs(ctx, req)
    folder = _folder(ctx)
    report = flush_folder(ctx.settings.home, folder, specs).report
    return FlushResult(
        place=str(folder),
        outcomes=tuple(_outcome(o) for o in report.outcomes),
        conflicts=tuple(_outcome(o) for o in report.conflicts),
        contested=tuple(_outcome(o) for o in report.contested),
        counts=report.counts(),
    )


COMMON_ERRORS = (
    BadMountError,
    NoMountsError,
    FolderMissingError,
    UnsafePlacePathError,
    CollectionFailedError,
    PlaceFailedError,
    StateDamagedError,
    UnflushedEditsError,
    PlaceReplacedError,
    BusyError,
    DiskFullError,
)

VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        Contract(
            name="project.hydrate",
            since=1,
            scope=Scope.FOLDER,
            audience=Audience.USER,
            effect=Effect.WRITE,
            request=ProjectRequest,
            result=HydrateResult,
            cli="project hydrate",
            errors=COMMON_ERRORS,
            doc="Lay every entry of each mounted collection down in the folder (--repo, else "
            "the current folder; it must exist and need not be attached) as a file under its "
            "mount's prefix, for an agent to edit: --mount for collections a flush writes "
            "back, --read-only for those it never does. A file already at an entry's path is "
            "replaced only when it holds what was last committed there: an edit not flushed "
            "yet refuses the hydrate (projection.unflushed_edits); keys starting with `_` "
            "are the collection's metadata and stay out. The mounts and what was laid down "
            "(the baseline) are kept under the store's home, not in the folder, for `till "
            "project flush`; without mount flags it lays down the mounts the last hydrate "
            "recorded. `mounts` gives each one's `entries`, `files` the total.",
        ),
        project_hydrate,
    ),
    Verb(
        Contract(
            name="project.flush",
            since=1,
            scope=Scope.FOLDER,
            audience=Audience.USER,
            effect=Effect.WRITE,
            request=ProjectRequest,
            result=FlushResult,
            cli="project flush",
            errors=(*COMMON_ERRORS, FolderUnreadableError),
            doc="Bring the folder back into its writable collections, three-way: each path is "
            "decided against what the last hydrate or flush committed there (`base`), the "
            "collection now (`theirs`) and the folder now (`ours`), as unchanged, created, "
            "written, converged (the collection already held it), deleted (a file the "
            "projection owned, whose entry nobody changed), orphan (a file under a writable "
            "mount's prefix that no mount takes, such as a name starting with `_`: reported, "
            "never written), conflict (both sides changed: nothing "
            "written, the three hashes say why) or contested (another run held the entry). "
            "Only the writable mounts' prefixes are listed: files outside them are never "
            "read. A file listed and then gone when read is left alone, still owned; only one "
            "absent from the listing is a deletion. "
            "Read-only mounts are left alone. Without mount flags it uses the mounts the last "
            "hydrate recorded. A conflict is a report, not a failure: a completed flush exits "
            "0, and `conflicts` and `counts` say what to look at. A folder that cannot be "
            "listed changes nothing (projection.place_unreadable); a collection that fails is "
            "an error (projection.collection_failed): that work did not reach the store.",
        ),
        project_flush,
    ),
)
