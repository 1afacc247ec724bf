"""Verbs of a remote's refs: `remote refs` (what the remote holds, as this machine can vouch for
it) and `remote repair-ref` (a damaged or lost ref rewritten from this machine's memory)."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.crypto import BadKeyError
from tillage.errors import BusyError, ConflictError, InvalidArgumentError
from tillage.features.sync.errors import (
    LeaseExpiredError,
    LeaseHeldError,
    RefMissingError,
    UnknownRemoteError,
)
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context
from tillage.verbs.sync import TRANSPORT_ERRORS, _check_ref, _cwd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class RemoteRefsRequest:
    remote: str | None = param("which remote (default: the only one, or origin)", default=None)


@dataclass(frozen=True)
class RemoteRef:
    """One ref: `version` grows by one with each push; `problem` is null for a sound ref,
    else `damaged` (its head does not open: `ref` is null unless this machine knows it),
    `rolled_back` (older than this machine saw it: `seen_version`) or `missing` (this machine
    saw it, the remote lost it)."""

    ref: str | None
    snapshot: str | None
    version: int | None
    pushed_at: str | None
    machine: str | None
    problem: str | None
    seen_version: int | None


@dataclass(frozen=True)
class RemoteRefsResult:
    remote: str
    refs: tuple[RemoteRef, ...]


def remote_refs(ctx: Context, req: RemoteRefsRequest) -> RemoteRefsResult:
    from tillage.features.sync import remotes
    from tillage.features.sync.ref_audit import list_refs

    ws = ctx.workspace
    config = remotes.find(ws.store, ws.id, req.remote)
    entries = list_refs(ws.store, config, ctx.settings.env, _cwd(ctx))
    return RemoteRefsResult(
        config.name,
        tuple(
            RemoteRef(
                e.ref, e.snapshot, e.version, e.pushed_at, e.machine, e.problem, e.seen_version
            )
            for e in entries
        ),
    )


@dataclass(frozen=True)
class RepairRefRequest:
    ref: str = param("the ref to rewrite", default="main")
    remote: str | None = param("which remote (default: the only one, or origin)", default=None)


@dataclass(frozen=True)
class RepairRefResult:
    """`repaired`: whether the ref was rewritten; `problem`: what was found (`damaged`,
    `missing`, or null for a sound ref, left alone); `snapshot`/`version`: the ref now."""

    ref: str
    remote: str
    repaired: bool
    problem: str | None
    snapshot: str
    version: int


def repair_ref(ctx: Context, req: RepairRefRequest) -> RepairRefResult:
    from tillage.features.sync import remotes
    from tillage.features.sync.ref_audit import repair_ref as repair

    _check_ref(req.ref)
    ws = ctx.workspace
    config = remotes.find(ws.store, ws.id, req.remote)
    done = repair(ws.store, config, ctx.settings.env, _cwd(ctx), req.ref)
    return RepairRefResult(
        ref=req.ref,
        remote=config.name,
        repaired=done.problem is not None,
        problem=done.problem,
        snapshot=done.state.snapshot,
        version=done.state.version,
    )


VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        Contract(
            name="remote.refs",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=RemoteRefsRequest,
            result=RemoteRefsResult,
            cli="remote refs",
            errors=(*TRANSPORT_ERRORS, BadKeyError, UnknownRemoteError),
            doc="List every ref of a remote: `ref`, `snapshot`, `version` (one more with each "
            "push), `pushed_at`, `machine` (the pusher's ID). A ref that does not open is "
            "listed with `problem: damaged` instead of failing the listing; one older than "
            "this machine saw it with `rolled_back`; one this machine saw that is gone with "
            "`missing` (`seen_version` says what this machine saw).",
        ),
        remote_refs,
    ),
    Verb(
        Contract(
            name="remote.repair_ref",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.USER,
            effect=Effect.WRITE,
            request=RepairRefRequest,
            result=RepairRefResult,
            cli="remote repair-ref",
            errors=(
                *TRANSPORT_ERRORS,
                BadKeyError,
                RefMissingError,
                LeaseHeldError,
                LeaseExpiredError,
                ConflictError,
                UnknownRemoteError,
                BusyError,
                InvalidArgumentError,
            ),
            doc="Rewrite a damaged or missing ref from what this machine saw of it last (its "
            "snapshot and history, at the next version), under the ref's lease; run it on a "
            "machine that pushed or pulled the ref. A sound ref is left alone "
            "(`repaired: false`); a ref this machine never saw is sync.ref_missing.",
        ),
        repair_ref,
    ),
)
