"""Undoing a merge undoes it for the fork too (issue 21, item 5). A fork merge moves the fork's
base to the state merged, so the next merge counts from there; a rewind of the parent to before
that merge takes the fork's changes out of the parent again, and the base must go back with
them, or the next merge finds nothing to land and a `fork-rm` retires work that never landed.

The same holds from the fork's side: a fork rewound whole to before a merge that moved its base
(a merge into the parent, or `merge --into-fork`, which moved it to the parent's state) gets
its earlier base back, or its next merge would read the changes it no longer holds as its own
deletions and take them out of the parent.
"""

from __future__ import annotations

from typing import Any

from tillage.store.events import LogFollower
from tillage.store.rows import SnapshotRow
from tillage.workspace.attach import Workspace

BASE_FACTS = ("fork", "fork_merged", "fork_base")


def restore_fork_bases(ws: Workspace, target: SnapshotRow) -> list[str]:
    """After `ws` was rewound whole to `target`: every live fork merged into it after `target`
    was sealed gets back the base it had before the first of those merges (a `fork_base`
    fact). Returns the names of the forks whose base moved back."""
    store = ws.store
    forks = {f.workspace: f for f in store.forks_of(ws.id)}
    if not forks:
        return []
    first: dict[str, dict[str, Any]] = {}  # fork -> its first merge after the target
    for record in LogFollower(store.log, target.seq).records():
        body = record.body
        mine = body.get("parent") == ws.id and body.get("workspace") in forks
        if record.kind == "fork_merged" and mine:
            first.setdefault(str(body["workspace"]), body)
    moved: list[str] = []
    for fork_id, merge in first.items():
        previous = merge.get("previous") or _base_before(ws, fork_id, merge)
        if previous is None or forks[fork_id].base == previous:
            continue
        store.publish("fork_base", {"workspace": fork_id, "base": previous, "undone": merge})
        moved.append(forks[fork_id].name)
    return sorted(moved)


def _base_before(ws: Workspace, fork_id: str, merge: dict[str, Any]) -> str | None:
    """The fork's base just before `merge`, read from the log (a merge fact written before
    facts carried `previous`)."""
    base: str | None = None
    for record in LogFollower(ws.store.log, 0).records():
        body = record.body
        if record.kind in BASE_FACTS and body.get("workspace") == fork_id:
            if record.kind == "fork_merged" and body.get("result") == merge.get("result"):
                return base
            base = str(body["base"])
    return None


def restore_own_base(ws: Workspace, target: SnapshotRow) -> bool:
    """After the fork `ws` was rewound whole to `target`: the base it had before the first
    merge that moved it after `target` was sealed comes back (with nothing left pending).
    Returns whether it moved."""
    store = ws.store
    fork = store.fork_of(ws.id)
    if fork is None or fork.removed_ns is not None:
        return False
    for record in LogFollower(store.log, target.seq).records():
        body = record.body
        if body.get("workspace") != ws.id:
            continue
        moved = record.kind == "fork_merged" or (
            record.kind == "fork_base" and body.get("into_fork")
        )
        if not moved:
            continue
        previous = body.get("previous")
        if not previous or fork.base == previous:
            return False
        store.publish("fork_base", {"workspace": ws.id, "base": previous, "undone": body})
        return True
    return False
