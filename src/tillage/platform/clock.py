"""The wall clock, behind one seam so tests can inject time."""

from __future__ import annotations

import time
from collections.abc import Callable

now_ns: Callable[[], int] = time.time_ns


def rfc3339(ns: int) -> str:
    """Formats nanoseconds since the epoch as an RFC 3339 UTC string with microseconds."""
    seconds, rest = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{base}.{rest // 1000:06d}Z"
