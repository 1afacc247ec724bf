"""Finishing a change the last process did not: the first thing any workspace command does.

An intent record in the store names an interrupted rewind; it is rolled forward under the
workspace lock, so a rewind still running in another process is waited for, never raced (INV-7).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from tillage.errors import BusyError, IntegrityError
from tillage.workspace.attach import Workspace

INTENT_PREFIX = "rewind-"


def intent_path(ws: Workspace) -> Path:
    """Where a rewind in progress keeps its intent record (in the store, not the folder)."""
    return ws.store.intents_dir / f"{INTENT_PREFIX}{ws.id}.json"


def recover_if_interrupted(ws: Workspace) -> bool:
    """Rolls an interrupted rewind forward; returns whether there was one.

    A rewind still running in another process holds the workspace lock: it is left to finish
    its own work (a command that changes the folder waits for the lock itself), so a `status`
    during a long rewind answers at once.
    """
    path = intent_path(ws)
    if not path.exists():
        return False
    from tillage.workspace.rewind import finish_interrupted
    from tillage.workspace.seal import workspace_lock

    with contextlib.ExitStack() as held:
        try:
            held.enter_context(workspace_lock(ws, timeout=0))
        except BusyError:
            return False
        if not path.exists():
            return False  # the rewinding process finished just now
        try:
            intent = json.loads(path.read_bytes())
        except ValueError:
            path.unlink()  # a torn intent: it was never acted on (written atomically)
            return False
        target = ws.store.snapshot(intent["target"])
        if target is None:
            raise IntegrityError(f"an interrupted rewind names unknown snapshot {intent['target']}")
        finish_interrupted(ws, target, intent.get("scopes"), str(intent.get("undo", "")))
    return True
