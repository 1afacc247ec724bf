"""A workspace's family: the workspace at the root of a fork tree and every fork below it.

Forks share one store, and a family shares its claims and its snapshot IDs: a fork's last
state, sealed by `fork-rm`, stays restorable by ID from its parent, and a fork can name the
snapshot it was forked from.
"""

from __future__ import annotations

from tillage.store.store import Store

# Deeper than any real chain of forks; it only stops a damaged index's cycle from spinning.
MAX_DEPTH = 256


def ancestors(store: Store, workspace_id: str) -> list[str]:
    """The workspace's parent, its parent's parent, ... up to the family's root."""
    found: list[str] = []
    current = workspace_id
    for _ in range(MAX_DEPTH):
        fork = store.fork_of(current)
        if fork is None or fork.parent in found or fork.parent == workspace_id:
            break
        found.append(fork.parent)
        current = fork.parent
    return found


def root_of(store: Store, workspace_id: str) -> str:
    """The ID of the workspace at the root of the fork tree holding `workspace_id`."""
    chain = ancestors(store, workspace_id)
    return chain[-1] if chain else workspace_id


def descendants(store: Store, workspace_id: str, *, removed: bool = True) -> list[str]:
    """Every fork below a workspace, breadth first (removed ones too, unless told not to)."""
    found: list[str] = []
    queue = [workspace_id]
    seen = {workspace_id}
    while queue and len(found) < MAX_DEPTH * MAX_DEPTH:
        parent = queue.pop(0)
        for fork in store.forks_of(parent, removed=removed):
            if fork.workspace not in seen:
                seen.add(fork.workspace)
                found.append(fork.workspace)
                queue.append(fork.workspace)
    return found


def members(store: Store, workspace_id: str) -> list[str]:
    """Every workspace of the family, the root first."""
    root = root_of(store, workspace_id)
    return [root, *descendants(store, root)]
