"""Numbers and times as people read them: sizes in KiB/MiB/GiB, times relative to now.

Pure functions of their arguments: the current time is passed in (`now`, epoch seconds), never
read here, so every rendering is testable and `TILLAGE_NOW` can pin it. No datetime import:
`till` starts hundreds of times a session and the wire's times have one fixed shape.
"""

from __future__ import annotations

import time

# Re-exported: the pure byte and count wording lives in core, shared with model text.
# Re-exported: the pure wording and parsing live in core, shared with model text and verbs.
from tillage.core.units import count as count  # noqa: PLC0414
from tillage.core.units import parse_now as parse_now  # noqa: PLC0414
from tillage.core.units import parse_rfc3339 as parse_rfc3339  # noqa: PLC0414
from tillage.core.units import size as size  # noqa: PLC0414

MINUTE = 60
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def size_change(old: int | None, new: int | None) -> str:
    """Returns how a file's size changed: `+1.2 KiB`, `-300 B`, `±0 B`; empty when unknown."""
    if old is None and new is None:
        return ""
    delta = (new or 0) - (old or 0)
    if delta == 0:
        return "±0 B" if old is not None and new is not None else "0 B"
    return ("+" if delta > 0 else "-") + size(abs(delta))


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
