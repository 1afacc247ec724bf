"""Byte counts, counts of things and wire times as people (and models) read and write them.

Pure, no I/O, no clock: a time is parsed from text, never read.
"""

from __future__ import annotations

MINUTE = 60
HOUR = 60 * MINUTE
DAY = 24 * HOUR
_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def size(n: int | float) -> str:
    """Returns a byte count for people: `512 B`, `1.5 KiB`, `251 MiB` (binary units)."""
    if n < 0:
        return "-" + size(-n)
    if n < 1024:
        return f"{int(n)} B"
    value = float(n)
    for unit in _UNITS:
        value /= 1024
        text = f"{value:.1f}" if value < 99.95 else f"{value:.0f}"
        if float(text) < 1024 or unit == _UNITS[-1]:
            return f"{text} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def count(n: int, noun: str, plural: str | None = None) -> str:
    """Returns `1 file`, `12,345 files`."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def parse_rfc3339(text: str) -> float | None:
    """Returns epoch seconds of the wire's UTC times (`2026-12-01T02:34:21.435560Z`), else None.

    Accepts a `Z` or `+00:00` suffix and any fraction; returns None for anything else so a
    renderer falls back to printing the text as it came.
    """
    try:
        date, _, clock = text.partition("T")
        year, month, day = (int(part) for part in date.split("-"))
        if clock.endswith("Z"):
            clock = clock[:-1]
        elif clock.endswith(("+00:00", "-00:00")):
            clock = clock[:-6]
        else:
            return None
        hh, mm, ss = clock.split(":")
        seconds = float(ss)
        return _days_from_civil(year, month, day) * DAY + int(hh) * HOUR + int(mm) * 60 + seconds
    except ValueError:
        return None


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    if not (1 <= m <= 12 and 1 <= d <= 31):
        raise ValueError("not a date")
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def parse_now(text: str) -> float | None:
    """Returns `TILLAGE_NOW` as epoch seconds: a number, or ISO-8601 (UTC unless it says)."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    exact = parse_rfc3339(text)
    if exact is not None:
        return exact
    from datetime import UTC, datetime  # only for the rare zoned or short ISO forms

    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def latest_ns(text: str) -> int | None:
    """The last nanosecond a written time can mean (epoch ns), or None when it is not a time.

    `2026-12-01T10:00:00.123456Z` covers that whole microsecond, so a snapshot sealed at
    .123456789 is "at or before" it: a time copied from the wire (microseconds) finds the
    snapshot it was copied from. RFC 3339 UTC is read exactly, in integers; epoch seconds
    and other ISO-8601 forms to the microsecond.
    """
    exact = _rfc3339_ns(text.strip())
    if exact is not None:
        return exact
    seconds = parse_now(text)
    if seconds is None:
        return None
    return round(seconds * 1_000_000) * 1000 + 999


def _rfc3339_ns(text: str) -> int | None:
    date, sep, clock = text.partition("T")
    if not sep or not clock.endswith("Z"):
        return None
    try:
        year, month, day = (int(part) for part in date.split("-"))
        hh, mm, ss = clock[:-1].split(":")
        whole, _, fraction = ss.partition(".")
        if not (whole.isdigit() and (fraction.isdigit() or not fraction)) or len(fraction) > 9:
            return None
        seconds = _days_from_civil(year, month, day) * DAY + int(hh) * HOUR + int(mm) * 60
        seconds += int(whole)
    except ValueError:
        return None
    ns = int(fraction.ljust(9, "0")) if fraction else 0
    last_of_unit: int = 10 ** (9 - len(fraction)) - 1
    return seconds * 1_000_000_000 + ns + last_of_unit
