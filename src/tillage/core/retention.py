"""Retention: which snapshots of one timeline the thinning schedule keeps as they age.

Every snapshot no older than `keep_all` is kept; past that, the newest of each UTC calendar
hour while no older than `hourly`, the newest of each UTC day while no older than `daily`, and
the newest of each ISO week while no older than `weekly` (furrow's defaults: 24 h, 7 d, 90 d,
forever). Ages count back from the gc's `now`; "newest" is over all the timeline's snapshots,
so thinning is monotone: thinning again later removes what a later first thinning would have,
nothing more (a kept snapshot is never orphaned by the loss of a newer one of its bucket).

Pure: the caller passes seal times and now; protection (head, pins, fork bases ...) is the
caller's, on top of what this schedule keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tillage.core.units import DAY, FOREVER, HOUR, format_duration, parse_duration

HOUR_NS = HOUR * 1_000_000_000
DAY_NS = DAY * 1_000_000_000
WEEK_NS = 7 * DAY_NS
# What FOREVER becomes when a budget tightens the schedule: a year of weeks, then halved.
FOREVER_WHEN_TIGHTENED = 52 * WEEK_NS
_FIELDS = ("keep_all", "hourly", "daily", "weekly")


@dataclass(frozen=True)
class Retention:
    """A thinning schedule: the age (ns) up to which each band keeps snapshots (FOREVER: no
    limit)."""

    keep_all: int
    hourly: int
    daily: int
    weekly: int

    def to_json(self) -> dict[str, str]:
        """Returns the schedule as people write it: `{"keep_all": "24h", ..., "weekly":
        "forever"}`."""
        return {field: format_duration(getattr(self, field)) for field in _FIELDS}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Retention:
        """Reads `to_json`'s form; a field that is missing keeps DEFAULT's value. Raises
        ValueError on a value that is not a duration (a damaged settings record)."""
        values: dict[str, int] = {}
        for field in _FIELDS:
            if field not in data:
                continue
            text = data[field]
            ns = parse_duration(text) if isinstance(text, str) else None
            if ns is None:
                raise ValueError(f"retention {field} is not a duration: {text!r}")
            values[field] = ns
        return replace(DEFAULT, **values)


DEFAULT = Retention(keep_all=24 * HOUR_NS, hourly=7 * DAY_NS, daily=90 * DAY_NS, weekly=FOREVER)


def _within(age: int, window: int) -> bool:
    return window == FOREVER or age <= window


def _iso_week(day: int) -> int:
    """A number for the ISO week (Monday to Sunday) holding the day `day` since 1970-01-01 (a
    Thursday): the same for the seven days of one ISO week, different for any other."""
    return (day + 3) // 7


def survivors(sealed: Sequence[tuple[str, int]], now_ns: int, policy: Retention) -> set[str]:
    """Returns the IDs the schedule alone keeps of ONE timeline's snapshots `(id, sealed_at_ns)`,
    given in seal order (of two sealed at the same nanosecond, the later in the list is the
    newer). Snapshots sealed after `now_ns` (a skewed clock) are kept."""
    newest_hour: dict[int, tuple[int, int]] = {}
    newest_day: dict[int, tuple[int, int]] = {}
    newest_week: dict[int, tuple[int, int]] = {}
    for position, (_, sealed_at) in enumerate(sealed):
        rank = (sealed_at, position)
        hour = sealed_at // HOUR_NS
        day = sealed_at // DAY_NS
        week = _iso_week(day)
        if newest_hour.get(hour, rank) <= rank:
            newest_hour[hour] = rank
        if newest_day.get(day, rank) <= rank:
            newest_day[day] = rank
        if newest_week.get(week, rank) <= rank:
            newest_week[week] = rank
    kept: set[str] = set()
    for position, (snapshot, sealed_at) in enumerate(sealed):
        age = now_ns - sealed_at
        rank = (sealed_at, position)
        day = sealed_at // DAY_NS
        if (
            age < 0
            or _within(age, policy.keep_all)
            or (_within(age, policy.hourly) and newest_hour[sealed_at // HOUR_NS] == rank)
            or (_within(age, policy.daily) and newest_day[day] == rank)
            or (_within(age, policy.weekly) and newest_week[_iso_week(day)] == rank)
        ):
            kept.add(snapshot)
    return kept


def tightened(policy: Retention, step: int) -> Retention:
    """The schedule a budget falls back to at `step` (0: `policy` itself): every window halved
    `step` times, FOREVER counted as 52 weeks first; never below 0."""
    if step <= 0:
        return policy

    def halve(window: int) -> int:
        base = FOREVER_WHEN_TIGHTENED if window == FOREVER else max(window, 0)
        return base >> min(step, 127)

    return Retention(*(halve(getattr(policy, field)) for field in _FIELDS))
