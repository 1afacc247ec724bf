"""A universe's TCP port: each live fork of a family (the workspace, its forks, forks of forks)
holds one that no other live member holds, so dev servers started in parallel universes never
collide.

It is chosen once, when the fork is made: the first port above the base (the caller's `$PORT`,
3000 when unset) that no live fork of the family holds and that nothing listens on at
127.0.0.1 (tried by binding it). It is recorded in the fork's `fork` fact and kept for the
fork's life (the fork's own server holding it later does not move it); a removed fork's port
is free again. The choice and the fact are made under the family's ports lock, so two forks
made at once anywhere in one family never get the same port.
"""

from __future__ import annotations

from collections.abc import Callable, Container

from tillage.features.forks.errors import BadPortError, NoFreePortError
from tillage.platform.launch import Launch, inherited_env
from tillage.platform.locks import file_lock
from tillage.platform.ports import can_listen
from tillage.store.store import Store
from tillage.workspace import family

DEFAULT_BASE = 3000
HIGHEST = 65535
PORT_VARIABLE = "PORT"


def port_base(launch: Launch | None) -> int:
    """The base a new universe's port is counted from: the caller's `$PORT` when it is set
    (bad_port when it is not a port with one above it), 3000 otherwise."""
    raw = inherited_env(launch).get(PORT_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_BASE
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) < HIGHEST:
        shown = raw if len(raw) <= 20 else raw[:20] + "..."
        raise BadPortError(
            f"PORT={shown!r} is not a TCP port from 1 to {HIGHEST - 1}: universes count their "
            "ports from it",
            details={"port": shown},
        )
    return int(raw)


def next_port(base: int, held: Container[int], free: Callable[[int], bool] = can_listen) -> int:
    """The first port above `base` not `held` and `free`; no_free_port when none is left."""
    for port in range(base + 1, HIGHEST + 1):
        if port not in held and free(port):
            return port
    raise NoFreePortError(
        f"no TCP port above {base} is free for a new universe: each is held by a live fork "
        "of this family or in use on 127.0.0.1",
        details={"base": base},
    )


def held_ports(store: Store, workspace_id: str) -> set[int]:
    """The ports the live forks of `workspace_id`'s family hold."""
    held: set[int] = set()
    for member in family.members(store, workspace_id):
        row = store.fork_of(member)
        if row is not None and row.removed_ns is None and row.port is not None:
            held.add(row.port)
    return held


def allocate(store: Store, workspace_id: str, base: int, record: Callable[[int], object]) -> int:
    """Chooses a port for a new fork in `workspace_id`'s family and records it with
    `record(port)` (which publishes the fact naming it) before another fork of the family
    can choose; returns it."""
    root = family.root_of(store, workspace_id)
    with file_lock(store.locks_dir / f"ports-{root}.lock", what="this family's ports"):
        store.catch_up()
        port = next_port(base, held_ports(store, workspace_id))
        record(port)
    return port
