"""Verbs about the store itself: verify (and repair) its objects and index."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context


@dataclass(frozen=True)
class VerifyRequest:
    repair: bool = param("rebuild the index from the packs and drop damaged objects", default=False)


@dataclass(frozen=True)
class ProblemInfo:
    object: str
    problem: str


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    objects: int
    problems: tuple[ProblemInfo, ...]
    repaired: int
    damaged_snapshots: tuple[str, ...]


def verify(ctx: Context, req: VerifyRequest) -> VerifyResult:
    from tillage.store.check import check_store
    from tillage.store.store import Store

    if not Store.exists(ctx.settings.home):
        return VerifyResult(ok=True, objects=0, problems=(), repaired=0, damaged_snapshots=())
    with Store.open(ctx.settings.home, repairing=True) as store:
        report = check_store(store, repair=req.repair)
    return VerifyResult(
        ok=not report.problems,
        objects=report.objects,
        problems=tuple(ProblemInfo(o, p) for o, p in report.problems),
        repaired=report.repaired,
        damaged_snapshots=tuple(report.damaged_snapshots),
    )


VERBS = (
    Verb(
        Contract(
            name="store.verify",
            since=1,
            scope=Scope.NONE,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=VerifyRequest,
            result=VerifyResult,
            cli="verify",
            doc="Read and check every object in the store; --repair rebuilds the index from the "
            "packs and stops serving damaged objects.",
        ),
        verify,
    ),
)
