"""The operation log's verbs: `till op log` lists what changed the folder or the store's facts,
`till undo [OP]` reverses one (jj's op log and undo).

An undo is itself an operation: it records the plan that reverses *it*, so undoing an undo does
the first operation again (a redo). A plain `till undo` picks the newest operation that can be
undone and is not undone yet, leaving undos aside, so repeating it walks further back; undoing
an undo is asked for by its ID. An undo changes the folder (most kinds land as a rewind, which
seals the present first), so it follows the contract's confirmation rule: the explicit OP ID
and `--yes`, `--dry-run` to preview. Crash-safe: an intent names the undo before anything
changes and its own operation (a chosen ID) is recorded last; the next command of any kind
finishes one a crash interrupted (`finish_undos`), and every kind is safe to run twice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tillage.errors import BusyError, NotAttachedError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.oplog_errors import (
    AlreadyUndoneError,
    NothingToUndoError,
    NotUndoableError,
    OperationAmbiguousError,
    OperationNotFoundError,
)
from tillage.verbs.views import ChangeInfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.store.oplog import OperationRow
    from tillage.store.store import Store

UNDO_VERB = "operation.undo"
INTENT_PREFIX = "undo-"
MIN_PREFIX = 6  # as for snapshot IDs (CONTRACT)


@dataclass(frozen=True)
class OperationInfo:
    """One operation as the log shows it. `undo`: what undoing it does (`kind` and its
    arguments; kind `none` with `why` when it cannot be undone); `undoes`: the operation this
    one undid (it is an undo); `undone_by`: the undo that reversed it, if one did."""

    id: str
    short: str
    at: str
    verb: str
    command: str
    args: dict[str, Any]
    heads: dict[str, str | None]
    agent: str | None
    undoable: bool
    undo: dict[str, Any] | None
    description: str
    undoes: str | None
    undone_by: str | None


def operation_info(store: Store, row: OperationRow) -> OperationInfo:
    from tillage.platform.clock import rfc3339
    from tillage.store.oplog import undone_by
    from tillage.verbs.undo_kinds import UNDOABLE, describe

    b = row.body
    plan = b.get("undo")
    undone = undone_by(store, row.id)
    return OperationInfo(
        id=row.id,
        short=row.id[:12],
        at=rfc3339(row.at_ns),
        verb=row.verb,
        command=str(b.get("command") or row.verb),
        args=dict(b.get("args") or {}),
        heads=dict(b.get("heads") or {"before": None, "after": None}),
        agent=b.get("agent"),
        undoable=isinstance(plan, dict) and plan.get("kind") in UNDOABLE and undone is None,
        undo=plan,
        description=describe(plan, store) if isinstance(plan, dict) else "cannot be undone",
        undoes=row.undoes,
        undone_by=undone.id if undone is not None else None,
    )


# -- finding the workspace, even one a forget detached --------------------------------------


def _open(ctx: Context) -> bool:
    """Puts the workspace in `ctx` (finishing what a crash left, as every command does);
    returns whether it is attached. A folder `till forget` detached still has its log, and
    its forget can be undone from there."""
    from tillage.store.store import Store
    from tillage.verbs.invoke import finish_clones, finish_forks
    from tillage.workspace.attach import Workspace
    from tillage.workspace.recovery import open_workspace

    if ctx.workspace is not None:  # opened already (the contract's validation did)
        return ctx.workspace.store.workspace(ctx.workspace.id) is not None
    settings = ctx.settings
    try:
        finish_clones(settings.home)
        ctx.workspace = open_workspace(settings.home, settings.folder, settings.user_home)
    except NotAttachedError:
        if not Store.exists(settings.home):
            raise
        from tillage.store.oplog import detached_workspace

        store = Store.open(settings.home)
        root = settings.folder.resolve()
        found = detached_workspace(store, str(root))
        if found is None:
            store.close()
            raise
        ctx.workspace = Workspace(found, root, store)
        return False
    finish_forks(ctx.workspace.store)
    finish_undos(ctx)
    return True


# -- op log ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpLogRequest:
    limit: int = param("how many operations at most, newest first", default=20, short="-n")


@dataclass(frozen=True)
class OpLogResult:
    # Newest first: this workspace's operations and the store-wide ones (a gc).
    operations: tuple[OperationInfo, ...]
    # How many older ones the limit left out.
    more: int


def op_log(ctx: Context, req: OpLogRequest) -> OpLogResult:
    from tillage.errors import InvalidArgumentError
    from tillage.store.oplog import operations

    if req.limit < 1:
        raise InvalidArgumentError("-n must be at least 1", next_step="till op log -n 20")
    _open(ctx)
    ws = ctx.workspace
    rows = operations(ws.store, ws.id)
    shown = rows[: req.limit]
    return OpLogResult(
        operations=tuple(operation_info(ws.store, r) for r in shown),
        more=len(rows) - len(shown),
    )


# -- undo --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UndoRequest:
    id: str | None = param(
        "the operation to undo: its ID or a unique prefix (`till op log`); without it, the "
        "newest that can be undone is previewed",
        positional=True,
        default=None,
    )
    dry_run: bool = param("say what the undo would change and change nothing", default=False)
    yes: bool = param("confirm: undo it (with the explicit OP)", default=False)


@dataclass(frozen=True)
class UndoResult:
    # The operation undone (or that would be).
    operation: OperationInfo
    applied: bool
    # The undo's own operation (undo it to do the first again); null on a preview.
    undo_operation: str | None
    # What the undo does, in words, and the paths it changes (a rewind's; others change none).
    description: str
    changes: tuple[ChangeInfo, ...]
    # An undo that puts the folder back (a rewind's, a merge's, a pull's...): the snapshot it
    # goes back to, and the seal of the present it made first; null for the other kinds.
    restored: str | None
    sealed_first: str | None
    # The exact command to run next: apply a preview, or undo this undo.
    next: str

    def event_detail(self, _req: UndoRequest) -> dict[str, Any] | None:
        """The `rewound` event of an undo that put the folder back (`till events`)."""
        if not self.applied or self.restored is None:
            return None
        paths = (self.operation.undo or {}).get("paths")
        return {
            "snapshot": self.restored,
            "short": self.restored[:12],
            "paths": paths,
            "undo": self.sealed_first,
            "changes": len(self.changes),
            "operation": self.undo_operation,
        }


def find(store: Store, workspace_id: str, ref: str | None) -> OperationRow:
    """The operation `ref` names (an ID or unique prefix), or the newest that can be undone."""
    from tillage.store import oplog
    from tillage.verbs.undo_kinds import UNDOABLE

    if ref is None:
        for row in oplog.operations(store, workspace_id):
            plan = row.body.get("undo") or {}
            candidate = row.undoes is None and plan.get("kind") in UNDOABLE
            if candidate and oplog.undone_by(store, row.id) is None:
                return row
        raise NothingToUndoError("no operation of this workspace is left to undo")
    text = ref.strip().lower()
    if len(text) < MIN_PREFIX or any(c not in "0123456789abcdef" for c in text):
        raise OperationNotFoundError(
            f"{ref[:40]!r} is not an operation ID (at least {MIN_PREFIX} hex characters)"
        )
    found = oplog.with_prefix(store, workspace_id, text)
    if not found:
        raise OperationNotFoundError(f"no operation of this workspace matches {text!r}")
    if len(found) > 1:
        raise OperationAmbiguousError(f"{text!r} matches more than one operation")
    named = oplog.operation(store, found[0])
    assert named is not None
    return named


def _check(store: Store, row: OperationRow) -> dict[str, Any]:
    """The operation's undo plan, or why it has none usable."""
    from tillage.store.oplog import undone_by
    from tillage.verbs.undo_kinds import UNDOABLE

    plan = row.body.get("undo") or {}
    if plan.get("kind") not in UNDOABLE:
        why = str(plan.get("why") or "it records no way to undo it")
        raise NotUndoableError(
            f"operation {row.id[:12]} ({row.body.get('command')}) cannot be undone: {why}; "
            "nothing was changed",
            details={"operation": row.id, "why": why},
        )
    undone = undone_by(store, row.id)
    if undone is not None:
        raise AlreadyUndoneError(
            f"operation {row.id[:12]} was undone already by {undone.id[:12]}; nothing was changed",
            next_step=f"undo the undo to do it again: `till undo {undone.id[:12]} --yes`",
            details={"operation": row.id, "undone_by": undone.id},
        )
    return dict(plan)


def undo(ctx: Context, req: UndoRequest) -> UndoResult:
    from tillage.verbs.undo_kinds import carry_out

    attached = _open(ctx)
    ws = ctx.workspace
    row = find(ws.store, ws.id, req.id)
    plan = _check(ws.store, row)
    if not attached and plan["kind"] != "attach":
        raise NotAttachedError(
            f"{ws.root} is not attached: only its forget can be undone from here",
            next_step="till op log",
        )
    if req.dry_run or not req.yes:
        done = carry_out(ctx, plan, dry_run=True)
        return UndoResult(
            operation=operation_info(ws.store, row),
            applied=False,
            undo_operation=None,
            description=done.summary,
            changes=done.changes,
            restored=done.restored,
            sealed_first=None,
            next=f"till undo {row.id[:12]} --yes",
        )
    op_id, done = _undo_once(ctx, row, plan)
    return UndoResult(
        operation=operation_info(ctx.workspace.store, row),
        applied=True,
        undo_operation=op_id,
        description=done.summary,
        changes=done.changes,
        restored=done.restored,
        sealed_first=done.sealed,
        next=f"till undo {op_id[:12]} --yes",
    )


def _intent(store: Store, op_id: str) -> Path:
    return store.intents_dir / f"{INTENT_PREFIX}{op_id}.json"


def _lock(store: Store, op_id: str) -> Path:
    return store.locks_dir / f"undo-{op_id}.lock"


def _undo_once(ctx: Context, row: OperationRow, plan: dict[str, Any]) -> tuple[str, Any]:
    """Undoes `row` under an intent: written before anything changes, removed once the undo's
    own operation is recorded."""
    import json

    from tillage.errors import TillageError
    from tillage.platform import failpoints
    from tillage.platform.fs import atomic_write
    from tillage.platform.locks import file_lock
    from tillage.verbs.oplog_record import head_of, new_id

    ws = ctx.workspace
    store = ws.store
    op_id = new_id()
    intent = _intent(store, op_id)
    doc = {
        "op": op_id,
        "undoes": row.id,
        "workspace": ws.id,
        "root": str(ws.root),
        "before": head_of(store, ws.id),
        "plan": plan,
        "agent": ctx.settings.agent,
    }
    with file_lock(_lock(store, op_id), timeout=0, what="this undo"):
        atomic_write(intent, json.dumps(doc).encode())
        failpoints.hit("undo.after_intent")
        try:
            done = _finish(ctx, doc)
        except TillageError:
            # Refused (its target gone, the folder busy): the state stands as it was, and
            # the next command has nothing to finish. (A landing it began is the journal's.)
            intent.unlink(missing_ok=True)
            raise
    return op_id, done


def _finish(ctx: Context, doc: dict[str, Any], *, sealed: str | None = None) -> Any:
    """Carries out an undo's plan and records its operation; the intent goes last."""
    from tillage.platform import failpoints
    from tillage.store.oplog import KIND
    from tillage.verbs.oplog_record import body, head_of
    from tillage.verbs.registry import by_name
    from tillage.verbs.undo_kinds import carry_out

    done = carry_out(ctx, doc["plan"], sealed=sealed)
    assert done.inverse is not None  # carried out, not previewed: it has an inverse
    failpoints.hit("undo.before_record")
    ws = ctx.workspace  # an undone forget attached it again: the same workspace
    ws.store.publish(
        KIND,
        body(
            op_id=doc["op"],
            workspace_id=doc["workspace"],
            contract=by_name(UNDO_VERB).contract,
            request=UndoRequest(id=doc["undoes"], yes=True),
            before=doc["before"],
            after=head_of(ws.store, doc["workspace"]),
            agent=doc.get("agent"),
            plan=done.inverse,
            undoes=doc["undoes"],
        ),
    )
    _intent(ws.store, doc["op"]).unlink(missing_ok=True)
    return done


def finish_undos(ctx: Context) -> None:
    """An undo a crash interrupted is finished by the next command: its plan run again (safe:
    every kind finds done work done) and its operation recorded. One that recorded its
    operation already only loses its intent; one a live process is running is left to it.
    Costs one listing of the intents folder when there is none."""
    import json
    import os

    from tillage.errors import TillageError
    from tillage.platform.locks import file_lock, is_held
    from tillage.store.oplog import operation
    from tillage.workspace.attach import Workspace

    store = ctx.workspace.store
    if store.read_only:
        return
    try:
        names = sorted(n for n in os.listdir(store.intents_dir) if n.startswith(INTENT_PREFIX))
    except FileNotFoundError:
        return
    for name in names:
        path = store.intents_dir / name
        try:
            doc = json.loads(path.read_bytes())
            op_id = str(doc["op"])
        except (OSError, ValueError, KeyError, TypeError):
            if path.is_file():  # written atomically: a torn one was never acted on
                path.unlink()
            continue
        if is_held(_lock(store, op_id)):
            continue
        try:
            with file_lock(_lock(store, op_id), timeout=0, what="this undo"):
                if not path.exists():
                    continue
                if operation(store, op_id) is not None:
                    path.unlink(missing_ok=True)
                    continue
                here = Context(
                    settings=ctx.settings,
                    workspace=Workspace(doc["workspace"], Path(doc["root"]), store),
                )
                try:
                    _finish(here, doc, sealed=_sealed_since(store, doc))
                except TillageError:
                    path.unlink(missing_ok=True)  # it cannot be finished: the state stands
        except BusyError:
            continue


def _sealed_since(store: Store, doc: dict[str, Any]) -> str | None:
    """The seal a rewinding undo made of the present before it was killed (the oldest
    `pre_rewind` after the head it started from), so its inverse goes back to the state
    before the undo, not to the half-landed one the next run seals."""
    if doc["plan"].get("kind") != "rewind":
        return None
    found: str | None = None
    for snap in store.snapshots(doc["workspace"], limit=100):
        if snap.id == doc.get("before"):
            break
        if snap.trigger == "pre_rewind":
            found = snap.id
    return found


def _validate(ctx: Context, req: UndoRequest) -> None:
    """A bad, unknown or ambiguous OP (or one that cannot be undone) is answered before
    asking for --yes; `--yes` without an ID names the operation it would undo."""
    from tillage.errors import ConfirmationRequiredError

    _open(ctx)
    ws = ctx.workspace
    row = find(ws.store, ws.id, req.id)
    _check(ws.store, row)
    if req.yes and req.id is None and not req.dry_run:
        raise ConfirmationRequiredError(
            f"till undo changes the folder and needs the operation's ID with --yes (the newest "
            f"is {row.id[:12]}: {row.body.get('command')}); nothing was changed",
            next_step=f"till undo {row.id[:12]} --dry-run, then till undo {row.id[:12]} --yes",
        )


def _needs_yes(req: UndoRequest) -> bool:
    return not req.dry_run and not req.yes


def _as_preview(req: UndoRequest) -> UndoRequest:
    return replace(req, dry_run=True)


def _as_confirmed(req: UndoRequest) -> UndoRequest:
    return replace(req, yes=True)


VERBS = (
    Verb(
        Contract(
            name="operation.log",
            since=1,
            scope=Scope.FOLDER,
            audience=Audience.USER,
            effect=Effect.READ,
            request=OpLogRequest,
            result=OpLogResult,
            cli="op log",
            doc="List the operations that changed this folder or the store's facts (rewind, "
            "merge, fork, pin, claim, forget, gc...), newest first, each with what undoing it "
            "does.",
        ),
        op_log,
    ),
    Verb(
        Contract(
            name=UNDO_VERB,
            since=1,
            scope=Scope.FOLDER,
            audience=Audience.USER,
            effect=Effect.DESTRUCTIVE,
            request=UndoRequest,
            result=UndoResult,
            cli="undo",
            errors=(
                OperationNotFoundError,
                OperationAmbiguousError,
                NotUndoableError,
                AlreadyUndoneError,
                NothingToUndoError,
                NotAttachedError,
                BusyError,
            ),
            event="rewound",
            validate=_validate,
            needs_confirmation=_needs_yes,
            preview=_as_preview,
            confirmed=_as_confirmed,
            records_operation=False,  # it records its own, with the inverse of what it did
            finish_pending=finish_undos,
            doc="Undo an operation of `till op log`: a rewind, merge, session revert or pull "
            "goes back to the seal it made first, a pin unpins, a claim is released, a forget "
            "attaches again, a fork is removed, a fork-rm restores the fork. An undo is an "
            "operation too: undoing it does the first again. Needs the OP ID and --yes.",
        ),
        undo,
    ),
)
