"""Advisory file locks between tillage processes (CLI calls, the watcher, forks)."""

from __future__ import annotations

import fcntl
import os
import threading
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
def file_lock(
    path: Path, *, timeout: float = 30.0, what: str = "the store", mode: int = 0o644
) -> Iterator[None]:
    """Holds an exclusive flock on `path` (made with `mode` when missing); busy after
    `timeout` seconds of waiting."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
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


# How long an operation waits for a gc to finish before answering busy: a gc of a large store
# takes minutes, and a seal that waits loses nothing.
SHARED_WAIT = 900.0

_held = threading.local()


@contextmanager
def maintenance_lock(
    directory: Path, *, exclusive: bool, timeout: float = SHARED_WAIT
) -> Iterator[None]:
    """The store's maintenance lock (`locks/maintenance.lock`): shared by operations that use
    objects, exclusive for a gc. Re-entrant per thread for the shared side; asking for the
    exclusive side while this thread holds the shared one is busy at once (it would wait for
    itself). Inside the exclusive side, this thread's further asks (shared or exclusive) are
    already covered."""
    depth = getattr(_held, "depth", 0)
    if getattr(_held, "exclusive", False):
        yield  # this thread holds it exclusively: anything it does inside is covered
        return
    if not exclusive and depth:
        _held.depth = depth + 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    if exclusive and depth:
        raise BusyError("this process is using the store; a gc cannot run inside that call")
    path = directory / "maintenance.lock"
    fd = _lock_fd(path, exclusive=exclusive)
    if fd is None:
        # A read-only store that never had a lock file: no process can write it a gc, so a
        # reading call (a rewind's dry run, a verify) needs none.
        _held.depth = 1
        try:
            yield
        finally:
            _held.depth = 0
        return
    try:
        busy = (
            "other tillage processes are using the store; a gc waits for them"
            if exclusive
            else "a gc holds the store (it is reclaiming space)"
        )
        _flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, timeout, busy)
        if exclusive:
            _held.exclusive = True
        else:
            _held.depth = 1
        try:
            yield
        finally:
            if exclusive:
                _held.exclusive = False
            else:
                _held.depth = 0
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _lock_fd(path: Path, *, exclusive: bool) -> int | None:
    """The lock file, opened to lock; on a store this process cannot write, the shared side
    opens it read-only (flock needs no write access), or None when it is not there."""
    import errno

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exclusive or exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None


def holds_shared() -> bool:
    """Tells whether this thread holds the store's maintenance lock (shared)."""
    return bool(getattr(_held, "depth", 0))


def _flock(fd: int, mode: int, timeout: float, busy: str) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise BusyError(busy) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
