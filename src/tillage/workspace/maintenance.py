"""Holding the store's maintenance lock (shared) around an operation on a workspace (INV-14):
a gc waits for it, so the snapshots it looked up and the objects it wrote but has not yet
published stay in the store until it is done."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from tillage.workspace.attach import Workspace

_F = TypeVar("_F", bound=Callable[..., Any])


def using_store(fn: _F) -> _F:
    """Runs `fn(ws, ...)` holding `ws.store.sharing()` (re-entrant within a thread)."""

    @functools.wraps(fn)
    def wrapper(ws: Workspace, *args: Any, **kwargs: Any) -> Any:
        with ws.store.sharing():
            return fn(ws, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
