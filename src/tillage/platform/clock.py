"""The wall clock, behind one seam so tests can inject time.

`TILLAGE_NOW` (read by the hosts, never here) pins the clock for seals, retention and gc, as
`GIT_COMMITTER_DATE` does for git: a whole process (`pin_process`), or one served call on one
thread of the watcher (`pinned`), which serves many callers at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_local = threading.local()
_process_pin_holder: dict[str, int | None] = {"ns": None}


def _now_ns() -> int:
    pinned: int | None = getattr(_local, "ns", None)
    if pinned is not None:
        return pinned
    pin = _process_pin_holder["ns"]
    return time.time_ns() if pin is None else pin


now_ns: Callable[[], int] = _now_ns

# The file system's clock, never pinned: what a file's mtime is compared with (the racily-clean
# window, INV-8) and what a file tillage writes is stamped with. A pinned clock there would
# make every file racy (pinned in the past) or none (in the future, a change could be missed).
files_now_ns: Callable[[], int] = time.time_ns


def pin_process(ns: int | None) -> None:
    """Pins this process's clock at `ns` (None: the real clock again)."""
    _process_pin_holder["ns"] = ns


@contextmanager
def pinned(ns: int | None) -> Iterator[None]:
    """Pins the clock at `ns` for this thread while the block runs (None: no change)."""
    if ns is None:
        yield
        return
    before = getattr(_local, "ns", None)
    _local.ns = ns
    try:
        yield
    finally:
        _local.ns = before


def parse_pin(text: str | None) -> int | None:
    """`TILLAGE_NOW` as nanoseconds (epoch seconds or ISO-8601); None when unset or unreadable."""
    if not text:
        return None
    from tillage.core.units import parse_now

    seconds = parse_now(text)
    return None if seconds is None else round(seconds * 1_000_000_000)


def rfc3339(ns: int) -> str:
    """Formats nanoseconds since the epoch as an RFC 3339 UTC string with microseconds."""
    seconds, rest = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{base}.{rest // 1000:06d}Z"
