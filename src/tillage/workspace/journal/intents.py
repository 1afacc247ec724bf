"""The intent record of a landing in progress: one file per workspace in the store's
`intents/` folder, written atomically before the folder is touched, removed last."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tillage.platform.fs import atomic_write
from tillage.workspace.attach import Workspace

# Every landing's intent file starts so (the name predates merges and is kept: an intent left
# by an earlier build must still be found and finished).
INTENT_PREFIX = "rewind-"


# The trigger of the seal that keeps the state before each kind of landing.
PRE_TRIGGERS = {"rewind": "pre_rewind", "merge": "pre_merge"}


def pre_trigger(op: str) -> str:
    return PRE_TRIGGERS.get(op, "pre_rewind")


def intent_path(ws: Workspace) -> Path:
    """Where a landing in progress keeps its intent record (in the store, not the folder)."""
    return ws.store.intents_dir / f"{INTENT_PREFIX}{ws.id}.json"


def write_intent(ws: Workspace, intent: Mapping[str, Any]) -> None:
    atomic_write(intent_path(ws), json.dumps(intent).encode())


def read_intent(ws: Workspace) -> dict[str, Any] | None:
    """The recorded intent; None when there is none, or when it is torn (written atomically,
    a torn one was never acted on)."""
    try:
        intent = json.loads(intent_path(ws).read_bytes())
    except (OSError, ValueError):
        return None
    return intent if isinstance(intent, dict) else None


def remove_intent(ws: Workspace) -> None:
    intent_path(ws).unlink(missing_ok=True)
