"""Verbs about the store itself: verify (and repair) its objects and index."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context, finish_forks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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
    fixed: tuple[ProblemInfo, ...]
    reclaimed_packs: int
    reclaimed_bytes: int
    finished_rewinds: tuple[str, ...]

    def exit_status(self) -> int:
        """A store that is not ok is a failed check: exit 1, with this document on stdout."""
        return 0 if self.ok else 1


def verify(ctx: Context, req: VerifyRequest) -> VerifyResult:
    from tillage.store.store import Store

    if not Store.exists(ctx.settings.home):
        return VerifyResult(
            ok=True,
            objects=0,
            problems=(),
            repaired=0,
            damaged_snapshots=(),
            fixed=(),
            reclaimed_packs=0,
            reclaimed_bytes=0,
            finished_rewinds=(),
        )
    with Store.open(ctx.settings.home, repairing=True) as store:
        finished, stuck, report = _checked(store, req.repair)
    problems = [ProblemInfo(o, p) for o, p in report.problems]
    problems += [ProblemInfo(f"intent {ws}", why) for ws, why in stuck]
    return VerifyResult(
        ok=not problems,
        objects=report.objects,
        problems=tuple(problems),
        repaired=report.repaired,
        damaged_snapshots=tuple(report.damaged_snapshots),
        fixed=tuple(ProblemInfo(o, p) for o, p in report.fixed),
        reclaimed_packs=report.reclaimed_packs,
        reclaimed_bytes=report.reclaimed_bytes,
        finished_rewinds=tuple(finished),
    )


def _checked(store: Any, repair: bool) -> tuple[list[str], list[tuple[str, str]], Any]:
    """Finishes interrupted rewinds, then checks (and repairs): a repair rebuilds the index and
    rewrites packs, so it runs alone, as a gc does (INV-14); a check only reads, beside seals,
    but never in the middle of a gc."""
    from tillage.store.check import check_store
    from tillage.workspace.recovery import sweep_leftovers

    if store.log_problem is None:
        finish_forks(store)  # a killed fork's staging copy, or a killed fork-rm's trash
    with store.maintaining() if repair else store.sharing():
        finished, stuck = _finish_interrupted_rewinds(store)
        if not store.read_only:
            sweep_leftovers(store)
        return finished, stuck, check_store(store, repair=repair)


def _finish_interrupted_rewinds(store: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """Finishes every workspace's interrupted rewind before checking (INV-7): a verify must
    not call a store healthy while a folder waits half-rewound. Returns the folders finished,
    and (workspace, why) for intents that could not be finished."""
    from pathlib import Path

    from tillage.errors import TillageError
    from tillage.workspace.attach import Workspace
    from tillage.workspace.journal.intents import INTENT_PREFIX
    from tillage.workspace.recovery import recover_if_interrupted

    finished: list[str] = []
    stuck: list[tuple[str, str]] = []
    if store.read_only or store.log_problem is not None or not store.intents_dir.is_dir():
        return finished, stuck
    for intent in sorted(store.intents_dir.glob(f"{INTENT_PREFIX}*.json")):
        workspace_id = intent.name[len(INTENT_PREFIX) : -len(".json")]
        row = store.workspace(workspace_id)
        if row is None or not Path(row.root).is_dir():
            stuck.append((workspace_id, "an interrupted rewind waits for a folder that is gone"))
            continue
        try:
            if recover_if_interrupted(Workspace(row.id, Path(row.root), store)):
                finished.append(row.root)
        except TillageError as exc:
            stuck.append((workspace_id, exc.message))
    return finished, stuck


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
            doc="Read and check every object in the store (finishing any interrupted rewind "
            "first, and reclaiming packs that killed seals left behind); --repair salvages the "
            "log, rewrites damaged packs, rebuilds the index and reports the state after "
            "repairing. Exits 1 when the store is not ok.",
        ),
        verify,
    ),
)
