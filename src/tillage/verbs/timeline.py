"""Verbs that seal snapshots and read the timeline: snap, timeline, show, diff, cat, pin."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import BusyError, InvalidArgumentError, NotFoundError, TillageError
from tillage.features.lifecycle.errors import BytesDroppedError, SnapshotPartialError
from tillage.store.errors import BadSnapshotIdError, SnapshotAmbiguousError, SnapshotNotFoundError
from tillage.verbs.contract import (
    Contract,
    Effect,
    ToolLimit,
    ToolSpec,
    Verb,
    agent_contract,
    param,
)
from tillage.verbs.invoke import Context
from tillage.verbs.views import (
    ChangeInfo,
    PolicyProblemInfo,
    SnapshotInfo,
    change_infos,
    policy_problems,
    snapshot_info,
)
from tillage.verbs.wire import ByteStream

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


ID_ERRORS = (SnapshotNotFoundError, SnapshotAmbiguousError, BadSnapshotIdError)


@dataclass(frozen=True)
class SnapRequest:
    label: str | None = param(
        "a label for the snapshot",
        default=None,
        short="-m",
        flag="--label",
        aliases=("--message",),
        metavar="LABEL",
    )


@dataclass(frozen=True)
class SnapResult:
    snapshot: SnapshotInfo

    def undo_plan(self, _req: SnapRequest) -> dict[str, Any] | None:
        """A seal changed no file and no fact but the timeline's: nothing to undo."""
        return {"kind": "none", "why": "a seal only adds to the timeline (gc thins it)"}

    policy_problems: tuple[PolicyProblemInfo, ...]


def snap(ctx: Context, req: SnapRequest) -> SnapResult:
    from tillage.workspace.seal import SealOptions, seal

    row = seal(
        ctx.workspace,
        SealOptions(trigger="manual", label=req.label, agent=ctx.settings.agent),
        on_progress=ctx.on_progress,
    )
    return SnapResult(
        snapshot=snapshot_info(row), policy_problems=policy_problems(ctx.workspace.root)
    )


# What `workspace_snapshots` gives a model by default and at most (the schema, its
# description and the call share these numbers: verbs/tools.py).
SNAPSHOTS_DEFAULT = 20
SNAPSHOTS_MAX = 100


@dataclass(frozen=True)
class TimelineRequest:
    limit: int = param("how many snapshots at most, newest first", default=50, short="-n")
    session: str | None = param("only snapshots of this agent session", default=None)
    trigger: str | None = param("only snapshots sealed for this reason", default=None)
    before: str | None = param(
        "only snapshots sealed at or before this time (RFC 3339 like 2026-12-01T10:00:00Z, "
        "or epoch seconds); the newest of them is the state the folder was in then",
        default=None,
        metavar="TIME",
    )


@dataclass(frozen=True)
class TimelineResult:
    snapshots: tuple[SnapshotInfo, ...]


def timeline(ctx: Context, req: TimelineRequest) -> TimelineResult:
    from tillage.core.models import TRIGGERS
    from tillage.errors import echo

    if req.limit < 1:
        raise InvalidArgumentError("-n must be at least 1")
    if req.trigger is not None and req.trigger not in TRIGGERS:
        raise InvalidArgumentError(
            f"unknown trigger {echo(req.trigger)}", next_step="use one of: " + ", ".join(TRIGGERS)
        )
    rows = ctx.workspace.store.snapshots(
        ctx.workspace.id,
        limit=req.limit,
        trigger=req.trigger,
        session=req.session,
        before_ns=None if req.before is None else _time_ns(req.before),
    )
    return TimelineResult(snapshots=tuple(snapshot_info(r) for r in rows))


def _time_ns(text: str) -> int:
    """Parses --before: RFC 3339 / ISO-8601 (UTC unless it says) or epoch seconds, as the
    last nanosecond it can mean (a time copied from a snapshot finds that snapshot)."""
    from tillage.core.units import latest_ns
    from tillage.errors import echo

    found = latest_ns(text)
    if found is None:
        raise InvalidArgumentError(
            f"not a time: {echo(text)}",
            next_step="give an RFC 3339 time like 2026-12-01T10:00:00Z, or epoch seconds",
        )
    return found


@dataclass(frozen=True)
class ShowRequest:
    id: str = param("snapshot ID or unique prefix", positional=True)


@dataclass(frozen=True)
class FidelityNoteInfo:
    path: str
    reason: str


@dataclass(frozen=True)
class ShowResult:
    snapshot: SnapshotInfo
    changes_from_parent: int
    tree: str
    fidelity: tuple[FidelityNoteInfo, ...]
    # What a gc thinned from it: `{path, class, reason}` for each file whose bytes are gone.
    missing: tuple[dict[str, str], ...]


def show(ctx: Context, req: ShowRequest) -> ShowResult:
    from tillage.core.treediff import diff_manifests
    from tillage.workspace.seal import snapshot_record
    from tillage.workspace.timeline import resolve
    from tillage.workspace.trees import flatten

    ws = ctx.workspace
    row = resolve(ws, req.id)
    parent = ws.store.snapshot(row.parent) if row.parent else None
    old = flatten(ws.store, bytes.fromhex(parent.tree)) if parent else {}
    new = flatten(ws.store, bytes.fromhex(row.tree))
    record = snapshot_record(ws.store, row.id)
    from tillage.workspace.thinned import missing_paths

    return ShowResult(
        snapshot=snapshot_info(row),
        changes_from_parent=len(diff_manifests(old, new)),
        tree=row.tree,
        fidelity=tuple(FidelityNoteInfo(n.path, n.reason) for n in record.fidelity),
        missing=tuple(
            {"path": m.path, "class": m.cls, "reason": m.reason}
            for m in missing_paths(ws.store, row.id, new)
        ),
    )


def _resolve_or_fork(ws: Any, ref: str) -> Any:
    """A live fork of this workspace by name (its head), else a snapshot ID or prefix: a
    name is chosen on purpose, so it wins over an ID prefix that happens to spell it."""
    from tillage.workspace.timeline import resolve

    row = ws.store.fork_named(ws.id, ref)
    if row is not None:
        head = ws.store.head(row.workspace)
        if head is not None:
            return head
    return resolve(ws, ref)


@dataclass(frozen=True)
class DiffRequest:
    target: str = param(
        "snapshot ID or prefix to compare from, or a fork's name (its newest sealed state)",
        positional=True,
    )
    to: str | None = param(
        "snapshot ID or fork name to compare to (default: the live folder)", default=None
    )


@dataclass(frozen=True)
class DiffResult:
    changes: tuple[ChangeInfo, ...]
    # The direction: from this snapshot to `to_snapshot`, or to the live folder when it is null.
    from_snapshot: SnapshotInfo
    to_snapshot: SnapshotInfo | None


def diff(ctx: Context, req: DiffRequest) -> DiffResult:
    from tillage.core.treediff import diff_manifests
    from tillage.workspace.seal import scan_live
    from tillage.workspace.trees import flatten

    ws = ctx.workspace
    origin = _resolve_or_fork(ws, req.target)
    dest = _resolve_or_fork(ws, req.to) if req.to is not None else None
    old = flatten(ws.store, bytes.fromhex(origin.tree))
    if dest is None:
        new = scan_live(ws).manifest or {}
    else:
        new = flatten(ws.store, bytes.fromhex(dest.tree))
    return DiffResult(
        changes=change_infos(diff_manifests(old, new)),
        from_snapshot=snapshot_info(origin),
        to_snapshot=snapshot_info(dest) if dest is not None else None,
    )


@dataclass(frozen=True)
class CatRequest:
    id: str = param("snapshot ID or unique prefix", positional=True)
    path: str = param("workspace-relative path of a file in the snapshot", positional=True)


@dataclass(frozen=True)
class CatResult:
    path: str
    size: int
    content_base64: ByteStream


class PathNotInSnapshotError(NotFoundError):
    name = "snapshot.path_not_found"
    module = "store"
    next_step = "list the snapshot's files with `till diff ID` or check the path's spelling"


class NotAFileError(InvalidArgumentError):
    """The path names a symlink, a folder or a special file in the snapshot, not a file."""

    name = "snapshot.not_a_file"
    module = "store"
    next_step = "`till cat` prints files; for a symlink, cat the path it points to"


def cat(ctx: Context, req: CatRequest) -> CatResult:
    from tillage.core.models import EntryKind
    from tillage.core.paths import fs_decode, parse
    from tillage.errors import echo
    from tillage.workspace.timeline import resolve
    from tillage.workspace.trees import check_file, flatten, iter_file_chunks

    ws = ctx.workspace
    path = parse(req.path)
    row = resolve(ws, req.id)
    entry = flatten(ws.store, bytes.fromhex(row.tree), (path,)).get(path)
    if entry is None:
        raise PathNotInSnapshotError(f"{echo(path)} is not in snapshot {row.id[:12]}")
    if entry.kind is EntryKind.SYMLINK:
        target = fs_decode(entry.content)
        raise NotAFileError(
            f"{echo(path)} is a symlink to {echo(target)} in snapshot {row.id[:12]}, not a file",
            details={"kind": "symlink", "target": target},
        )
    if entry.kind is not EntryKind.FILE:
        kind = "folder" if entry.kind is EntryKind.DIR else "special file"
        raise NotAFileError(
            f"{echo(path)} is a {kind} in snapshot {row.id[:12]}, not a file",
            details={"kind": "directory" if entry.kind is EntryKind.DIR else "special"},
        )
    store = ws.store
    from tillage.workspace.thinned import missing_paths

    for gone in missing_paths(store, row.id, {path: entry}):
        raise BytesDroppedError(
            f"{echo(path)} is listed in snapshot {row.id[:12]} but {gone.reason}",
            details={"path": path, "class": gone.cls},
        )
    return CatResult(
        path=path,
        size=entry.size,
        content_base64=ByteStream(
            entry.size, lambda: iter_file_chunks(store, entry), lambda: check_file(store, entry)
        ),
    )


@dataclass(frozen=True)
class PinRequest:
    id: str = param("snapshot ID or unique prefix", positional=True)


@dataclass(frozen=True)
class PinResult:
    snapshot: SnapshotInfo
    # False when it was pinned (or unpinned) already: nothing changed.
    changed: bool = True

    def undo_plan(self, _req: PinRequest) -> dict[str, Any] | None:
        """`till undo`: unpin what was pinned, pin what was unpinned."""
        if not self.changed:
            return None
        return {"kind": "unpin" if self.snapshot.pinned else "pin", "snapshot": self.snapshot.id}


def pin(ctx: Context, req: PinRequest) -> PinResult:
    return _set_pin(ctx, req.id, pinned=True)


def unpin(ctx: Context, req: PinRequest) -> PinResult:
    return _set_pin(ctx, req.id, pinned=False)


def _set_pin(ctx: Context, ref: str, *, pinned: bool) -> PinResult:
    from tillage.workspace.timeline import resolve

    ws = ctx.workspace
    row = resolve(ws, ref)
    if pinned and not row.pinned and ws.store.thinned_classes(row.id):
        lost = ", ".join(sorted(ws.store.thinned_classes(row.id)))
        raise SnapshotPartialError(
            f"snapshot {row.id[:12]} is partial: a gc dropped its {lost} bytes, and a pin "
            "cannot bring them back"
        )
    changed = row.pinned != pinned
    if changed:
        ws.store.publish("pin" if pinned else "unpin", {"snapshot": row.id})
        row = ws.store.snapshot(row.id)
    return PinResult(snapshot=snapshot_info(row), changed=changed)


def _contract(
    name: str,
    cli: str,
    request: type,
    result: type,
    effect: Effect,
    doc: str,
    errors: tuple[type[TillageError], ...] = ID_ERRORS,
    **fields: Any,
) -> Contract[Any, Any]:
    """An agent verb of the timeline: the ID errors unless it says otherwise."""
    return agent_contract(name, cli, request, result, effect, doc, errors=errors, **fields)


def _cat_bytes(result: CatResult) -> ByteStream:
    return result.content_base64


VERBS = (
    Verb(
        _contract(
            "timeline.snap",
            "snap",
            SnapRequest,
            SnapResult,
            Effect.WRITE,
            "Seal the folder now as a snapshot.",
            errors=(BusyError,),
            event="sealed",
            tool=ToolSpec(
                guide="Make a restore point before something risky; `label` says why.",
            ),
        ),
        snap,
    ),
    Verb(
        _contract(
            "timeline.list",
            "timeline",
            TimelineRequest,
            TimelineResult,
            Effect.READ,
            "The workspace's snapshots, newest first.",
            errors=(),
            tool=ToolSpec(
                name="workspace_snapshots",
                limits=(ToolLimit("limit", SNAPSHOTS_DEFAULT, SNAPSHOTS_MAX),),
                hidden=("session",),
                guide="Each snapshot is a restore point for the whole folder (every file, "
                "ignored ones and .env included), sealed automatically or on request; "
                "`before` finds the state at a moment of the conversation.",
            ),
        ),
        timeline,
    ),
    Verb(
        _contract(
            "timeline.show",
            "show",
            ShowRequest,
            ShowResult,
            Effect.READ,
            "One snapshot: its fields, how many paths changed from its parent, and "
            "what it could not capture exactly.",
        ),
        show,
    ),
    Verb(
        _contract(
            "timeline.diff",
            "diff",
            DiffRequest,
            DiffResult,
            Effect.READ,
            "What changed from a snapshot to another snapshot or to the live folder.",
        ),
        diff,
    ),
    Verb(
        _contract(
            "timeline.cat",
            "cat",
            CatRequest,
            CatResult,
            Effect.READ,
            "A file's bytes as they were in a snapshot.",
            errors=(*ID_ERRORS, PathNotInSnapshotError, NotAFileError, BytesDroppedError),
            raw_output=_cat_bytes,
        ),
        cat,
    ),
    Verb(
        _contract(
            "timeline.pin",
            "pin",
            PinRequest,
            PinResult,
            Effect.WRITE,
            "Keep a snapshot exact through any future thinning of the timeline: a gc never removes "
            "it nor drops its bytes. A snapshot a gc already thinned (partial) cannot be pinned.",
            errors=(*ID_ERRORS, SnapshotPartialError),
            event="pinned",
            tool=ToolSpec(idempotent=True),
        ),
        pin,
    ),
    Verb(
        _contract(
            "timeline.unpin",
            "unpin",
            PinRequest,
            PinResult,
            Effect.WRITE,
            "Let a pinned snapshot be thinned again.",
            event="unpinned",
            tool=ToolSpec(idempotent=True),
        ),
        unpin,
    ),
)
