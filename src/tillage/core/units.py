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


# -- sizes and durations people type (`till budget --max 20g`, `till retention --daily 90d`) -----

FOREVER = -1  # a duration without end (`forever`): a retention window that never closes
_NS_PER_HOUR = HOUR * 1_000_000_000
_NS_PER_DAY = DAY * 1_000_000_000
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tib": 1024**4,
}
_DURATION_UNITS = {"h": _NS_PER_HOUR, "d": _NS_PER_DAY, "w": 7 * _NS_PER_DAY}


def _split_number(text: str) -> tuple[str, str]:
    """Splits `1.5gib` into (`1.5`, `gib`): the leading digits and dot, then the rest, lowered."""
    text = text.strip().lower()
    end = 0
    while end < len(text) and (text[end].isdigit() or text[end] == "."):
        end += 1
    return text[:end], text[end:].strip()


def parse_size(text: str) -> int | None:
    """Returns the bytes a size means (`512`, `512b`, `10k`, `5mib`, `1.5g`, `1t`; 1024-based,
    any case), rounded down to a whole byte; None when the text is not a size."""
    number, unit = _split_number(text)
    factor = _SIZE_UNITS.get(unit)
    # `isdigit` also accepts other scripts' digits, which `int` may refuse: ASCII only
    if factor is None or not number.isascii() or number.count(".") > 1 or not number.strip("."):
        return None
    whole, _, fraction = number.partition(".")
    scale: int = 10 ** len(fraction)
    return (int(whole or "0") * scale + int(fraction or "0")) * factor // scale


def parse_duration(text: str) -> int | None:
    """Returns the nanoseconds a duration means (`24h`, `7d`, `2w`, `0h`: whole numbers of
    hours, days or weeks), FOREVER for `forever`; None when the text is not a duration."""
    if text.strip().lower() == "forever":
        return FOREVER
    number, unit = _split_number(text)
    factor = _DURATION_UNITS.get(unit)
    if factor is None or not number.isascii() or not number.isdigit():
        return None
    return int(number) * factor


def format_duration(ns: int) -> str:
    """Returns a duration as `parse_duration` reads it back: `forever`, `Nd` for a whole number
    of days from 2 days up, else `Nh` (rounded down to the hour; a negative one reads `0h`)."""
    if ns == FOREVER:
        return "forever"
    ns = max(ns, 0)
    if ns >= 2 * _NS_PER_DAY and ns % _NS_PER_DAY == 0:
        return f"{ns // _NS_PER_DAY}d"
    return f"{ns // _NS_PER_HOUR}h"
