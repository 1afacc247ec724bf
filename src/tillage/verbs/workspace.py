"""Verbs that attach, describe and forget a workspace."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tillage.errors import BusyError, InvalidArgumentError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.views import PolicyProblemInfo, SnapshotInfo, policy_problems, snapshot_info
from tillage.workspace.errors import (
    FolderMissingError,
    RefusedRootError,
    UnreadablePathError,
    UnsafeControlDirError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class WatchRequest:
    no_daemon: bool = param("attach and seal once; start no background watcher", default=False)
    debounce_ms: int = param("quiet time before the watcher seals (watcher only)", default=1000)


@dataclass(frozen=True)
class WatchResult:
    workspace: str
    head: SnapshotInfo
    watching: bool
    attached_now: bool
    resumed: bool
    snapshots: int
    note: str | None
    policy_problems: tuple[PolicyProblemInfo, ...]


def watch(ctx: Context, req: WatchRequest) -> WatchResult:
    from tillage.workspace.attach import attach
    from tillage.workspace.recovery import recover_if_interrupted
    from tillage.workspace.seal import SealOptions, seal

    if req.debounce_ms < 0:
        raise InvalidArgumentError("--debounce-ms must not be negative")
    found = attach(ctx.settings.home, ctx.settings.folder, ctx.settings.user_home)
    ws = found.workspace
    if not found.new:
        recover_if_interrupted(ws)  # INV-7: never seal a half-rewound folder as a normal state
    trigger = "initial" if found.new else "watch"
    head = seal(
        ws, SealOptions(trigger=trigger, agent=ctx.settings.agent), on_progress=ctx.on_progress
    )
    notes = []
    count = ws.store.snapshot_count(ws.id)
    if found.resumed:
        notes.append(
            f"found this folder's earlier timeline ({count - 1} snapshots from before "
            "`till forget`) and continued it"
        )
    if not req.no_daemon:
        notes.append("the background watcher is not available yet: seal with `till snap`")
    return WatchResult(
        workspace=str(ws.root),
        head=snapshot_info(head),
        watching=False,
        attached_now=found.new or found.resumed,
        resumed=found.resumed,
        snapshots=count,
        note="; ".join(notes) or None,
        policy_problems=policy_problems(ws.root),
    )


@dataclass(frozen=True)
class StatusRequest:
    fidelity: bool = param("list every path that is not captured exactly, and why", default=False)


@dataclass(frozen=True)
class StoreInfo:
    path: str
    bytes: int


@dataclass(frozen=True)
class FidelityInfo:
    path: str
    grade: str
    reason: str


@dataclass(frozen=True)
class StatusResult:
    attached: bool
    workspace: str
    id: str
    head: SnapshotInfo | None
    watching: bool
    snapshots: int
    store: StoreInfo
    fidelity: tuple[FidelityInfo, ...] | None
    policy_problems: tuple[PolicyProblemInfo, ...]


def status(ctx: Context, req: StatusRequest) -> StatusResult:
    from tillage.workspace.seal import snapshot_record

    ws = ctx.workspace
    head = ws.store.head(ws.id)
    fidelity = None
    if req.fidelity:
        notes = snapshot_record(ws.store, head.id).fidelity if head else ()
        fidelity = tuple(FidelityInfo(n.path, "partial", n.reason) for n in notes)
    return StatusResult(
        attached=True,
        workspace=str(ws.root),
        id=ws.id,
        head=snapshot_info(head) if head else None,
        watching=False,
        snapshots=ws.store.snapshot_count(ws.id),
        store=StoreInfo(path=str(ws.store.home), bytes=ws.store.bytes_on_disk()),
        fidelity=fidelity,
        policy_problems=policy_problems(ws.root),
    )


@dataclass(frozen=True)
class ForgetRequest:
    purge: bool = param("also drop the workspace's timeline from the store", default=False)
    yes: bool = param("confirm a purge", default=False)


@dataclass(frozen=True)
class ForgetResult:
    workspace: str
    purged: bool
    snapshots: int
    note: str


def forget(ctx: Context, req: ForgetRequest) -> ForgetResult:
    import shutil

    from tillage.core.paths import CONTROL_DIR

    ws = ctx.workspace
    count = ws.store.snapshot_count(ws.id)
    ws.store.publish("forget", {"workspace": ws.id, "purge": req.purge})
    control = ws.root / CONTROL_DIR
    if control.is_dir() and not control.is_symlink():
        shutil.rmtree(control, ignore_errors=True)
    if req.purge:
        note = f"dropped this folder's timeline ({count} snapshots) from the store"
    else:
        note = (
            f"detached; the timeline ({count} snapshots) stays in the store, and "
            "`till watch` here picks it up again (`till forget --purge --yes` drops it)"
        )
    return ForgetResult(workspace=str(ws.root), purged=req.purge, snapshots=count, note=note)


def _purge_needs_yes(req: ForgetRequest) -> bool:
    return req.purge and not req.yes


def _confirmed(req: Any) -> Any:
    return replace(req, yes=True)


VERBS = (
    Verb(
        Contract(
            name="workspace.watch",
            since=1,
            scope=Scope.FOLDER,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=WatchRequest,
            result=WatchResult,
            cli="watch",
            errors=(
                RefusedRootError,
                FolderMissingError,
                UnreadablePathError,
                UnsafeControlDirError,
                BusyError,
            ),
            event="sealed",
            doc="Attach this folder (if needed) and seal a complete snapshot of it.",
        ),
        watch,
    ),
    Verb(
        Contract(
            name="workspace.status",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=StatusRequest,
            result=StatusResult,
            cli="status",
            doc="Whether this folder is attached, its head snapshot and the store's size.",
        ),
        status,
    ),
    Verb(
        Contract(
            name="workspace.forget",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.USER,
            effect=Effect.DESTRUCTIVE,
            request=ForgetRequest,
            result=ForgetResult,
            cli="forget",
            event="forgotten",
            needs_confirmation=_purge_needs_yes,
            confirmed=_confirmed,
            doc="Detach this folder; its timeline stays in the store and a later `till watch` here "
            "picks it up again. With --purge --yes the timeline is dropped from the store.",
        ),
        forget,
    ),
)
