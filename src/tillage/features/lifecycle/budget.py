"""The store's space budget: at most `max_bytes` on disk, and at least `reserve_free_bytes` left
free on its file system. Checked once after every write (a verb, a watcher's seal: see
features/after_write.py); when over, gc runs with thinning tightened step by step (the oldest
go first; the protected set never) until the store is under.

Setting a budget removes nothing. A budget set below what the store holds already is enforced
by `till gc --yes` (the person's confirmation), not by the next seal: until then seals keep
enforcing the limits they kept before (`after_seals` in the setting), so lowering the budget
never costs history without a `--yes`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from tillage.platform.locks import SHARED_WAIT, holds_shared

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.features.lifecycle.gc import GcOutcome
    from tillage.store.store import Store

DEFAULT_MAX = 20 << 30
AFTER_WRITE_WAIT = 2.0
FLOOR_KEY = "budget_floor"  # index meta: the size an enforcement could not get under
DEFAULT_RESERVE = 512 << 20
# Each step halves every window (the schedule's and the byte windows); twelve halvings take 90
# days below an hour, and the last step (every window shifted to zero) leaves only the protected
# set.
STEPS = (*range(13), 64)


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    reserve_free_bytes: int


@dataclass(frozen=True)
class Holder:
    """A protected snapshot that holds bytes a budget cannot take: why it is kept."""

    snapshot: str
    workspace: str
    why: str


@dataclass(frozen=True)
class BudgetState:
    limits: Limits
    store_bytes: int
    filesystem_free_bytes: int

    @property
    def over_budget(self) -> bool:
        return (
            self.store_bytes > self.limits.max_bytes
            or self.filesystem_free_bytes < self.limits.reserve_free_bytes
        )


def limits_of(store: Store) -> Limits:
    """The budget the person set (the defaults until `till budget` sets one)."""
    return _limits(store.settings().get("budget") or {})


def after_seals_of(store: Store) -> Limits:
    """The limits a seal enforces by itself: the budget, unless it was set below what the store
    held then and no `gc --yes` has enforced it since (then the limits seals kept before)."""
    saved = store.settings().get("budget") or {}
    earlier = saved.get(AFTER_SEALS)
    return _limits(earlier if isinstance(earlier, dict) else saved)


def _limits(saved: dict[str, object]) -> Limits:
    return Limits(
        int(str(saved.get("max_bytes", DEFAULT_MAX))),
        int(str(saved.get("reserve_free_bytes", DEFAULT_RESERVE))),
    )


AFTER_SEALS = "after_seals"  # the settings key: limits seals keep until a gc --yes confirms


def set_limits(store: Store, wanted: Limits) -> bool:
    """Records the budget `wanted`, removing nothing; True when it changed. A budget the store
    is over already is only enforced by a confirmed gc: seals keep the limits they kept."""
    now, seals = limits_of(store), after_seals_of(store)
    if wanted == now:
        return False
    body: dict[str, object] = {
        "max_bytes": wanted.max_bytes,
        "reserve_free_bytes": wanted.reserve_free_bytes,
    }
    held = state(store, limits=wanted)
    if held.over_budget:
        # Each limit the store is over already stays as loose as seals kept it.
        body[AFTER_SEALS] = {
            "max_bytes": max(seals.max_bytes, wanted.max_bytes)
            if held.store_bytes > wanted.max_bytes
            else wanted.max_bytes,
            "reserve_free_bytes": min(seals.reserve_free_bytes, wanted.reserve_free_bytes)
            if held.filesystem_free_bytes < wanted.reserve_free_bytes
            else wanted.reserve_free_bytes,
        }
    store.publish("settings", {"budget": body})
    return True


def confirmed(store: Store) -> None:
    """A gc the person confirmed enforced the budget: from now on seals enforce it too."""
    saved = store.settings().get("budget") or {}
    if AFTER_SEALS in saved:
        now = limits_of(store)
        store.publish(
            "settings",
            {"budget": {"max_bytes": now.max_bytes, "reserve_free_bytes": now.reserve_free_bytes}},
        )


def free_bytes(store: Store) -> int:
    """Bytes an unprivileged writer may still use on the store's file system."""
    st = os.statvfs(store.home)
    return st.f_bavail * st.f_frsize


def state(store: Store, *, exact: bool = True, limits: Limits | None = None) -> BudgetState:
    """The budget (or `limits`) as it stands: `exact` counts the store's files on disk;
    otherwise the index's sum of record lengths (a query, no walk), which may undercount
    garbage a gc has not swept."""
    from tillage.store.sweep import store_bytes

    used = store_bytes(store.home) if exact else store.bytes_on_disk()
    return BudgetState(limits or limits_of(store), used, free_bytes(store))


def holders(store: Store) -> list[Holder]:
    """The snapshots a budget may never remove (heads, pins, fork bases, sessions, undo
    points): what holds the bytes when a store cannot get under its budget."""
    from tillage.features.lifecycle.gc import protected, retention_of
    from tillage.platform import clock

    guard = protected(store, clock.now_ns(), retention_of(store))
    out = []
    for snapshot, why in sorted(guard.kept.items(), key=lambda kv: (kv[1], kv[0])):
        row = store.snapshot(snapshot)
        if row is not None:
            out.append(Holder(snapshot, row.workspace, why))
    return out


def enforce(
    store: Store,
    *,
    wait: float = SHARED_WAIT,
    limits: Limits | None = None,
    after: GcOutcome | None = None,
) -> GcOutcome | None:
    """Runs gc, tightening step by step, until the store is under its budget (or `limits`);
    None when it was under already. `after`: the ordinary gc ran already (`till gc --yes`),
    so only the tightened steps are left. Never inside an operation that uses the store (the
    gc would wait for it): that operation's caller checks again after it. Busy when other
    operations keep the store longer than `wait` seconds. A store left over its budget (the
    protected set alone is too big) remembers its size then, so seals do not gc again until it
    has grown."""
    now = state(store, limits=limits)
    if holds_shared() or not now.over_budget:
        return None
    from tillage.features.lifecycle.gc import collect
    from tillage.store.sweep import REWRITE_THRESHOLD

    total: GcOutcome | None = after
    for step in _steps(now):
        if step == 0 and after is not None:
            continue
        # The first pass is the ordinary gc; the tightened ones free every garbage byte.
        threshold = REWRITE_THRESHOLD if step == 0 else 0.0
        outcome = collect(
            store, dry_run=False, step=step, threshold=threshold, reason="budget", wait=wait
        )
        total = outcome if total is None else total.plus(outcome)
        if not state(store, limits=limits).over_budget:
            break
    left = state(store, exact=False, limits=limits)
    _remember_floor(store, left.store_bytes if left.over_budget else None)
    return total


def preview(store: Store, first: GcOutcome, *, wait: float = SHARED_WAIT) -> GcOutcome:
    """What `enforce` after the ordinary gc `first` (a dry run) would remove, changing nothing:
    the first tightened step whose reclaimed bytes would bring the store under, or the last."""
    now = state(store)
    if not now.over_budget or _under(now, first):
        return first
    from tillage.features.lifecycle.gc import collect

    found = first
    for step in _steps(now)[1:]:
        found = collect(store, dry_run=True, step=step, threshold=0.0, wait=wait)
        if _under(now, found):
            break
    return replace(
        found,
        removed=tuple(sorted(set(first.removed) | set(found.removed))),
        snapshots_removed=len(set(first.removed) | set(found.removed)),
    )


def _under(now: BudgetState, dry: GcOutcome) -> bool:
    """Tells whether reclaiming what the dry run `dry` would reclaim brings the store under."""
    after = BudgetState(
        now.limits,
        max(0, now.store_bytes - dry.bytes_reclaimed),
        now.filesystem_free_bytes + dry.bytes_reclaimed,
    )
    return not after.over_budget


def _steps(now: BudgetState) -> tuple[int, ...]:
    """The tightening steps worth taking: all of them when the store is over its own cap or
    could free enough to restore the reserve; only the ordinary gc when the disk is short by
    more than the whole store holds (something else filled it: removing history would lose it
    and still not make room)."""
    if _hopeless(now):
        return STEPS[:1]
    return STEPS


def _hopeless(now: BudgetState) -> bool:
    """Over only because the disk is short by more than the whole store holds."""
    deficit = now.limits.reserve_free_bytes - now.filesystem_free_bytes
    return now.store_bytes <= now.limits.max_bytes and deficit > now.store_bytes


def _remember_floor(store: Store, size: int | None) -> None:
    """Records (or, None, forgets) the size at which an enforcement could not get under."""
    from tillage.store import index as ix

    with ix.write_txn(store.conn):
        if size is None:
            store.conn.execute("DELETE FROM meta WHERE key=?", (FLOOR_KEY,))
        else:
            ix.set_meta(store.conn, FLOOR_KEY, str(size))


def _grew_past_floor(store: Store, now: BudgetState) -> bool:
    """Tells whether the store grew enough since an enforcement that could not get under for
    another to be worth its walk (a tenth more, or 64 MiB)."""
    from tillage.store import index as ix

    floor = ix.get_meta(store.conn, FLOOR_KEY)
    if floor is None:
        return True
    base = int(floor)
    return now.store_bytes > base + max(64 << 20, base // 10)


def check_after_write(store: Store) -> GcOutcome | None:
    """The cheap check after every write: an index query and a statvfs; gc only when over, and
    not again and again for a store that cannot get under until it has grown, nor for a disk
    something else filled (`till status` says so either way)."""
    if holds_shared() or store.read_only:
        return None
    limits = after_seals_of(store)
    quick = state(store, exact=False, limits=limits)
    if not quick.over_budget or _hopeless(quick) or not _grew_past_floor(store, quick):
        return None
    # A write's caller (an agent, a hook) must not wait behind a long rewind elsewhere: the
    # next seal tries again.
    return enforce(store, wait=AFTER_WRITE_WAIT, limits=limits)
