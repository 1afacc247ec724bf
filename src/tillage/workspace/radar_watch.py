"""Keeping the radar's events current: after anything changes a workspace of a fork family (a
seal, a rewind, a merge, a fork made or removed), the family's collisions are looked at again,
so a `conflict` event opens or resolves without anyone running `till radar`.

Apart from the radar itself because it is a policy of when to look, called from `invoke` and
the watcher's seal loop; the look never fails the change that prompted it.
"""

from __future__ import annotations

import sqlite3
import sys

from tillage.errors import TillageError
from tillage.store.store import Store


def look_for_collisions(store: Store, workspace_id: str) -> None:
    """Runs the radar over the family holding `workspace_id` when it has one (a workspace that
    never forked and is no fork costs two index lookups); a look that cannot run (busy, a
    read-only store, damage) is skipped: the next change or `till radar` looks again."""
    if store.fork_of(workspace_id) is None and not store.forks_of(workspace_id, removed=True):
        return
    from tillage.workspace.radar import observe_family

    try:
        observe_family(store, workspace_id)
    except (TillageError, OSError, sqlite3.Error) as exc:
        print(f"till: the radar did not look at this change: {exc}", file=sys.stderr)
