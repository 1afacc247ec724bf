"""Where a workspace's watcher keeps its run-time files, and how a seal asks it what changed.

Everything here is a hint for speed: a seal that finds no watcher, or one that cannot vouch for
the interval since the last seal, walks the whole folder (core.changes).
"""

from __future__ import annotations

import threading

from tillage.core.changes import ChangeSource

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.workspace.attach import Workspace

# Watchers running in this process (the daemon), by workspace ID: a seal in the same process
# asks them directly instead of over the socket.
_LOCAL: dict[str, ChangeSource] = {}
_LOCAL_LOCK = threading.Lock()


def register_local(workspace_id: str, source: ChangeSource | None) -> None:
    """Makes `source` the answer for seals of `workspace_id` in this process (None removes)."""
    with _LOCAL_LOCK:
        if source is None:
            _LOCAL.pop(workspace_id, None)
        else:
            _LOCAL[workspace_id] = source


def change_source(ws: Workspace) -> ChangeSource | None:
    """The watcher that can say what changed in `ws` since a token, or None (walk it all)."""
    with _LOCAL_LOCK:
        return _LOCAL.get(ws.id)
