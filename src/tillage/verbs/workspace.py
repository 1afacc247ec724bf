"""Verbs that attach, describe and forget a workspace."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tillage.core import units
from tillage.errors import BusyError, InvalidArgumentError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context, finish_clones
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

    from tillage.verbs.folder import FolderInfo

DEFAULT_DEBOUNCE_MS = 500
# A day: beyond it a "debounce" means never sealing, and a timer that long overflows time_t.
MAX_DEBOUNCE_MS = 86_400_000


@dataclass(frozen=True)
class WatchRequest:
    no_daemon: bool = param("attach and seal once; start no background watcher", default=False)
    foreground: bool = param(
        "run the watcher in this process (after printing the result) until Ctrl-C or SIGTERM",
        default=False,
    )
    stop: bool = param("stop this folder's background watcher", default=False)
    debounce_ms: int = param(
        "quiet time in milliseconds before the watcher seals", default=DEFAULT_DEBOUNCE_MS
    )


@dataclass(frozen=True)
class WatchResult:
    workspace: str
    head: SnapshotInfo | None  # the head sealed now (with --stop: the head as it is; never null
    # for an attached folder, which always has its first snapshot)
    watching: bool
    attached_now: bool
    resumed: bool
    snapshots: int
    note: str | None
    policy_problems: tuple[PolicyProblemInfo, ...]
    # With --stop: true when it stopped a running watcher, false when none ran; else null.
    stopped: bool | None = None


def watch(ctx: Context, req: WatchRequest) -> WatchResult:
    from tillage.workspace.attach import attach
    from tillage.workspace.recovery import recover_if_interrupted
    from tillage.workspace.seal import SealOptions, seal

    if not 0 <= req.debounce_ms <= MAX_DEBOUNCE_MS:
        raise InvalidArgumentError(
            f"--debounce-ms must be between 0 and {MAX_DEBOUNCE_MS} (a day), not {req.debounce_ms}"
        )
    if sum((req.no_daemon, req.foreground, req.stop)) > 1:
        raise InvalidArgumentError("--no-daemon, --foreground and --stop exclude each other")
    if req.stop:
        return _stop_watching(ctx)
    if req.foreground and not ctx.settings.own_process:
        from tillage.errors import UnavailableError

        raise UnavailableError(
            "--foreground runs the watcher in the calling process, which this door cannot do",
            next_step="run `till watch --foreground` in a terminal, or `till watch`",
        )
    finish_clones(ctx.settings.home)  # a killed clone of this very folder is finished first
    found = attach(ctx.settings.home, ctx.settings.folder, ctx.settings.user_home)
    ws = ctx.workspace = found.workspace  # the invocation's after-write step follows it
    if req.foreground:
        _refuse_second_watcher(ws)
    if not found.new:
        recover_if_interrupted(ws)  # INV-7: never seal a half-rewound folder as a normal state
    trigger = "initial" if found.new else "watch"
    options = SealOptions(trigger=trigger, agent=ctx.settings.agent)
    notes = []
    running = None
    if not (req.no_daemon or req.foreground):
        from tillage.errors import TillageError
        from tillage.platform.launch import inherited_env
        from tillage.watch import daemon

        try:
            # Started before the seal, so that the seal walks the folder under the watcher's
            # first token: the next seal (a snap, a hook, the watcher's own) reads only what
            # changed after it, instead of walking everything once more.
            running = daemon.start(
                ws.store.home, ws.root, ws.id, req.debounce_ms, inherited_env(ctx.settings.launch)
            )
        except TillageError:
            seal(ws, options, on_progress=ctx.on_progress)  # protected even so
            raise
    head = seal(ws, options, on_progress=ctx.on_progress)
    count = ws.store.snapshot_count(ws.id)
    if found.recovered:
        notes.append(
            f"took this folder's timeline back from the store's packs ({found.recovered} "
            "snapshots, labels kept; pins, forks, sessions and settings recorded only in the "
            "lost log are not)"
        )
    elif found.resumed:
        notes.append(
            f"found this folder's earlier timeline ({count - 1} snapshots from before "
            "`till forget`) and continued it"
        )
    watching = _watching(ws)
    if req.foreground:
        watching = True
        notes.append("the watcher runs in this terminal until Ctrl-C")
    elif running is not None:
        watching = True
        kept = running.get("debounce_ms")
        if isinstance(kept, int) and kept != req.debounce_ms:
            notes.append(
                f"the watcher already running keeps its debounce of {kept} ms "
                "(`till watch --stop`, then `till watch --debounce-ms N`, changes it)"
            )
    return WatchResult(
        workspace=str(ws.root),
        head=snapshot_info(head),
        watching=watching,
        attached_now=found.new or found.resumed,
        resumed=found.resumed,
        snapshots=count,
        note="; ".join(notes) or None,
        policy_problems=policy_problems(ws.root),
    )


def _watching(ws: Any) -> bool:
    from tillage.workspace import watchstate

    return watchstate.is_watching(ws.store.home, ws.id)


def _stop_watching(ctx: Context) -> WatchResult:
    """`till watch --stop`: stops the watcher (it seals what is pending first) and answers
    with the head as it is then."""
    from tillage.watch import daemon
    from tillage.workspace.attach import require_workspace

    s = ctx.settings
    ws = require_workspace(s.home, s.folder, s.user_home)
    stopped = daemon.stop(ws.store.home, ws.id, ws.root)
    head = ws.store.head(ws.id)
    return WatchResult(
        workspace=str(ws.root),
        head=snapshot_info(head) if head else None,
        watching=False,
        attached_now=False,
        resumed=False,
        snapshots=ws.store.snapshot_count(ws.id),
        note="stopped the background watcher" if stopped else "no watcher was running",
        stopped=stopped,
        policy_problems=(),
    )


def _refuse_second_watcher(ws: Any) -> None:
    from tillage.workspace import watchstate

    if watchstate.is_watching(ws.store.home, ws.id):
        info = watchstate.read_info(ws.store.home, ws.id) or {}
        raise BusyError(
            f"a watcher already runs for this folder (pid {info.get('pid', '?')})",
            next_step="stop it with `till watch --stop` first",
        )


def _become_the_watcher(settings: Any, req: WatchRequest, result: WatchResult) -> None:
    """After `watch --foreground`'s reply is printed, this process becomes the watcher (same
    pid, same terminal) until Ctrl-C or SIGTERM."""
    if not req.foreground:
        return
    from tillage.watch import daemon

    daemon.exec_foreground(settings.home, Path(result.workspace), req.debounce_ms)


@dataclass(frozen=True)
class StatusRequest:
    fidelity: bool = param("list every path that is not captured exactly, and why", default=False)


@dataclass(frozen=True)
class StoreInfo:
    path: str
    bytes: int


@dataclass(frozen=True)
class HeldByInfo:
    snapshot: str
    workspace: str
    why: str


@dataclass(frozen=True)
class BudgetInfo:
    """The store's space budget as it stands (`till budget` sets it); `held_by` names the
    protected snapshots when the store is over and a gc cannot take them."""

    max_bytes: int
    reserve_free_bytes: int
    store_bytes: int
    filesystem_free_bytes: int
    over_budget: bool
    held_by: tuple[HeldByInfo, ...]


@dataclass(frozen=True)
class ThinnedInfo:
    """A snapshot of this timeline a gc thinned: the content classes whose bytes it lost."""

    snapshot: str
    short: str
    classes: tuple[str, ...]


@dataclass(frozen=True)
class FidelityInfo:
    path: str
    grade: str
    reason: str


@dataclass(frozen=True)
class WatcherInfo:
    """The running watcher. `mode` is "inotify", "rescan" (beyond inotify's limit: `reason`
    says why, `unwatched` which folders have no watch, `rescan_every_s` how often a full walk
    covers them) or "starting" (still adding its first watches: `watches` so far)."""

    pid: int | None
    mode: str | None
    reason: str | None
    debounce_ms: int | None
    since: str | None
    foreground: bool | None
    watches: int | None = None  # folders with an inotify watch
    unwatched: str | None = None
    rescan_every_s: float | None = None


@dataclass(frozen=True)
class ForkOfInfo:
    """What a fork's status adds: its name, its parent's folder and workspace ID, and the
    snapshot it was forked from (moved on by a merge of it)."""

    name: str
    parent: str | None
    parent_workspace: str
    base: str


@dataclass(frozen=True)
class StatusResult:
    attached: bool
    workspace: str
    id: str
    head: SnapshotInfo | None
    watching: bool
    watcher: WatcherInfo | None
    snapshots: int
    store: StoreInfo
    fidelity: tuple[FidelityInfo, ...] | None
    policy_problems: tuple[PolicyProblemInfo, ...]
    fork: ForkOfInfo | None = None  # null in a workspace that is not a fork
    budget: BudgetInfo | None = None
    # With --fidelity: the snapshots a gc thinned (`till show ID` lists their missing paths).
    thinned: tuple[ThinnedInfo, ...] | None = None
    # The folder as it is now: how many paths differ from the head, the snapshot it is at,
    # and when a rewind put it there (verbs/folder.py; looked at only when that is cheap).
    folder: FolderInfo | None = None


def status(ctx: Context, req: StatusRequest) -> StatusResult:
    from tillage.verbs.folder import folder_info

    ws = ctx.workspace
    head = ws.store.head(ws.id)
    watcher = _watcher_info(ws)
    fidelity = None
    if req.fidelity:
        from tillage.workspace.seal import snapshot_record  # the seal's imports cost 10 ms

        notes = snapshot_record(ws.store, head.id).fidelity if head else ()
        fidelity = tuple(FidelityInfo(n.path, "partial", n.reason) for n in notes)
    return StatusResult(
        attached=True,
        workspace=str(ws.root),
        id=ws.id,
        head=snapshot_info(head) if head else None,
        watching=watcher is not None,
        watcher=watcher,
        snapshots=ws.store.snapshot_count(ws.id),
        store=StoreInfo(path=str(ws.store.home), bytes=ws.store.bytes_on_disk()),
        fidelity=fidelity,
        policy_problems=policy_problems(ws.root),
        fork=_fork_of(ws),
        budget=_budget(ws.store),
        thinned=_thinned(ws) if req.fidelity else None,
        folder=folder_info(ws, head),
    )


def _budget(store: Any) -> BudgetInfo:
    from tillage.features.lifecycle.budget import holders, state

    now = state(store, exact=False)  # an index query and a statvfs: status stays cheap
    held = (
        tuple(HeldByInfo(h.snapshot, h.workspace, h.why) for h in holders(store))
        if now.over_budget
        else ()
    )
    return BudgetInfo(
        now.limits.max_bytes,
        now.limits.reserve_free_bytes,
        now.store_bytes,
        now.filesystem_free_bytes,
        now.over_budget,
        held,
    )


def _thinned(ws: Any) -> tuple[ThinnedInfo, ...]:
    import json

    rows = ws.store.conn.execute(
        "SELECT t.snapshot, t.classes FROM thinned t JOIN snapshots s ON s.id = t.snapshot "
        "WHERE s.workspace = ? ORDER BY s.sealed_at_ns DESC",
        (ws.id,),
    )
    return tuple(ThinnedInfo(sid, sid[:12], tuple(json.loads(classes))) for sid, classes in rows)


def _fork_of(ws: Any) -> ForkOfInfo | None:
    row = ws.store.fork_of(ws.id)
    if row is None:
        return None
    parent = ws.store.workspace(row.parent)
    return ForkOfInfo(
        name=row.name,
        parent=parent.root if parent is not None else None,
        parent_workspace=row.parent,
        base=row.base,
    )


def _watcher_info(ws: Any) -> WatcherInfo | None:
    """The running watcher as its info file tells it; None when none holds the watch lock (a
    crashed watcher holds nothing, so it is not reported)."""
    from tillage.workspace import watchstate

    if not watchstate.is_watching(ws.store.home, ws.id):
        return None
    info = watchstate.read_info(ws.store.home, ws.id) or {}

    def get(key: str, kind: type) -> Any:
        value = info.get(key)
        return value if isinstance(value, kind) else None

    return WatcherInfo(
        pid=get("pid", int),
        mode=get("mode", str),
        reason=get("reason", str),
        debounce_ms=get("debounce_ms", int),
        since=get("started_at", str),
        foreground=get("foreground", bool),
        watches=get("watches", int),
        unwatched=get("unwatched", str),
        rescan_every_s=get("rescan_every_s", float),
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

    def undo_plan(self, _req: ForgetRequest) -> dict[str, Any] | None:
        """`till undo` (from the detached folder): attach it again, its timeline whole. A
        purge dropped the timeline: nothing brings it back."""
        if self.purged:
            return {"kind": "none", "why": "a purge dropped the timeline from the store for good"}
        return {"kind": "attach", "root": self.workspace}


def forget(ctx: Context, req: ForgetRequest) -> ForgetResult:
    import shutil

    from tillage.core.paths import CONTROL_DIR
    from tillage.errors import NotAttachedError
    from tillage.verbs.invoke import finish_forks
    from tillage.watch import daemon
    from tillage.workspace.recovery import open_workspace

    settings = ctx.settings
    try:
        finish_clones(settings.home)
        ws = open_workspace(settings.home, settings.folder, settings.user_home)
    except NotAttachedError:
        # A folder a plain `till forget` detached still has its timeline in the store: the
        # purge its note offers drops that one (scope `folder` for this reason).
        kept = _purge_kept(settings) if req.purge else None
        if kept is None:
            raise
        return kept
    finish_forks(ws.store)
    ctx.workspace = ws
    daemon.stop(ws.store.home, ws.id, ws.root)  # a forgotten folder is watched no more
    count = ws.store.snapshot_count(ws.id)
    ws.store.publish("forget", {"workspace": ws.id, "purge": req.purge})
    control = ws.root / CONTROL_DIR
    if control.is_dir() and not control.is_symlink():
        shutil.rmtree(control, ignore_errors=True)
    if req.purge:
        from tillage.features.sync.remotes import forget_remotes

        forget_remotes(ws.store, ws.id)  # its remotes' keys go with it
        note = f"dropped this folder's timeline ({units.count(count, 'snapshot')}) from the store"
    else:
        note = (
            f"detached; the timeline ({units.count(count, 'snapshot')}) stays in the store, and "
            "`till watch` here picks it up again (`till forget --purge --yes` drops it)"
        )
    return ForgetResult(workspace=str(ws.root), purged=req.purge, snapshots=count, note=note)


def _purge_kept(settings: Any) -> ForgetResult | None:
    """Drops the timeline a plain `till forget` kept for this folder; None when there is none
    (the folder never was attached, or its timeline is already purged)."""
    from tillage.features.sync.remotes import forget_remotes
    from tillage.store.store import Store

    if not Store.exists(settings.home) or not settings.folder.is_dir():
        return None
    with Store.open(settings.home) as store:
        row = store.forgotten_workspace_by_root(str(settings.folder.resolve()))
        if row is None:
            return None
        count = store.snapshot_count(row.id)
        store.publish("forget", {"workspace": row.id, "purge": True})
        forget_remotes(store, row.id)
    kept = units.count(count, "snapshot")
    note = f"dropped the timeline `till forget` kept for this folder ({kept})"
    return ForgetResult(workspace=str(settings.folder), purged=True, snapshots=count, note=note)


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
            after_reply=_become_the_watcher,
            doc="Attach this folder (if needed), seal a complete snapshot of it and start the "
            "background watcher, which seals after the folder has been quiet for the debounce "
            "(--stop stops it; --no-daemon seals once; --foreground watches in this process).",
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
            doc="Whether this folder is attached, its head snapshot, the store's size, and the "
            "folder itself: `folder: {checked, how, differs, at, rewound_at, note}`, `differs` "
            "the paths that differ from the head (as a diff from `head` lists them), `at` the "
            "snapshot the folder equals, `rewound_at` when the folder was put back to it. Looked "
            "at only when cheap: with a watcher, what it saw change (in a folder of at most "
            "10,000 files); without, a folder of at most 1,000 files (else `checked` is false).",
        ),
        status,
    ),
    Verb(
        Contract(
            name="workspace.forget",
            since=1,
            scope=Scope.FOLDER,
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
