"""`--before` reads a written time as the last nanosecond it can mean."""

from __future__ import annotations

from tillage.core.units import latest_ns

NOON = 1796126400  # 2026-12-01T12:00:00Z


def test_rfc3339_covers_its_whole_last_unit() -> None:
    assert latest_ns("2026-12-01T12:00:00Z") == NOON * 10**9 + 999_999_999
    assert latest_ns("2026-12-01T12:00:00.25Z") == NOON * 10**9 + 259_999_999
    assert latest_ns("2026-12-01T12:00:00.123456Z") == NOON * 10**9 + 123_456_999
    assert latest_ns("2026-12-01T12:00:00.123456789Z") == NOON * 10**9 + 123_456_789


def test_epoch_seconds_and_zoned_times_to_the_microsecond() -> None:
    assert latest_ns(str(NOON)) == NOON * 10**9 + 999
    assert latest_ns("2026-12-01T13:00:00+01:00") == NOON * 10**9 + 999


def test_what_is_not_a_time_is_none() -> None:
    for text in ("", "yesterday", "2026-13-01T00:00:00Z", "12:00"):
        assert latest_ns(text) is None, text
