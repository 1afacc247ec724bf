"""`till estimate`: what a cold seal of this folder would capture and cost, changing nothing."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb
from tillage.verbs.invoke import Context
from tillage.workspace.errors import FolderMissingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class EstimateRequest:
    pass


@dataclass(frozen=True)
class EstimateResult:
    files: int
    dirs: int
    bytes: int
    # Workspace-relative paths the policy excluded (each the top of an excluded subtree).
    excluded: tuple[str, ...]
    # Bytes by content class; all eight classes, adding up to `bytes`.
    classes: dict[str, int]
    # Raw bytes whose content the store lacks (a content repeated in the folder counts once).
    new_bytes: int
    # Raw bytes the store already holds, or that repeat inside the folder: bytes - new_bytes.
    dedup_bytes: int
    # The predicted duration of a cold seal on this machine, measured (see workspace.estimate).
    seconds: float


def estimate(ctx: Context, req: EstimateRequest) -> EstimateResult:
    from tillage.features.lifecycle.estimate import estimate as run
    from tillage.features.lifecycle.estimate import process_startup_seconds

    # A seal runs in a `till` process that starts up first: this one's start-up measures that
    # (a call served by a long-lived process has no start-up of its own to measure).
    startup = process_startup_seconds() if ctx.settings.own_process else 0.0
    found = run(
        ctx.settings.folder, ctx.settings.home, on_progress=ctx.on_progress, startup_seconds=startup
    )
    return EstimateResult(
        files=found.files,
        dirs=found.dirs,
        bytes=found.bytes,
        excluded=found.excluded,
        classes=found.classes,
        new_bytes=found.new_bytes,
        dedup_bytes=found.dedup_bytes,
        seconds=found.seconds,
    )


VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        Contract(
            name="estimate.folder",
            since=1,
            scope=Scope.FOLDER,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=EstimateRequest,
            result=EstimateResult,
            cli="estimate",
            errors=(FolderMissingError,),
            doc="Predict a cold seal of this folder (--repo, else the current folder; attached "
            "or not) without changing anything: it attaches nothing, creates no store and "
            "writes nothing. `bytes` of `files` in `dirs` folders, what `.tillagepolicy` "
            "`excluded`, bytes by content class (`classes`), `new_bytes` the store lacks and "
            "`dedup_bytes` it holds already (content IDs are the seal's own), and `seconds`, "
            "measured on this machine: the walk and hashing timed as they run, plus "
            "compressing the new bytes at the rate measured on a sample of them.",
        ),
        estimate,
    ),
)
