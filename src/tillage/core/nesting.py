"""Running a recursive walk on an explicit stack: each level is a generator that, where it
would call itself, yields a request instead; `run_nested` starts a new level for it and sends
its result back. The Python stack stays a few frames deep at any depth of the walk (a tree
~2,000 folders deep fits a path of 4,096 bytes; Python's recursion limit is 1,000 frames)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TypeVar

R = TypeVar("R")  # what a level asks for
T = TypeVar("T")  # what a level returns

Level = Generator[R, T | None, T]


def run_nested(first: Level[R, T], start: Callable[[R], Level[R, T]]) -> T:
    """Runs `first` to its return value, running `start(request)` for each request a level
    yields and sending that level's return value back. An exception in a level is thrown into
    the level that asked, so its own clean-up (`finally`) runs as a call's would."""
    stack: list[Level[R, T]] = [first]
    value: T | None = None  # a generator starts with None
    error: BaseException | None = None
    while True:
        try:
            if error is not None:
                failed, error = error, None
                request = stack[-1].throw(failed)
            else:
                request = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            if not stack:
                result: T = done.value
                return result
            value = done.value
            continue
        except BaseException as exc:
            stack.pop()
            if not stack:
                raise
            error = exc
            continue
        stack.append(start(request))
        value = None
