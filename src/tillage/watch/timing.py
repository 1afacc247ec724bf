"""When the watcher seals: after a quiet moment, or at a bounded interval during a storm.

Pure functions of the clock readings, so the decision is tested without waiting.
"""

from __future__ import annotations

MIN_STORM_CAP = 2.0  # seconds: a storm that never goes quiet is still sealed this often, at least
RESCAN_INTERVAL = 5.0  # seconds between full-walk seals when inotify cannot cover the tree


def storm_cap(debounce: float) -> float:
    """The longest a change waits for a quiet moment before it is sealed anyway."""
    return max(MIN_STORM_CAP, 10.0 * debounce)


def seal_delay(
    now: float,
    first_change: float | None,
    last_change: float | None,
    debounce: float,
) -> float | None:
    """Seconds until the watcher should seal (0.0: now), or None when nothing is pending.

    `first_change` is the first change not yet sealed, `last_change` the latest one: the seal
    comes once the folder has been quiet for `debounce`, or `storm_cap(debounce)` after the
    first change, whichever is sooner.
    """
    if first_change is None:
        return None
    last = first_change if last_change is None else last_change
    due = min(last + debounce, first_change + storm_cap(debounce))
    return max(0.0, due - now)


def next_wake(
    now: float, seal_in: float | None, rescan_at: float | None
) -> tuple[bool, float | None]:
    """Combines the debounce with the periodic rescan: (seal now?, seconds to sleep or None
    for "until something happens")."""
    waits = [w for w in (seal_in, None if rescan_at is None else rescan_at - now) if w is not None]
    if not waits:
        return False, None
    soonest = min(waits)
    if soonest <= 0:
        return True, None
    return False, soonest
