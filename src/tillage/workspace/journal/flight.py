"""Writes handed to a thread pool while the thread that runs the plan goes on writing.

A rewind's large files are written in a pool and its small ones on the plan's thread (see
applier.SHARED_FILE_BYTES). Waiting for the pool at each run of folders left that thread idle
while a large file was written: 0.14 s of a 0.65 s write phase on the standard workload, for
its 128 MiB log, with 3,900 small files still to write. A flight waits only when it holds
`limit` groups, and at the end.

The plan's thread keeps a bounded cache of folder fds, and closes the oldest as it goes on. A
group in flight therefore writes through its own copies of its folders' fds, closed when it
ends. A number closed under a write could be reused by another open, and the write would land
in the wrong folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from typing import Self

from tillage.core.rewind_plan import Action

# An action with the fd of its folder and its name in that folder.
Placed = tuple[Action, int, str]
# What writing a group gives back: the actions written, and those to retry on the plan's thread.
Outcome = tuple[list[Action], list[Action]]


class Flight:
    """Groups of writes in a pool, at most `limit` at a time, each through its own fds."""

    def __init__(
        self,
        pool: ThreadPoolExecutor,
        limit: int,
        write: Callable[[list[Placed]], Outcome],
        landed: Callable[[Outcome], None],
    ) -> None:
        self._pool = pool
        self._limit = limit
        self._write = write
        self._landed = landed
        self._flying: dict[Future[Outcome], list[int]] = {}

    def submit(self, group: list[Placed]) -> None:
        """Hands `group` to the pool, after waiting for one group when `limit` are in flight."""
        while len(self._flying) >= self._limit:
            self._harvest(next(as_completed(self._flying)))
        copies: dict[int, int] = {}
        try:
            for fd in {fd for _action, fd, _name in group}:
                copies[fd] = os.dup(fd)
            held = [(action, copies[fd], name) for action, fd, name in group]
            fds = list(copies.values())
            future = self._pool.submit(self._run, held, fds)
        except BaseException:
            for copy in copies.values():  # out of fds, or the pool is shut: none is kept
                os.close(copy)
            raise
        self._flying[future] = fds

    def finish(self) -> None:
        """Waits for every group; the first error of one is raised here."""
        while self._flying:
            self._harvest(next(as_completed(self._flying)))

    def _harvest(self, future: Future[Outcome]) -> None:
        del self._flying[future]
        self._landed(future.result())

    def _run(self, group: list[Placed], fds: list[int]) -> Outcome:
        try:
            return self._write(group)
        finally:
            for fd in fds:
                os.close(fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        # Stopped by an error: a group that never ran gives its fds back here, one that runs
        # is waited for, and closes its own.
        for future, fds in self._flying.items():
            if future.cancel():
                for fd in fds:
                    os.close(fd)
        wait(self._flying)
        self._flying.clear()
