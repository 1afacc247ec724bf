"""The conflict radar over a workspace's live forks, from sealed states only, and its events.

`collisions(ws)` compares each live fork of `ws` (forks of forks too, named `a/b`) against its
base, and `ws` itself since each fork's base (core/radar.py says when two places collide). It
reads stored trees only, never a live folder, and descends only where tree IDs differ, with
decoded trees and each (tree, tree) diff cached for the call: five forks of a 5,000-file
workspace cost a few hundred tree reads.

`observe(ws)` appends a `conflict` event for each collision that opened, changed or resolved
since the last look. The last look is a small state file per workspace in the store
(`radar/<workspace id>.json`), replaced atomically AFTER the events are in the log: a crash in
between announces a transition again at worst, never loses one. It also records the sealed
states it was computed from (every head and base), so a look at unchanged states reads no tree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tillage.core import codec
from tillage.core.models import Entry
from tillage.core.radar import (
    WORKSPACE,
    Collision,
    ForkChanges,
    by_fork,
    find_collisions,
    touched_paths,
    transitions,
)
from tillage.platform.locks import file_lock
from tillage.store import control
from tillage.store.rows import ForkRow, SnapshotRow
from tillage.store.store import Store
from tillage.workspace.attach import Workspace

__all__ = [
    "Collision",
    "Scan",
    "collisions",
    "conflicts_by_fork",
    "look_for_collisions",
    "observe",
    "observe_family",
    "scan",
]

# 2: folder removals and type changes collide with touches beneath them (core/radar.py). A
# look recorded under other rules is read for its collisions (so what it announced opens no
# second time) but never for its states: it is compared again.
STATE_VERSION = 2
READABLE_STATE_VERSIONS = (1, 2)
# How long a look after a change waits for another look to finish before leaving it to the
# next one (a look takes milliseconds; a command must not wait on a stuck one).
LOOK_TIMEOUT = 2.0
# Deeper than any real fork tree; it only stops a damaged index's cycle from spinning.
MAX_FORKS = 4096


@dataclass(frozen=True)
class _Node:
    """A live fork in the scan: its record, its name from the scanned workspace (`a/b`), and
    the way down to it: (place above, that place's workspace ID, its child on the way)."""

    row: ForkRow
    name: str
    way_down: tuple[tuple[str, str, ForkRow], ...]


@dataclass(frozen=True)
class Scan:
    """What the radar saw: the collisions, how many forks it compared, the sealed states it
    read (every head and base, for telling whether anything changed since), and the places it
    compared: workspace ID -> name in the collisions (WORKSPACE for the scanned one)."""

    collisions: tuple[Collision, ...]
    forks_scanned: int
    states: tuple[tuple[str, str, str | None], ...]
    places: tuple[tuple[str, str], ...] = ()


def _places(workspace_id: str, nodes: Sequence[_Node]) -> tuple[tuple[str, str], ...]:
    return ((workspace_id, WORKSPACE), *((n.row.workspace, n.name) for n in nodes))


def _live_forks(store: Store, workspace_id: str) -> list[_Node]:
    """Every live fork below the workspace, breadth first."""
    nodes: list[_Node] = []
    queue: list[tuple[str, str, tuple[tuple[str, str, ForkRow], ...]]] = [
        (workspace_id, WORKSPACE, ())
    ]
    seen = {workspace_id}
    while queue and len(nodes) < MAX_FORKS:
        parent_id, parent_name, way = queue.pop(0)
        for row in store.forks_of(parent_id):
            if row.workspace in seen:
                continue
            seen.add(row.workspace)
            name = f"{parent_name}/{row.name}" if parent_name else row.name
            node = _Node(row, name, (*way, (parent_name, parent_id, row)))
            nodes.append(node)
            queue.append((row.workspace, name, node.way_down))
    return nodes


class _Reader:
    """Stored trees and snapshots for one scan, each read once."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.trees: dict[bytes, list[Entry]] = {}
        self.diffs: dict[tuple[bytes | None, bytes | None], frozenset[str]] = {}
        self.snapshots: dict[str, SnapshotRow | None] = {}
        self.heads: dict[str, SnapshotRow | None] = {}

    def tree(self, tree_id: bytes) -> list[Entry]:
        entries = self.trees.get(tree_id)
        if entries is None:
            entries = codec.decode_tree(self.store.read(tree_id))
            self.trees[tree_id] = entries
        return entries

    def snapshot(self, snapshot_id: str) -> SnapshotRow | None:
        if snapshot_id not in self.snapshots:
            self.snapshots[snapshot_id] = self.store.snapshot(snapshot_id)
        return self.snapshots[snapshot_id]

    def head(self, workspace_id: str) -> SnapshotRow | None:
        if workspace_id not in self.heads:
            self.heads[workspace_id] = self.store.head(workspace_id)
        return self.heads[workspace_id]

    def changed(self, old: SnapshotRow | None, new: SnapshotRow | None) -> frozenset[str]:
        """What a place touched from one sealed state to another (core.radar.touched_paths:
        non-folder paths changed, folders removed or made something else); nothing when either
        state is unknown."""
        if old is None or new is None:
            return frozenset()
        key = (bytes.fromhex(old.tree), bytes.fromhex(new.tree))
        found = self.diffs.get(key)
        if found is None:
            found = touched_paths(self.tree, *key)
            self.diffs[key] = found
        return found


def _states(store: Store, workspace_id: str, nodes: Sequence[_Node]) -> list[list[str | None]]:
    """The sealed states a scan depends on: the workspace's head, each fork's base and head."""
    head = store.head(workspace_id)
    states: list[list[str | None]] = [[workspace_id, "", head.id if head else None]]
    for node in nodes:
        fork_head = store.head(node.row.workspace)
        states.append([node.row.workspace, node.row.base, fork_head.id if fork_head else None])
    return states


def scan(store: Store, workspace_id: str) -> Scan:
    """Compares the workspace's live forks and itself (sealed states only)."""
    nodes = _live_forks(store, workspace_id)
    return _scan(store, workspace_id, nodes, _states(store, workspace_id, nodes))


def _scan(
    store: Store, workspace_id: str, nodes: Sequence[_Node], states: list[list[str | None]]
) -> Scan:
    """scan() from forks and states already read. The states are read before any head the
    comparison uses: a seal landing in between makes the recorded states older than what was
    compared, so the next look compares again (never the other way round)."""
    reader = _Reader(store)
    forks: list[ForkChanges] = []
    for node in nodes:
        base = reader.snapshot(node.row.base)
        own = reader.changed(base, reader.head(node.row.workspace) or base)
        above: dict[str, frozenset[str]] = {}
        if own:
            for place, place_id, child in node.way_down:
                child_base = reader.snapshot(child.base)
                above[place] = reader.changed(child_base, reader.head(place_id) or child_base)
        forks.append(ForkChanges(node.name, own, above))
    return Scan(
        collisions=tuple(find_collisions(forks)),
        forks_scanned=len(nodes),
        states=tuple((str(s[0]), str(s[1]), s[2]) for s in states),
        places=_places(workspace_id, nodes),
    )


def collisions(ws: Workspace) -> list[Collision]:
    """Paths changed in two or more places among `ws` and its live forks, sorted by path."""
    return list(scan(ws.store, ws.id).collisions)


def conflicts_by_fork(ws: Workspace) -> dict[str, tuple[str, ...]]:
    """Each live fork's colliding paths, by name (`a/b` for a fork of fork `a`); a fork with
    none is absent."""
    return by_fork(scan(ws.store, ws.id).collisions)


# -- events ------------------------------------------------------------------------------------


def _state_path(store: Store, workspace_id: str) -> Path:
    return store.home / "radar" / f"{workspace_id}.json"


def _read_state(path: Path) -> tuple[list[object] | None, dict[str, tuple[tuple[str, ...], bool]]]:
    """The last look: the states it was computed from and its collisions. A missing or
    unreadable file is a first look (every collision opens)."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None, {}
    if not isinstance(doc, dict) or doc.get("version") not in READABLE_STATE_VERSIONS:
        return None, {}
    found: dict[str, tuple[tuple[str, ...], bool]] = {}
    for path_key, value in (doc.get("collisions") or {}).items():
        if isinstance(value, list) and len(value) == 2:
            found[str(path_key)] = (tuple(str(f) for f in value[0]), bool(value[1]))
    states = doc.get("states") if doc.get("version") == STATE_VERSION else None
    return (states if isinstance(states, list) else None), found


def _write_state(path: Path, states: object, found: Sequence[Collision]) -> None:
    doc = {
        "version": STATE_VERSION,
        "states": states,
        "collisions": {c.path: [list(c.forks), c.workspace] for c in found},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    control.rewrite(path, json.dumps(doc, separators=(",", ":")).encode() + b"\n")


def _as_collisions(found: dict[str, tuple[tuple[str, ...], bool]]) -> list[Collision]:
    return [Collision(p, forks, ws) for p, (forks, ws) in sorted(found.items())]


@dataclass(frozen=True)
class Observed:
    """A look that may have announced events: the collisions now, the live forks, how many
    `conflict` events it appended, and the places compared (as Scan.places)."""

    collisions: tuple[Collision, ...]
    forks_scanned: int
    events: int
    places: tuple[tuple[str, str], ...] = ()


def observe_scan(store: Store, workspace_id: str, *, timeout: float = 30.0) -> Observed:
    """observe() on a workspace named by ID: compares, announces each transition as a
    `conflict` event, then records the look. Serialised per workspace by a lock (busy after
    `timeout`), so two concurrent looks never announce one transition twice."""
    from tillage.store.events import announce

    if store.read_only:
        # A store this process cannot write (another user's, a read-only mount): the radar
        # still answers; the events wait for a look that can append them.
        found = scan(store, workspace_id)
        return Observed(found.collisions, found.forks_scanned, 0, found.places)
    store.catch_up()
    if not store.forks_of(workspace_id) and not _state_path(store, workspace_id).exists():
        # No fork and no collision open: nothing to compare, announce or record (and no lock
        # file made for a workspace that never forked).
        return Observed((), 0, 0, _places(workspace_id, ()))
    lock = store.locks_dir / f"radar-{workspace_id}.lock"
    with file_lock(lock, timeout=timeout, what="the radar of this workspace"):
        store.catch_up()
        path = _state_path(store, workspace_id)
        last_states, before = _read_state(path)
        nodes = _live_forks(store, workspace_id)
        states = _states(store, workspace_id, nodes)
        if last_states is not None and last_states == states:
            places = _places(workspace_id, nodes)
            return Observed(tuple(_as_collisions(before)), len(nodes), 0, places)
        found = _scan(store, workspace_id, nodes, states)
        changes = transitions(before, found.collisions)
        for t in changes:
            detail = {"path": t.path, "forks": list(t.forks), "workspace": t.workspace}
            announce(store, workspace_id, "conflict", {**detail, "state": t.state})
        _write_state(path, [list(s) for s in found.states], found.collisions)
        return Observed(found.collisions, found.forks_scanned, len(changes), found.places)


def observe(ws: Workspace) -> list[Collision]:
    """Computes the collisions of `ws` and its live forks and appends a `conflict` event
    (detail {path, forks, workspace, state: opened | changed | resolved}) for each change since
    the last look. Cheap when no head or base changed since (no tree is read); safe to call
    from several processes at once."""
    return list(observe_scan(ws.store, ws.id).collisions)


def observe_family(store: Store, workspace_id: str, *, timeout: float = 30.0) -> list[Collision]:
    """observe() for the whole fork tree holding `workspace_id` (from its root): what a seal
    inside any fork should call."""
    from tillage.workspace.family import root_of

    root = root_of(store, workspace_id)
    return list(observe_scan(store, root, timeout=timeout).collisions)


def look_for_collisions(store: Store, workspace_id: str) -> None:
    """observe_family() after something changed in a workspace (a seal, a fork, a merge), for a
    caller whose own work already succeeded: a workspace of no fork family costs a query and a
    stat, and a look that cannot be taken now (another one holds the lock, the store cannot be
    read) is left to the next one, which announces whatever this one would have."""
    import sqlite3

    from tillage.errors import TillageError

    try:
        observe_family(store, workspace_id, timeout=LOOK_TIMEOUT)
    except (TillageError, OSError, sqlite3.Error):
        return
