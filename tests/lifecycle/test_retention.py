"""The thinning schedule (core.retention), property-tested over random seal times.

The buckets are recomputed here independently of the module, with `datetime` (UTC hours, UTC
days, ISO (year, week) pairs), so a wrong bucket in the module cannot agree with itself.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core.retention import DEFAULT, Retention, survivors, tightened
from tillage.core.units import FOREVER

S = 10**9
H = 3600 * S
D = 24 * H
W = 7 * D
NOW = 1_780_000_000 * S  # 2026-05-28, a Thursday


def utc(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // S, tz=UTC)


def hour_of(ns: int) -> Hashable:
    t = utc(ns)
    return (t.year, t.month, t.day, t.hour)


def day_of(ns: int) -> Hashable:
    return utc(ns).date()


def week_of(ns: int) -> Hashable:
    iso = utc(ns).isocalendar()
    return (iso.year, iso.week)


# Seal times: clusters (many seals in one hour) spread over two years, some in the future.
offsets = st.one_of(
    st.integers(-2 * H, 730 * D),
    st.integers(0, 3 * D),
    st.sampled_from([0, H, D, W, 24 * H, 7 * D, 90 * D]).flatmap(
        lambda base: st.integers(base - 2, base + 2)
    ),
)
seal_times = st.lists(offsets, max_size=60).map(lambda offs: sorted(NOW - o for o in offs))


def window(upper: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(0, upper), st.sampled_from([0, H, D, 7 * D, 90 * D]))


def sorted_policy(windows: tuple[int, int, int, int], forever: bool) -> Retention:
    keep_all, hourly, daily, weekly = sorted(windows)
    return Retention(keep_all, hourly, daily, FOREVER if forever else weekly)


policies = st.one_of(
    st.just(DEFAULT),
    st.builds(
        sorted_policy,
        st.tuples(window(3 * D), window(30 * D), window(200 * D), window(700 * D)),
        st.booleans(),
    ),
)


def named(times: Sequence[int]) -> list[tuple[str, int]]:
    return [(f"s{i}", t) for i, t in enumerate(times)]


def within(age: int, limit: int) -> bool:
    return limit == FOREVER or age <= limit


@given(seal_times, policies, st.integers(0, 400 * D))
@examples(300)
def test_thinning_later_removes_what_thinning_then_would_and_nothing_more(
    times: list[int], policy: Retention, later: int
) -> None:
    sealed = named(times)
    first = survivors(sealed, NOW, policy)
    at_later = survivors(sealed, NOW + later, policy)
    again = survivors([s for s in sealed if s[0] in first], NOW + later, policy)
    assert again == at_later
    assert at_later <= first


@given(seal_times, policies)
@examples(300)
def test_thinning_twice_at_once_changes_nothing_the_second_time(
    times: list[int], policy: Retention
) -> None:
    sealed = named(times)
    kept = survivors(sealed, NOW, policy)
    assert survivors([s for s in sealed if s[0] in kept], NOW, policy) == kept


@given(seal_times, policies)
@examples(300)
def test_the_keep_all_window_and_the_future_are_kept_whole(
    times: list[int], policy: Retention
) -> None:
    sealed = named(times)
    kept = survivors(sealed, NOW, policy)
    for name, t in sealed:
        if NOW - t < 0 or within(NOW - t, policy.keep_all):
            assert name in kept


def bands(policy: Retention) -> list[tuple[int, int, Callable[[int], Hashable]]]:
    """(older than, up to, bucket) of each band past keep-all."""
    limits = [policy.keep_all, policy.hourly, policy.daily, policy.weekly]
    return [
        (limits[0], limits[1], hour_of),
        (limits[1], limits[2], day_of),
        (limits[2], limits[3], week_of),
    ]


@given(seal_times, policies)
@examples(300)
def test_each_band_keeps_exactly_the_newest_of_each_of_its_buckets(
    times: list[int], policy: Retention
) -> None:
    sealed = named(times)
    kept = survivors(sealed, NOW, policy)
    newest: dict[tuple[int, Hashable], str] = {}
    for level, (_, _, bucket) in enumerate(bands(policy)):
        for name, t in sealed:  # in seal order: the later of equal times wins
            newest[(level, bucket(t))] = name
    for level, (older, upto, bucket) in enumerate(bands(policy)):
        if older == FOREVER:
            continue
        in_band = [(n, t) for n, t in sealed if NOW - t > older and within(NOW - t, upto)]
        kept_buckets = [bucket(t) for n, t in in_band if n in kept]
        assert len(kept_buckets) == len(set(kept_buckets)), (level, policy)
        for name, t in in_band:  # the newest of each bucket is kept
            if newest[(level, bucket(t))] == name:
                assert name in kept
    if policy.weekly != FOREVER:
        assert all(NOW - t <= policy.weekly for n, t in sealed if n in kept)


def test_the_boundaries_are_exact() -> None:
    # keep-all: age == 24h is kept; one ns older, and not the newest of its hour, it goes
    a = NOW - 24 * H
    older = a - 1
    assert hour_of(a) == hour_of(older)
    assert survivors([("older", older), ("a", a)], NOW, DEFAULT) == {"a"}
    assert survivors([("older", older), ("a", a)], NOW - 1, DEFAULT) == {"a", "older"}

    # hourly: the newest of its hour is kept at age == 7d; one ns older it must also be the
    # newest of its day, and `y` (an hour later, same day) is
    x = (NOW - 8 * D) // D * D + 10 * H
    y = x + H
    assert day_of(x) == day_of(y)
    sealed = [("x", x), ("y", y)]
    assert survivors(sealed, x + 7 * D, DEFAULT) == {"x", "y"}
    assert survivors(sealed, x + 7 * D + 1, DEFAULT) == {"y"}

    # daily: the newest of its day is kept at age == 90d; one ns older it must be the newest
    # of its ISO week: a Tuesday's is not when Wednesday has one, a Sunday's is
    tuesday = (NOW - 100 * D) // D * D + 12 * H
    while utc(tuesday).isoweekday() != 2:
        tuesday += D
    sunday = tuesday + 5 * D
    for day, after in ((tuesday, {"next"}), (sunday, {"day", "next"})):
        sealed = [("day", day), ("next", day + D)]
        assert survivors(sealed, day + 90 * D, DEFAULT) == {"day", "next"}
        assert survivors(sealed, day + 90 * D + 1, DEFAULT) == after

    # weekly: kept at age == the weekly window, gone one ns older
    weekly = Retention(0, 0, 0, 10 * W)
    assert survivors([("w", NOW - 10 * W)], NOW, weekly) == {"w"}
    assert survivors([("w", NOW - 10 * W - 1)], NOW, weekly) == set()


def test_of_two_snapshots_sealed_at_the_same_nanosecond_the_later_listed_is_the_newer() -> None:
    t = NOW - 30 * D
    assert survivors([("first", t), ("second", t)], NOW, DEFAULT) == {"second"}


def test_a_snapshot_sealed_after_now_is_kept() -> None:
    policy = Retention(0, 0, 0, 0)
    assert survivors([("old", NOW - D), ("skewed", NOW + H)], NOW, policy) == {"skewed"}


def test_iso_weeks_start_on_monday_across_a_year_boundary() -> None:
    # 2024-12-30 (Mon) .. 2025-01-05 (Sun) is ISO week 2025-W01; 2024-12-29 is a Sunday
    def at(y: int, m: int, d: int) -> int:
        return int(datetime(y, m, d, 12, tzinfo=UTC).timestamp()) * S

    policy = Retention(0, 0, 0, FOREVER)
    now = at(2026, 1, 1)
    same_week = [("mon", at(2024, 12, 30)), ("sun", at(2025, 1, 5))]
    assert survivors(same_week, now, policy) == {"sun"}
    across = [("sun", at(2024, 12, 29)), ("mon", at(2024, 12, 30))]
    assert survivors(across, now, policy) == {"sun", "mon"}


def test_the_default_schedule_is_furrows() -> None:
    assert Retention(24 * H, 7 * D, 90 * D, FOREVER) == DEFAULT
    assert DEFAULT.to_json() == {
        "keep_all": "24h",
        "hourly": "7d",
        "daily": "90d",
        "weekly": "forever",
    }
    assert Retention.from_json(DEFAULT.to_json()) == DEFAULT


def test_a_schedule_read_back_keeps_defaults_for_missing_fields_and_refuses_bad_ones() -> None:
    assert Retention.from_json({"daily": "30d"}) == Retention(24 * H, 7 * D, 30 * D, FOREVER)
    for bad in ({"daily": "30"}, {"weekly": 5}, {"hourly": "1.5h"}):
        try:
            Retention.from_json(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} was accepted")


@given(policies, st.integers(0, 70))
def test_a_tightened_schedule_halves_every_window_and_never_goes_below_zero(
    policy: Retention, step: int
) -> None:
    tight = tightened(policy, step)
    if step == 0:
        assert tight == policy
        return
    for field in ("keep_all", "hourly", "daily", "weekly"):
        before = getattr(policy, field)
        after = getattr(tight, field)
        base = 52 * W if before == FOREVER else before
        assert after == base >> step
        assert after >= 0
    assert tightened(policy, step + 1).weekly <= tight.weekly


def test_tightening_step_by_step_keeps_fewer_snapshots() -> None:
    sealed = named([NOW - i * 5 * H for i in range(2000)])
    counts = [len(survivors(sealed, NOW, tightened(DEFAULT, step))) for step in range(8)]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] > counts[-1]
