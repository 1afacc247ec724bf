"""The rewind verb: put the folder back, whole or by path; previews with --dry-run."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tillage.core.errors import PathNotInSnapshotError
from tillage.errors import BusyError, IntegrityError
from tillage.platform.errors import DiskFullError
from tillage.store.errors import (
    BadSnapshotIdError,
    LiveFolderError,
    SnapshotAmbiguousError,
    SnapshotBeyondTimelineError,
    SnapshotNotFoundError,
)
from tillage.verbs.contract import Audience, Contract, Effect, Scope, ToolSpec, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.views import (
    SNAPSHOT_REF,
    ChangeInfo,
    SnapshotInfo,
    change_infos,
    snapshot_info,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class RewindRequest:
    id: str = param("the snapshot to rewind to: " + SNAPSHOT_REF, positional=True)
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
    # Hard links put back as plain files: the other name of the inode is outside --paths.
    unlinked: tuple[str, ...]
    # Paths of a thinned snapshot whose bytes a gc dropped: `{path, class, reason}` each; the
    # folder's own copy of each was left as it is.
    missing: tuple[dict[str, str], ...]
    # The exact command to run next: to apply a dry run, or to undo an applied rewind.
    next: str

    def undo_plan(self, req: RewindRequest) -> dict[str, Any] | None:
        """`till undo`: back to the seal made before writing (the same paths only)."""
        if not self.applied or self.undo is None:
            return None
        return {"kind": "rewind", "to": self.undo, "paths": list(req.paths) if req.paths else None}

    def event_detail(self, req: RewindRequest) -> dict[str, Any] | None:
        """The `rewound` event's detail (`till events`); None when nothing was applied."""
        if not self.applied:
            return None
        return {
            "snapshot": self.snapshot.id,
            "short": self.snapshot.short,
            "paths": list(req.paths) if req.paths else None,
            "undo": self.undo,
            "changes": len(self.changes),
        }


def rewind(ctx: Context, req: RewindRequest) -> RewindResult:
    from tillage.workspace import rewind as rw
    from tillage.workspace.timeline import resolve

    ws = ctx.workspace
    scopes = rw.normalize_scopes(req.paths)
    target = resolve(ws, req.id)
    with _naming(target.id):
        return _rewind(ctx, req, target, scopes)


def _naming(snapshot: str) -> Any:
    """A --paths entry the target lacks is answered with the command that lists its files."""
    import contextlib

    from tillage.core.errors import PathNotInSnapshotError

    @contextlib.contextmanager
    def naming() -> Any:
        try:
            yield
        except PathNotInSnapshotError as exc:
            exc.next = (
                f"list the snapshot's files with `till ls {snapshot[:12]}`, or check the path's "
                "spelling"
            )
            raise

    return naming()


def _rewind(ctx: Context, req: RewindRequest, target: Any, scopes: Any) -> RewindResult:
    from tillage.workspace import rewind as rw

    ws = ctx.workspace
    if req.dry_run:
        outcome = rw.preview(ws, target, scopes)
    else:
        outcome = rw.apply(ws, target, scopes, on_progress=ctx.on_progress)
        if scopes is None:  # the whole folder: merges landed after the target are undone
            from tillage.features.merge.unmerge import restore_fork_bases, restore_own_base

            restore_fork_bases(ws, target)
            restore_own_base(ws, target)
    return RewindResult(
        snapshot=snapshot_info(outcome.target),
        changes=change_infos(outcome.changes),
        applied=outcome.applied,
        undo=outcome.undo,
        rescued=outcome.rescued,
        rescue=outcome.rescue,
        unlinked=outcome.unlinked,
        missing=tuple(
            {"path": m.path, "class": m.cls, "reason": m.reason} for m in outcome.missing
        ),
        next=_next_command(outcome.undo or outcome.target.id, req.paths),
    )


def _next_command(snapshot: str, paths: tuple[str, ...] | None) -> str:
    """`till rewind <id> --yes [--paths ...]`: applies a preview (the target), or undoes an
    applied rewind (its `undo`; only the same paths: the rest of the folder was not touched)."""
    words = ["till", "rewind", snapshot, "--yes"]
    if paths:
        words += ["--paths", *(_quote(p) for p in paths)]
    return " ".join(words)


def _quote(word: str) -> str:
    """Quotes a path for a POSIX shell (shlex.quote without importing re at start-up)."""
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_"
    if word and all(ch in safe for ch in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def _validate(ctx: Context, req: RewindRequest) -> None:
    """A bad, unknown or ambiguous ID (or path) is answered before asking for --yes."""
    from tillage.workspace import rewind as rw
    from tillage.workspace.timeline import resolve

    rw.normalize_scopes(req.paths)
    resolve(ctx.workspace, req.id)


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
                SnapshotBeyondTimelineError,
                LiveFolderError,
                PathNotInSnapshotError,
                BusyError,
                IntegrityError,
                DiskFullError,
            ),
            event="rewound",
            validate=_validate,
            needs_confirmation=_needs_yes,
            preview=_as_preview,
            confirmed=_as_confirmed,
            tool=ToolSpec(
                name="workspace_restore",
                rename=(("snapshot", "id"),),
                doc="Put the folder's files back as they were in a snapshot, byte-exact. The "
                "present state is sealed first and returned as `undo`: restoring `undo` undoes "
                "the restore.",
                docs=(("id", "the snapshot to restore: its whole ID"),),
                guide="This puts files on disk back; it does not touch the conversation. "
                "`paths` (relative to the workspace) restores only those files or folders.",
            ),
            doc="Put the folder (or --paths) back as it was in a snapshot, byte-exact. The "
            "present is sealed first and returned as `undo`, so a rewind can be rewound.",
        ),
        rewind,
    ),
)
