"""Verbs that seal snapshots and read the timeline: snap, timeline, show, diff, cat, pin."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import BusyError, InvalidArgumentError, NotFoundError, TillageError
from tillage.features.lifecycle.errors import BytesDroppedError, SnapshotPartialError
from tillage.store.errors import (
    BadSnapshotIdError,
    LiveFolderError,
    SnapshotAmbiguousError,
    SnapshotBeyondTimelineError,
    SnapshotNotFoundError,
)
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
    SNAPSHOT_OR_LIVE,
    SNAPSHOT_REF,
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

    from tillage.verbs.texts import DiffStatInfo, PatchInfo


ID_ERRORS = (
    SnapshotNotFoundError,
    SnapshotAmbiguousError,
    BadSnapshotIdError,
    SnapshotBeyondTimelineError,
    LiveFolderError,
)


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
        """A seal changes no file and no fact but the timeline's, and the timeline is its
        record: it is no operation (a watcher or an agent's hooks would bury the log)."""
        return None

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
    limit: int = param(
        "how many snapshots at most, newest first (default: 50)", default=50, short="-n"
    )
    session: str | None = param("only snapshots of this agent session", default=None)
    trigger: str | None = param("only snapshots sealed for this reason", default=None)
    before: str | None = param(
        "only snapshots sealed at or before this time (RFC 3339 like 2026-12-01T10:00:00Z, "
        "or epoch seconds); the newest of them is the state the folder was in then",
        default=None,
        metavar="TIME",
    )
    after: str | None = param(
        "only the snapshots older than this one: give the last of a page whose `more` said "
        "there were more, to get the next page",
        default=None,
        metavar="ID",
    )


@dataclass(frozen=True)
class TimelineResult:
    snapshots: tuple[SnapshotInfo, ...]
    # How many more snapshots match beyond the limit (0 when the list is whole).
    more: int = 0


def timeline(ctx: Context, req: TimelineRequest) -> TimelineResult:
    from tillage.core.models import TRIGGERS
    from tillage.errors import echo

    if req.limit < 1:
        raise InvalidArgumentError("-n must be at least 1")
    if req.trigger is not None and req.trigger not in TRIGGERS:
        raise InvalidArgumentError(
            f"unknown trigger {echo(req.trigger)}", next_step="use one of: " + ", ".join(TRIGGERS)
        )
    before_ns = None if req.before is None else _time_ns(req.before)
    ws = ctx.workspace
    after = None if req.after is None else _own_snapshot(ws, req.after)
    rows = ws.store.snapshots(
        ws.id,
        limit=req.limit,
        trigger=req.trigger,
        session=req.session,
        before_ns=before_ns,
        after=after,
    )
    more = 0
    if len(rows) == req.limit:
        filtered = (req.trigger, req.session, before_ns, after) != (None, None, None, None)
        if filtered:
            more = _count_after(ws, req, before_ns, rows[-1])
        else:
            more = ws.store.snapshot_count(ws.id) - len(rows)
    return TimelineResult(snapshots=tuple(snapshot_info(r) for r in rows), more=max(more, 0))


def _own_snapshot(ws: Any, ref: str) -> Any:
    """The snapshot a page goes on from: one of this timeline's own (a fork's base belongs to
    its parent's timeline, and listing after it would list nothing of this one)."""
    from tillage.workspace.timeline import resolve

    row = resolve(ws, ref)
    if row.workspace != ws.id:
        raise InvalidArgumentError(
            f"snapshot {row.id[:12]} is not in this workspace's own timeline",
            next_step="give one listed by `till timeline` here",
        )
    return row


def _count_after(ws: Any, req: TimelineRequest, before_ns: int | None, last: Any) -> int:
    """How many snapshots the filters match beyond `last`, the page's last row (one index
    query, no rows read)."""
    sql = (
        "SELECT COUNT(*) FROM snapshots WHERE workspace=?"
        " AND (sealed_at_ns < ? OR (sealed_at_ns = ? AND seq < ?))"
    )
    args: list[Any] = [ws.id, last.sealed_at_ns, last.sealed_at_ns, last.seq]
    for clause, value in (
        (" AND sealed_at_ns <= ?", before_ns),
        (" AND trigger=?", req.trigger),
        (" AND session=?", req.session),
    ):
        if value is not None:
            sql += clause
            args.append(value)
    return int(ws.store.conn.execute(sql, args).fetchone()[0])


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
    id: str = param(SNAPSHOT_REF, positional=True)


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


@dataclass(frozen=True)
class DiffRequest:
    target: str = param(
        "compare from this: " + SNAPSHOT_OR_LIVE,
        positional=True,
    )
    to: str | None = param(
        "compare to this (default: @, the live folder): " + SNAPSHOT_OR_LIVE,
        default=None,
        or_positional=True,
    )
    patch: bool = param(
        "also the changed text files' line changes, as a unified diff (binary files say so)",
        default=False,
        short="-p",
    )
    stat: bool = param(
        "also each changed file's lines added and removed, and a summary", default=False
    )


@dataclass(frozen=True)
class DiffResult:
    changes: tuple[ChangeInfo, ...]
    # The direction: from `from_snapshot` to `to_snapshot`; null on a side that is the live
    # folder (`@`; `to` defaults to it).
    from_snapshot: SnapshotInfo | None
    to_snapshot: SnapshotInfo | None
    # With --stat or -p: per changed file, its lines added and removed, and the totals.
    stat: DiffStatInfo | None = None
    # With -p: per changed file, its unified diff (`text`), or why there is none (`note`).
    patches: tuple[PatchInfo, ...] | None = None


def diff(ctx: Context, req: DiffRequest) -> DiffResult:
    from tillage.core.treediff import diff_manifests
    from tillage.verbs import texts

    ws = ctx.workspace
    old = texts.side(ws, req.target)
    new = texts.side(ws, req.to if req.to is not None else "@")
    changes = diff_manifests(old.manifest, new.manifest)
    stat = patches = None
    if req.stat or req.patch:
        stat, patches = texts.line_changes(ws.store, changes, old, new, patch=req.patch)
    return DiffResult(
        changes=change_infos(changes),
        from_snapshot=snapshot_info(old.row) if old.row is not None else None,
        to_snapshot=snapshot_info(new.row) if new.row is not None else None,
        stat=stat,
        patches=patches,
    )


@dataclass(frozen=True)
class CatRequest:
    id: str = param(SNAPSHOT_OR_LIVE, positional=True)
    path: str = param("workspace-relative path of a file in the snapshot", positional=True)


@dataclass(frozen=True)
class CatResult:
    path: str
    size: int
    content_base64: ByteStream


class PathNotInSnapshotError(NotFoundError):
    name = "snapshot.path_not_found"
    module = "store"
    next_step = "list the snapshot's files with `till ls SNAPSHOT`, or check the path's spelling"


class NotAFileError(InvalidArgumentError):
    """The path names a symlink, a folder or a special file in the snapshot, not a file."""

    name = "snapshot.not_a_file"
    module = "store"
    next_step = "`till cat` prints files; for a symlink, cat the path it points to"


def cat(ctx: Context, req: CatRequest) -> CatResult:
    from tillage.core.models import EntryKind
    from tillage.core.paths import fs_decode, parse
    from tillage.errors import echo
    from tillage.workspace.timeline import is_live, resolve
    from tillage.workspace.trees import check_file, flatten, iter_file_chunks

    ws = ctx.workspace
    path = parse(req.path)
    if is_live(req.id):
        return _cat_live(ws.root, path)
    row = resolve(ws, req.id)
    entry = flatten(ws.store, bytes.fromhex(row.tree), (path,)).get(path)
    if entry is None:
        raise PathNotInSnapshotError(
            f"{echo(path)} is not in snapshot {row.id[:12]}",
            next_step=f"list the snapshot's files with `till ls {row.id[:12]}`, or check the "
            "path's spelling",
        )
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


def _cat_live(root: Any, path: str) -> CatResult:
    """`till cat @ PATH`: the file as the folder holds it now, streamed from one descriptor
    opened without following a symlink on the way."""
    import errno
    import os
    import stat

    from tillage.errors import echo
    from tillage.verbs.texts import open_live

    try:
        fd = open_live(root, path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotAFileError(
                f"{echo(path)} is a symlink in the folder, not a file",
                details={"kind": "symlink"},
            ) from exc
        raise PathNotInSnapshotError(
            f"{echo(path)} is not in the folder ({exc.strerror or exc})",
            next_step="list the folder's files with `till ls @`",
        ) from exc
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(info.st_mode):
        folder = stat.S_ISDIR(info.st_mode)
        raise NotAFileError(
            f"{echo(path)} is a {'folder' if folder else 'special file'} in the folder, not a file",
            details={"kind": "directory" if folder else "special"},
        )

    def pieces() -> Any:  # opened again for each reader (a door may read it twice)
        with os.fdopen(open_live(root, path), "rb") as f:
            while piece := f.read(1 << 20):
                yield piece

    return CatResult(path=path, size=info.st_size, content_base64=ByteStream(info.st_size, pieces))


@dataclass(frozen=True)
class PinRequest:
    id: str = param(SNAPSHOT_REF, positional=True)


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
            "The workspace's snapshots, newest first; `more` counts those left beyond the limit.",
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
            "What changed from a snapshot to another snapshot or to the live folder (`@`, either "
            "side). Asked for `stat`: `stat` is `{files: [{path, insertions, deletions, binary, "
            "note}], files_changed, insertions, deletions}` (git's counts of lines; a binary or "
            "too large file has null counts and a `note`); for `patch`, also `patches`: "
            "`[{path, kind, binary, text, note}]`, `text` the file's unified diff in git's "
            "format, null for a "
            "binary file. Both are null when not asked for.",
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
