"""The store's lifecycle: gc (retention, byte windows, reclaiming), the retention schedule, and
the space budget. Store-wide: they need the store, not a workspace."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tillage.errors import BusyError, InvalidArgumentError
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.invoke import Context

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.features.lifecycle.gc import GcOutcome
    from tillage.store.store import Store


# -- gc ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GcRequest:
    dry_run: bool = param("say what a gc would remove and reclaim, changing nothing", default=False)
    yes: bool = param(
        "confirm: remove what retention no longer keeps and reclaim it", default=False
    )


@dataclass(frozen=True)
class GcResult:
    dry_run: bool
    snapshots_removed: int
    snapshots_thinned: int
    objects_removed: int
    packs_rewritten: int
    bytes_reclaimed: int
    store_bytes_before: int
    store_bytes_after: int
    removed: tuple[str, ...]
    thinned: tuple[str, ...]

    def undo_plan(self, _req: GcRequest) -> dict[str, Any] | None:
        """A gc deleted bytes for good: its operation is recorded, and cannot be undone. One
        that found nothing to do changed nothing: no operation."""
        done = (self.snapshots_removed, self.snapshots_thinned, self.objects_removed)
        if self.dry_run or (not any(done) and not self.packs_rewritten):
            return None
        return {"kind": "none", "why": "a gc deletes what it removed for good"}


def _gc_result(outcome: GcOutcome) -> GcResult:
    return GcResult(
        dry_run=outcome.dry_run,
        snapshots_removed=outcome.snapshots_removed,
        snapshots_thinned=outcome.snapshots_thinned,
        objects_removed=outcome.objects_removed,
        packs_rewritten=outcome.packs_rewritten,
        bytes_reclaimed=outcome.bytes_reclaimed,
        store_bytes_before=outcome.store_bytes_before,
        store_bytes_after=outcome.store_bytes_after,
        removed=outcome.removed,
        thinned=outcome.thinned,
    )


def _nothing(dry_run: bool) -> GcResult:
    return GcResult(dry_run, 0, 0, 0, 0, 0, 0, 0, (), ())


def gc(ctx: Context, req: GcRequest) -> GcResult:
    from tillage.features.lifecycle import budget as budgeted
    from tillage.features.lifecycle.gc import collect
    from tillage.store.store import Store

    if not Store.exists(ctx.settings.home):
        return _nothing(req.dry_run)  # no store: nothing to collect, and none is created
    with Store.open(ctx.settings.home) as store:
        first = collect(store, dry_run=req.dry_run, on_progress=ctx.on_progress)
        if req.dry_run:
            return _gc_result(budgeted.preview(store, first))
        # Confirmed: the budget too, tightening past the schedule while the store is over it
        # (a budget set below what the store held waits for this; seals enforce it after).
        total = budgeted.enforce(store, after=first) or first
        budgeted.confirmed(store)
        return _gc_result(total)


def _gc_needs_yes(req: GcRequest) -> bool:
    return not req.dry_run and not req.yes


def _gc_preview(req: GcRequest) -> GcRequest:
    return replace(req, dry_run=True, yes=False)


def _gc_confirmed(req: GcRequest) -> GcRequest:
    return replace(req, dry_run=False, yes=True)


def _gc_validate(_ctx: Any, req: GcRequest) -> None:
    if req.dry_run and req.yes:
        raise InvalidArgumentError(
            "--dry-run and --yes contradict each other", next_step="give one of them"
        )


# -- retention ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetentionRequest:
    keep_all: str | None = param(
        "keep every snapshot this young (e.g. 24h)", default=None, metavar="DURATION"
    )
    hourly: str | None = param(
        "then the newest of each UTC hour up to this age (e.g. 7d)",
        default=None,
        metavar="DURATION",
    )
    daily: str | None = param(
        "then the newest of each UTC day up to this age (e.g. 90d)",
        default=None,
        metavar="DURATION",
    )
    weekly: str | None = param(
        "then the newest of each ISO week up to this age, or `forever`",
        default=None,
        metavar="DURATION",
    )


@dataclass(frozen=True)
class RetentionResult:
    retention: dict[str, str]
    changed: bool

    def undo_plan(self, _req: RetentionRequest) -> dict[str, Any] | None:
        """Only showing the policy changes nothing; setting it is recorded, not undone."""
        if not self.changed:
            return None
        return {"kind": "none", "why": "set the policy back with `till retention`"}


def retention(ctx: Context, req: RetentionRequest) -> RetentionResult:
    from dataclasses import replace as with_fields

    from tillage.features.lifecycle.gc import retention_of
    from tillage.store.store import Store

    given = {
        name: _duration(f"--{name.replace('_', '-')}", text)
        for name, text in (
            ("keep_all", req.keep_all),
            ("hourly", req.hourly),
            ("daily", req.daily),
            ("weekly", req.weekly),
        )
        if text is not None
    }
    if not given and not Store.exists(ctx.settings.home):
        from tillage.core.retention import DEFAULT

        return RetentionResult(DEFAULT.to_json(), False)
    with Store.open(ctx.settings.home) as store:
        now = retention_of(store)
        wanted = with_fields(now, **given)
        if wanted != now:
            store.publish("settings", {"retention": wanted.to_json()})
        return RetentionResult(wanted.to_json(), wanted != now)


def _duration(flag: str, text: str) -> int:
    from tillage.core.units import parse_duration

    ns = parse_duration(text)
    if ns is None:
        raise InvalidArgumentError(
            f"{flag} {text[:40]!r} is not a duration",
            next_step="give hours, days or weeks such as 24h, 7d, 2w, or `forever`",
        )
    return ns


# -- budget ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetRequest:
    max: str | None = param(
        "the most the store may take on disk (e.g. 20g; b, k, m, g, t are 1024-based)",
        default=None,
        metavar="SIZE",
    )
    reserve_free: str | None = param(
        "what the store must leave free on its file system (e.g. 512m)",
        default=None,
        metavar="SIZE",
    )


@dataclass(frozen=True)
class HolderInfo:
    snapshot: str
    workspace: str
    why: str


@dataclass(frozen=True)
class BudgetResult:
    max_bytes: int
    reserve_free_bytes: int
    store_bytes: int
    filesystem_free_bytes: int
    over_budget: bool
    held_by: tuple[HolderInfo, ...]
    next: str | None = None
    # What setting the budget removed: always null, since setting one removes nothing (a
    # `gc --yes` enforces it). Kept for the contract's callers, who read it.
    enforced: GcResult | None = None

    def undo_plan(self, req: BudgetRequest) -> dict[str, Any] | None:
        """Only showing the budget changes nothing; setting it is recorded, not undone."""
        if req.max is None and req.reserve_free is None:
            return None
        return {"kind": "none", "why": "set the budget back with `till budget`"}


def budget_document(store: Store) -> BudgetResult:
    """The budget as `till budget` and `till status` tell it; what holds the bytes is listed
    only when the store is over (it cannot get under without removing what is protected)."""
    from tillage.features.lifecycle.budget import holders, state

    now = state(store)
    held = (
        tuple(HolderInfo(h.snapshot, h.workspace, h.why) for h in holders(store))
        if now.over_budget
        else ()
    )
    return BudgetResult(
        max_bytes=now.limits.max_bytes,
        reserve_free_bytes=now.limits.reserve_free_bytes,
        store_bytes=now.store_bytes,
        filesystem_free_bytes=now.filesystem_free_bytes,
        over_budget=now.over_budget,
        held_by=held,
        next=OVER_BUDGET_STEP if now.over_budget else None,
    )


OVER_BUDGET_STEP = (
    "nothing was removed: see what getting under the budget would remove with "
    "`till gc --dry-run`, then remove it with `till gc --yes` (or raise the budget)"
)


def budget(ctx: Context, req: BudgetRequest) -> BudgetResult:
    """Shows the budget, or records a new one; never removes anything (a gc --yes does)."""
    from tillage.features.lifecycle.budget import Limits, limits_of, set_limits
    from tillage.store.store import Store

    given = {
        key: _size(flag, text)
        for key, flag, text in (
            ("max_bytes", "--max", req.max),
            ("reserve_free_bytes", "--reserve-free", req.reserve_free),
        )
        if text is not None
    }
    if not given and not Store.exists(ctx.settings.home):
        return _budget_without_store(ctx)
    with Store.open(ctx.settings.home) as store:
        if given:
            limits = limits_of(store)
            set_limits(
                store,
                Limits(
                    given.get("max_bytes", limits.max_bytes),
                    given.get("reserve_free_bytes", limits.reserve_free_bytes),
                ),
            )
        return budget_document(store)


def _budget_without_store(ctx: Context) -> BudgetResult:
    import os

    from tillage.features.lifecycle.budget import DEFAULT_MAX, DEFAULT_RESERVE

    free = 0
    for folder in (ctx.settings.home, *ctx.settings.home.parents):
        try:
            st = os.statvfs(folder)
        except OSError:
            continue
        free = st.f_bavail * st.f_frsize
        break
    over = free < DEFAULT_RESERVE
    return BudgetResult(
        DEFAULT_MAX, DEFAULT_RESERVE, 0, free, over, (), OVER_BUDGET_STEP if over else None
    )


def _size(flag: str, text: str) -> int:
    from tillage.core.units import parse_size

    n = parse_size(text)
    if n is None:
        raise InvalidArgumentError(
            f"{flag} {text[:40]!r} is not a size",
            next_step="give bytes or 1024-based units such as 512m, 20g, 1t",
        )
    return n


VERBS = (
    Verb(
        Contract(
            name="store.gc",
            since=1,
            scope=Scope.NONE,
            audience=Audience.USER,
            effect=Effect.DESTRUCTIVE,
            request=GcRequest,
            result=GcResult,
            cli="gc",
            errors=(BusyError, InvalidArgumentError),
            validate=_gc_validate,
            needs_confirmation=_gc_needs_yes,
            preview=_gc_preview,
            confirmed=_gc_confirmed,
            doc="Apply the retention schedule to every workspace in the store, drop the bytes "
            "of content classes past their window (dependency and build after 3 days, scratch "
            "after 1, databases after 30; the head and pins keep everything), then reclaim "
            "every byte no kept snapshot needs; while the store is over its budget, thinning "
            "tightens step by step as after a seal (never a protected snapshot). Removed "
            "snapshots answer not_found; thinned ones are graded partial. Needs --yes (or "
            "--dry-run to see what it would do).",
        ),
        gc,
    ),
    Verb(
        Contract(
            name="store.retention",
            since=1,
            scope=Scope.NONE,
            audience=Audience.USER,
            effect=Effect.SETTINGS,
            request=RetentionRequest,
            result=RetentionResult,
            cli="retention",
            errors=(InvalidArgumentError,),
            doc="Show the store's retention schedule, or set part of it (a flag not given keeps "
            "its value): every snapshot of the last --keep-all, then the newest of each UTC hour "
            "to --hourly, of each UTC day to --daily, of each ISO week to --weekly. Defaults: "
            "24h, 7d, 90d, forever. `till gc` applies it.",
        ),
        retention,
    ),
    Verb(
        Contract(
            name="store.budget",
            since=1,
            scope=Scope.NONE,
            audience=Audience.USER,
            effect=Effect.SETTINGS,
            request=BudgetRequest,
            result=BudgetResult,
            cli="budget",
            errors=(InvalidArgumentError, BusyError),
            doc="Show the store's space budget, or set it: at most --max on disk (default 20g) "
            "and at least --reserve-free left on its file system (default 512m). Neither removes "
            "anything. Checked after every seal; when over, gc runs with thinning tightened step "
            "by step, never removing a head, a pin or another protected snapshot (`held_by` "
            "names them when the store cannot get under). A budget set below what the store "
            "holds is enforced by `till gc --yes` (`--dry-run` first shows what it would "
            "remove), not by the next seal.",
        ),
        budget,
    ),
)
