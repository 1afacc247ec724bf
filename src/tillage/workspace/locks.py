"""The two locks every change to a workspace holds: its own lock, which serialises changes to
one folder and its timeline, and the store's maintenance lock, held shared around an operation
on a workspace (INV-14): a gc waits for it, so the snapshots it looked up and the objects it
wrote but has not yet published stay in the store until it is done."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from tillage.platform.locks import file_lock
from tillage.workspace.attach import Workspace

_F = TypeVar("_F", bound=Callable[..., Any])


def workspace_lock(ws: Workspace, *, timeout: float = 30.0) -> AbstractContextManager[None]:
    """The lock that serialises changes to one workspace's folder and timeline."""
    return file_lock(
        ws.store.locks_dir / f"ws-{ws.id}.lock", timeout=timeout, what="this workspace"
    )


def using_store(fn: _F) -> _F:
    """Runs `fn(ws, ...)` holding `ws.store.sharing()` (re-entrant within a thread)."""

    @functools.wraps(fn)
    def wrapper(ws: Workspace, *args: Any, **kwargs: Any) -> Any:
        with ws.store.sharing():
            return fn(ws, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
