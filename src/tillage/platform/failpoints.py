"""Named crash points at every durable step, inert unless a test arms them.

Production code calls `hit("seal.after_pack_fsync")`; nothing happens unless a test armed that
name through `arm()` in the same process. The environment never arms anything.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Action = str | Callable[[], None]
_armed: dict[str, Action] = {}


class FailpointCrashError(Exception):
    """Raised at an armed failpoint in 'raise' mode: the in-process stand-in for a crash."""


def arm(name: str, action: Action = "raise") -> None:
    """Arms `name`: 'raise' raises FailpointCrashError, 'kill' SIGKILLs this process, and a
    callable runs there (a test's way to act at an exact moment, e.g. a concurrent writer)."""
    if not callable(action) and action not in ("raise", "kill"):
        raise ValueError(action)
    _armed[name] = action


def disarm_all() -> None:
    _armed.clear()


@contextmanager
def armed(name: str, action: Action = "raise") -> Iterator[None]:
    arm(name, action)
    try:
        yield
    finally:
        _armed.pop(name, None)


def hit(name: str) -> None:
    """Marks a durable step; crashes here only when a test armed `name`."""
    if not _armed:
        return
    action = _armed.get(name)
    if callable(action):
        action()
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "raise":
        raise FailpointCrashError(name)
