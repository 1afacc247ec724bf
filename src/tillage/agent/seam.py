"""The seam a harness wires in one line: tools when they can work, nothing when they cannot.

    tools = [*my_tools, *tillage.agent.tools(workspace_root)]

A folder nobody attached gets an empty list, not tools that would refuse every call: a tool on
a model's belt is a promise, and one that answers "not attached" costs the model a call and
stays in its plan. `presence` says which half is missing, in tillage's own words, for the
person; it is cached per folder for PRESENCE_TTL seconds because a harness asks before every
turn. `attach` is for a harness that is about to write in a folder anyway (the same consent):
it attaches without leaving a watcher running.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tillage.agent.tool import Tool
from tillage.agent.workspace import Workspace, settings_for
from tillage.verbs.tools import public_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass

# How long an answer about one folder is trusted (seconds).
PRESENCE_TTL = 30.0


@dataclass(frozen=True)
class Presence:
    """What tillage knows about one folder: more than a boolean, because "attach this folder"
    and "start its watcher" are different sentences to say to a person.

    `head` is the newest snapshot's ID; `watching` whether a watcher seals changes as they
    happen (without one the timeline moves only when something seals, so a restore point
    offered from it may be stale); `reason` is tillage's own account when not attached, and
    `next` the command that fixes it; `code` and `error` are the public error that said so
    (its wire code and name: `workspace.not_attached`, `store.control_damaged`, ...), None when
    attached."""

    root: str
    attached: bool
    head: str | None
    watching: bool
    reason: str | None
    next: str | None
    code: int | None = None
    error: str | None = None


_cache: dict[tuple[str, str], tuple[float, Presence]] = {}
_cache_lock = threading.Lock()
_attach_locks: dict[str, threading.Lock] = {}


def _key(root: str | Path, home: str | Path | None) -> tuple[str, str]:
    settings = settings_for(root, home)
    return str(settings.folder), str(settings.home)


def forget() -> None:
    """Drops every cached presence: for tests, and for a caller that just watched a person
    attach a folder and wants the next answer from tillage, not from memory."""
    with _cache_lock:
        _cache.clear()


def presence(root: str | Path, *, home: str | Path | None = None) -> Presence:
    """Whether `root` is attached, its head, whether it is watched, and if not why; cached
    per absolute folder for PRESENCE_TTL seconds. Never raises for a folder tillage cannot
    act on: that is an answer (`attached` false, `reason`)."""
    key = _key(root, home)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and now - hit[0] < PRESENCE_TTL:
            return hit[1]
    found = _detect(root, home)
    with _cache_lock:
        _cache[key] = (time.monotonic(), found)
    return found


def _detect(root: str | Path, home: str | Path | None) -> Presence:
    from tillage.verbs.tools import Toolbelt

    settings = settings_for(root, home)
    belt = Toolbelt(settings)
    try:
        status = belt.run("workspace.status")
    except Exception as exc:  # detection never raises: what went wrong is the answer
        err = public_error(exc)
        return Presence(
            str(settings.folder), False, None, False, err.message, err.next, err.code, err.name
        )
    finally:
        belt.close()
    head = status.head.id if status.head is not None else None
    return Presence(str(settings.folder), True, head, bool(status.watching), None, None)


def open_workspace(root: str | Path, *, home: str | Path | None = None) -> Workspace | None:
    """The workspace when tillage can act on `root`, None when it cannot: every capability
    behind it is absent rather than present and refusing."""
    if not presence(root, home=home).attached:
        return None
    return Workspace(root, home=home)


def attach(
    root: str | Path, *, home: str | Path | None = None, agent: str | None = None
) -> Workspace | None:
    """Attaches `root` (sealing its first snapshot) without leaving a watcher running, and
    returns it; None when it cannot be attached, with the reason in `presence(root)`.

    One attach per folder at a time: concurrent callers (threads here, or other processes,
    through the store's lock) wait for the first and then find the folder attached."""
    key = _key(root, home)
    with _cache_lock:
        lock = _attach_locks.setdefault(key[0], threading.Lock())
    with lock:
        with _cache_lock:
            _cache.pop(key, None)
        if presence(root, home=home).attached:
            return Workspace(root, home=home, agent=agent)
        from tillage.verbs.tools import Toolbelt

        belt = Toolbelt(settings_for(root, home, agent))
        try:
            belt.run("workspace.watch", no_daemon=True)
        except Exception:
            pass
        finally:
            belt.close()
        with _cache_lock:
            _cache.pop(key, None)
        if not presence(root, home=home).attached:
            return None
        return Workspace(root, home=home, agent=agent)


def tools(root: str | Path, *, home: str | Path | None = None) -> list[Tool]:
    """The tools for a model working in `root`, in a fixed order (workspace_snapshots,
    workspace_restore, workspace_fork, workspace_merge, then the rest); an empty list when
    the folder is not attached."""
    ws = open_workspace(root, home=home)
    return [] if ws is None else ws.tools()
