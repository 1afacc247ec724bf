"""Holding Ctrl-C and SIGTERM over a step that must not be cut in two: a sync step that lands
and records what it landed, or a command's spawn, whose process group must be known before an
interruption may stop it."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def interruptions_held() -> Iterator[None]:
    """Holds Ctrl-C and SIGTERM until the block is done, then delivers the first one as its
    handler would have; a second signal meanwhile is delivered at once. Only the main thread
    owns signals: elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous: dict[int, Any] = {s: signal.getsignal(s) for s in signals}
    pending: list[int] = []

    def restore() -> None:
        for s in signals:
            signal.signal(s, previous[s])

    def hold(signum: int, frame: Any) -> None:
        if pending:  # asked twice: stop now
            restore()
            _deliver(signum, previous[signum], frame)
            return
        pending.append(signum)

    for s in signals:
        signal.signal(s, hold)
    try:
        yield
    finally:
        restore()
        if pending:
            _deliver(pending[0], previous[pending[0]], None)


def _deliver(signum: int, handler: Any, frame: Any) -> None:
    """Acts on a held signal as `handler` would have: calls it, or does what the default does
    (for SIGINT a KeyboardInterrupt; for another, the signal sent again), or ignores it."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        os.kill(os.getpid(), signum)
