"""Numbers and times as people read them: sizes in KiB/MiB/GiB, times relative to now.

Pure functions of their arguments: the current time is passed in (`now`, epoch seconds), never
read here, so every rendering is testable and `TILLAGE_NOW` can pin it. No datetime import:
`till` starts hundreds of times a session and the wire's times have one fixed shape.
"""

from __future__ import annotations

import time

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")
MINUTE = 60
HOUR = 60 * MINUTE
DAY = 24 * HOUR


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


def size_change(old: int | None, new: int | None) -> str:
    """Returns how a file's size changed: `+1.2 KiB`, `-300 B`, `±0 B`; empty when unknown."""
    if old is None and new is None:
        return ""
    delta = (new or 0) - (old or 0)
    if delta == 0:
        return "±0 B" if old is not None and new is not None else "0 B"
    return ("+" if delta > 0 else "-") + size(abs(delta))


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


def _ymd(t: float) -> tuple[int, int, int]:
    local = time.localtime(t)
    return local.tm_year, local.tm_mon, local.tm_mday


def when(then: float, now: float) -> str:
    """Returns how long ago `then` was: `just now`, `3 min ago`, `2 h ago`, `yesterday 14:03`,
    then a local date and time (`2026-11-28 14:03`)."""
    ago = now - then
    if -MINUTE < ago < 5:
        return "just now"
    if 0 <= ago < MINUTE:
        return f"{int(ago)} s ago"
    if 0 <= ago < HOUR:
        return f"{int(ago // MINUTE)} min ago"
    if 0 <= ago < DAY:
        return f"{int(ago // HOUR)} h ago"
    hhmm = time.strftime("%H:%M", time.localtime(then))
    if 0 <= ago < 2 * DAY:
        today = _ymd(now)
        # The local calendar decides "yesterday": walk back from now until the date changes.
        step = now - DAY
        while _ymd(step) == today:  # a 25-hour day around a DST change
            step -= HOUR
        if _ymd(then) == _ymd(step):
            return f"yesterday {hhmm}"
    return time.strftime("%Y-%m-%d ", time.localtime(then)) + hhmm


def when_text(stamp: str, now: float) -> str:
    """Returns a wire time (RFC 3339) relative to `now`; the text itself if it is not one."""
    then = parse_rfc3339(stamp)
    return stamp if then is None else when(then, now)


def local_time(stamp: str) -> str:
    """Returns a wire time as a full local date and time with its zone, for `show`."""
    then = parse_rfc3339(stamp)
    if then is None:
        return stamp
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(then))


def duration(seconds: float) -> str:
    """Returns a span for an ETA: `8 s`, `3 min 5 s`, `1 h 12 min`."""
    s = max(0, round(seconds))
    if s < MINUTE:
        return f"{s} s"
    if s < HOUR:
        m, rest = divmod(s, MINUTE)
        return f"{m} min {rest} s" if rest and m < 10 else f"{m} min"
    h, rest = divmod(s, HOUR)
    return f"{h} h {rest // MINUTE} min"


def printable(text: str, *, lines: bool = False) -> str:
    """Returns `text` with control characters shown as escapes (`\\x1b`, `\\n`), so a file
    name or label can never move the cursor, clear the screen or fake a line of output.

    `lines=True` keeps newlines and tabs (for free text, such as a command's output).
    """
    if text.isprintable():
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if lines and ch in "\n\t":
            out.append(ch)
        elif code < 0x20 or 0x7F <= code < 0xA0:
            out.append(repr(ch)[1:-1] if ch in "\t\n\r" else f"\\x{code:02x}")
        else:
            out.append(ch)
    return "".join(out)
