"""Advisory file locks between tillage processes (CLI calls, the watcher, forks)."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tillage.errors import BusyError


def is_held(path: Path) -> bool:
    """Tells whether a live process holds an exclusive flock on `path` (a pack's writer, a
    workspace's watcher): the kernel drops a dead process's flock, so a crash reads as free.

    The probe takes a shared lock, which two probers can hold at once: a concurrent probe
    never makes the other see the file as held."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@contextmanager
def file_lock(path: Path, *, timeout: float = 30.0, what: str = "the store") -> Iterator[None]:
    """Holds an exclusive flock on `path`; busy after `timeout` seconds of waiting."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise BusyError(f"another tillage process is writing {what}") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
