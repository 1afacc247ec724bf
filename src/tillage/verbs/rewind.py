"""The rewind verb: put the folder back, whole or by path; previews with --dry-run."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tillage.core.errors import PathNotInSnapshotError
from tillage.errors import BusyError, IntegrityError
from tillage.platform.errors import DiskFullError
from tillage.store.errors import BadSnapshotIdError, SnapshotAmbiguousError, SnapshotNotFoundError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.views import ChangeInfo, SnapshotInfo, change_infos, snapshot_info


@dataclass(frozen=True)
class RewindRequest:
    id: str = param("the snapshot to rewind to: its ID or a unique prefix", positional=True)
    paths: tuple[str, ...] | None = param(
        "only these workspace-relative files or folders", default=None, metavar="P"
    )
    dry_run: bool = param("print the plan and change nothing", default=False)
    yes: bool = param("confirm: change the folder", default=False)


@dataclass(frozen=True)
class RewindResult:
    snapshot: SnapshotInfo
    changes: tuple[ChangeInfo, ...]
    applied: bool
    undo: str | None
    rescued: tuple[str, ...]
    rescue: str | None


def rewind(ctx: Context, req: RewindRequest) -> RewindResult:
    from tillage.workspace import rewind as rw
    from tillage.workspace.timeline import resolve

    ws = ctx.workspace
    scopes = rw.normalize_scopes(req.paths)
    target = resolve(ws, req.id)
    outcome = rw.preview(ws, target, scopes) if req.dry_run else rw.apply(ws, target, scopes)
    return RewindResult(
        snapshot=snapshot_info(outcome.target),
        changes=change_infos(outcome.changes),
        applied=outcome.applied,
        undo=outcome.undo,
        rescued=outcome.rescued,
        rescue=outcome.rescue,
    )


def _needs_yes(req: RewindRequest) -> bool:
    return not req.dry_run and not req.yes


def _as_preview(req: RewindRequest) -> RewindRequest:
    return replace(req, dry_run=True)


def _as_confirmed(req: RewindRequest) -> RewindRequest:
    return replace(req, yes=True)


VERBS = (
    Verb(
        Contract(
            name="workspace.rewind",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.DESTRUCTIVE,
            request=RewindRequest,
            result=RewindResult,
            cli="rewind",
            errors=(
                SnapshotNotFoundError,
                SnapshotAmbiguousError,
                BadSnapshotIdError,
                PathNotInSnapshotError,
                BusyError,
                IntegrityError,
                DiskFullError,
            ),
            event="rewound",
            needs_confirmation=_needs_yes,
            preview=_as_preview,
            confirmed=_as_confirmed,
            doc="Put the folder (or --paths) back as it was in a snapshot, byte-exact. The "
            "present is sealed first and returned as `undo`, so a rewind can be rewound.",
        ),
        rewind,
    ),
)
