"""Sizes and durations people type (core.units): what parses, what is refused, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tillage.core.units import FOREVER, format_duration, parse_duration, parse_size

H = 3600 * 10**9
D = 24 * H


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512", 512),
        ("512b", 512),
        ("512B", 512),
        ("10k", 10 * 1024),
        ("10KiB", 10 * 1024),
        ("5m", 5 * 1024**2),
        ("5mib", 5 * 1024**2),
        ("20g", 20 * 1024**3),
        ("20GiB", 20 * 1024**3),
        ("1t", 1024**4),
        ("1tib", 1024**4),
        ("1.5g", 3 * 1024**3 // 2),
        (" 10 MiB ", 10 * 1024**2),
        ("0", 0),
    ],
)
def test_a_size_is_read_in_binary_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text", ["", "k", "-1", "-1k", "1.2.3k", "ten", "10kb", "10 bytes", "1e3", "²", "nan", "inf"]
)
def test_what_is_not_a_size_reads_as_none(text: str) -> None:
    assert parse_size(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("24h", 24 * H), ("7d", 7 * D), ("2w", 14 * D), ("0h", 0), ("1D", D), ("forever", FOREVER)],
)
def test_a_duration_is_read_in_hours_days_or_weeks(text: str, expected: int) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "24", "1.5h", "-1h", "5m", "10s", "h", "never", "1y"])
def test_what_is_not_a_duration_reads_as_none(text: str) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (FOREVER, "forever"),
        (24 * H, "24h"),
        (36 * H, "36h"),
        (0, "0h"),
        (2 * D, "2d"),
        (7 * D, "7d"),
        (90 * D, "90d"),
        (364 * D, "364d"),
        (D + 90 * 60 * 10**9, "25h"),
        (2 * D + H, "49h"),
    ],
)
def test_a_duration_is_written_in_its_shortest_whole_unit(ns: int, text: str) -> None:
    assert format_duration(ns) == text


@given(st.integers(0, 10**6), st.sampled_from("hdwHDW"))
def test_every_parsed_duration_round_trips(number: int, unit: str) -> None:
    ns = parse_duration(f"{number}{unit}")
    assert ns is not None
    assert parse_duration(format_duration(ns)) == ns


@given(st.integers(0, 2**62))
def test_a_written_duration_parses_to_at_most_the_value_within_an_hour(ns: int) -> None:
    back = parse_duration(format_duration(ns))
    assert back is not None
    assert 0 <= ns - back < H
