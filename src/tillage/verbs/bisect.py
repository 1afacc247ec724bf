"""The bisect verb: the first snapshot where a check fails, probed in disposable copies."""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import BusyError, IntegrityError
from tillage.features.bisect.errors import (
    BisectAbortedError,
    BisectBadPassesError,
    BisectGoodFailsError,
    BisectRangeError,
    BisectUntestableEndError,
)
from tillage.platform.errors import DiskFullError
from tillage.store.errors import BadSnapshotIdError, SnapshotAmbiguousError, SnapshotNotFoundError
from tillage.verbs.contract import (
    Audience,
    Contract,
    Effect,
    Scope,
    ToolLimit,
    ToolSpec,
    Verb,
    param,
)
from tillage.verbs.invoke import Context
from tillage.verbs.views import SnapshotInfo, snapshot_info

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class BisectRequest:
    command: tuple[str, ...] = param(
        "the check, after `--`: exit 0 good, 125 skip (untestable), 1-127 bad, above 127 "
        "aborts; one word runs through /bin/sh -c",
        remainder=True,
        metavar="CMD",
    )
    good: str | None = param(
        "a snapshot where the check passes (default: the oldest of the timeline)",
        default=None,
        metavar="ID",
    )
    bad: str | None = param(
        "a snapshot where it fails (default: the folder as it is now, sealed first)",
        default=None,
        metavar="ID",
    )
    limit: int | None = param(
        "run the check at most N times (both ends included); stopped before the end, the "
        "range narrowed so far is answered (`range`, `candidates`; first_bad null), marked "
        "limit_reached",
        default=None,
        metavar="N",
    )


@dataclass(frozen=True)
class ProbeInfo:
    snapshot: SnapshotInfo
    exit_code: int
    verdict: str
    seconds: float
    output: str


@dataclass(frozen=True)
class BisectRange:
    # The newest snapshot seen to pass (last_good).
    good: SnapshotInfo
    # The oldest snapshot seen to fail: first_bad when found.
    bad: SnapshotInfo
    # How many snapshots may still be the first bad one (after good, up to bad included):
    # 1 when found.
    remaining: int


@dataclass(frozen=True)
class BisectResult:
    # The first snapshot that fails, only when proven (`outcome` found); null otherwise: the
    # first bad one is then somewhere in `range`, not yet known.
    first_bad: SnapshotInfo | None
    # The newest snapshot known to pass, before first_bad on the timeline.
    last_good: SnapshotInfo
    probes: tuple[ProbeInfo, ...]
    probe_count: int
    # found | only_skipped_left (the first bad one is among `candidates`: the check skipped
    # the others) | limit_reached (--limit stopped the search; `candidates` is what is left).
    outcome: str
    # Snapshot IDs that may be the first bad one, oldest first (just first_bad when found).
    candidates: tuple[str, ...]
    # Snapshots on the timeline from the good end to the bad end, both included.
    range_size: int
    # About how many more probes a bisect of what is left needs (0 when finished).
    steps_left: int
    # The folder's present, sealed because --bad was not given (null: the head already was).
    sealed: SnapshotInfo | None
    # The command to run next: the diff that broke it, or the bisect that continues.
    next: str
    # Where the search ended: the newest snapshot seen to pass, the oldest seen to fail, and
    # how many between them (the bad one included) may be the first bad one.
    range: BisectRange


def bisect(ctx: Context, req: BisectRequest) -> BisectResult:
    from tillage.features.bisect import bisect as bs

    done = bs.bisect(
        ctx.workspace,
        req.command,
        good=req.good,
        bad=req.bad,
        limit=req.limit,
        launch=ctx.settings.launch,
        on_progress=ctx.on_progress,
    )
    return BisectResult(
        first_bad=snapshot_info(done.first_bad) if done.first_bad is not None else None,
        last_good=snapshot_info(done.last_good),
        probes=tuple(
            ProbeInfo(
                snapshot=snapshot_info(p.snapshot),
                exit_code=p.exit_code,
                verdict=str(p.verdict),
                seconds=round(p.seconds, 3),
                output=p.output,
            )
            for p in done.probes
        ),
        probe_count=len(done.probes),
        outcome=done.outcome,
        candidates=tuple(row.id for row in done.candidates),
        range_size=done.range_size,
        steps_left=done.steps_left,
        sealed=snapshot_info(done.sealed) if done.sealed is not None else None,
        next=_next_command(done.outcome, done.last_good.id, done.bad.id, req.command),
        range=BisectRange(
            good=snapshot_info(done.last_good),
            bad=snapshot_info(done.bad),
            remaining=len(done.candidates),
        ),
    )


def _next_command(outcome: str, good: str, bad: str, command: tuple[str, ...]) -> str:
    """What broke it (`till diff`), or, when --limit stopped the search, the bisect that goes
    on from the range narrowed so far."""
    if outcome == "limit_reached":
        words = " ".join(_quote(w) for w in command)
        return f"till bisect --good {good[:12]} --bad {bad[:12]} -- {words}"
    return f"till diff {good[:12]} --to {bad[:12]}"


def _quote(word: str) -> str:
    """Quotes a word for a POSIX shell (shlex.quote without importing re at start-up)."""
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_"
    if word and all(ch in safe for ch in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        Contract(
            name="bisect.run",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.WRITE,
            request=BisectRequest,
            result=BisectResult,
            cli="bisect",
            errors=(
                SnapshotNotFoundError,
                SnapshotAmbiguousError,
                BadSnapshotIdError,
                BisectRangeError,
                BisectGoodFailsError,
                BisectBadPassesError,
                BisectUntestableEndError,
                BisectAbortedError,
                BusyError,
                IntegrityError,
                DiskFullError,
            ),
            tool=ToolSpec(
                limits=(ToolLimit("limit", None, None, minimum=2),),
                doc="Find the first snapshot where a check fails: binary search along the "
                "timeline from `good` (default: the oldest) to `bad` (default: the folder now, "
                "sealed first), each probe run in a disposable copy of its snapshot, never in "
                "the workspace. The check's exit status says: 0 good, 125 skip, 1 to 127 bad, "
                "above 127 aborts (as for git bisect run). The probe sees "
                "TILLAGE_BISECT_SNAPSHOT. `first_bad` is set only when found; otherwise (only "
                "skipped snapshots left, or `limit` reached) it is not set and `range` {good, "
                "bad, remaining} says where the first bad one lies.",
                docs=(
                    (
                        "command",
                        "the check: a command line run through /bin/sh -c in each "
                        "probed snapshot's copy; exit 0 good, 125 skip (untestable), 1 to 127 bad, "
                        "above 127 aborts",
                    ),
                    (
                        "good",
                        "a snapshot where the check passes (its whole ID; default: the "
                        "oldest of the timeline)",
                    ),
                    (
                        "bad",
                        "a snapshot where it fails (its whole ID; default: the folder as it "
                        "is now, sealed first)",
                    ),
                    (
                        "limit",
                        "run the check at most this many times (both ends included); "
                        "stopped before the end, the range narrowed so far is answered (`range`, "
                        "`candidates`), marked limit_reached",
                    ),
                ),
            ),
            doc="Find the first snapshot where a check fails: binary search along the "
            "timeline from --good (default: the oldest) to --bad (default: the folder now, "
            "sealed first), each probe run in a disposable copy of its snapshot, never in the "
            "workspace. Exit statuses as `git bisect run`: 0 good, 125 skip, 1-127 bad, above "
            "127 aborts. The probe sees TILLAGE_BISECT_SNAPSHOT. `first_bad` is set only when "
            "found; otherwise (only skipped snapshots left, or --limit reached) it is null and "
            "`range` {good, bad, remaining} says where the first bad one lies.",
        ),
        bisect,
    ),
)
