"""Projection: files from collections into the folder an agent works in, and back, three-way.

    projection = Projection(
        [Mount("artifacts", SqliteCollection("runs.db", "artifacts"), "runs.db#artifacts", True),
         Mount("reference", DirectoryCollection("docs"), "docs", False)],
        HostPlace("/tmp/run-42"),
    )
    await projection.hydrate()
    ...                                  # the agent edits files under /tmp/run-42
    report = await projection.flush()    # an Outcome for every path; conflicts land nothing

Asyncio first (harnesses are async); `hydrate_sync`, `flush_sync` and `put_sync` wrap it.

The names below load on first use: importing `tillage.projection.errors` (as the verbs' contracts
do whenever every contract is listed) must not import asyncio and sqlite3 on the way.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.core.projection import KINDS, claim_key, hash_content
    from tillage.projection.claims import ClaimRegistry, shared_claims
    from tillage.projection.collections import (
        Collection,
        DirectoryCollection,
        MemoryCollection,
        SqliteCollection,
    )
    from tillage.projection.engine import (
        DuplicateMountError,
        FlushReport,
        Mount,
        Outcome,
        Projection,
        UnflushedEditsError,
    )
    from tillage.projection.places import (
        HostPlace,
        MemoryPlace,
        Place,
        PlaceUnreadableError,
        UnsafePathError,
    )

# Where each public name lives.
_HOMES = {
    "KINDS": "tillage.core.projection",
    "claim_key": "tillage.core.projection",
    "hash_content": "tillage.core.projection",
    "ClaimRegistry": "tillage.projection.claims",
    "shared_claims": "tillage.projection.claims",
    "Collection": "tillage.projection.collections",
    "DirectoryCollection": "tillage.projection.collections",
    "MemoryCollection": "tillage.projection.collections",
    "SqliteCollection": "tillage.projection.collections",
    "DuplicateMountError": "tillage.projection.engine",
    "FlushReport": "tillage.projection.engine",
    "Mount": "tillage.projection.engine",
    "Outcome": "tillage.projection.engine",
    "Projection": "tillage.projection.engine",
    "UnflushedEditsError": "tillage.projection.engine",
    "HostPlace": "tillage.projection.places",
    "MemoryPlace": "tillage.projection.places",
    "Place": "tillage.projection.places",
    "PlaceUnreadableError": "tillage.projection.places",
    "UnsafePathError": "tillage.projection.places",
}

__all__ = [
    "KINDS",
    "ClaimRegistry",
    "Collection",
    "DirectoryCollection",
    "DuplicateMountError",
    "FlushReport",
    "HostPlace",
    "MemoryCollection",
    "MemoryPlace",
    "Mount",
    "Outcome",
    "Place",
    "PlaceUnreadableError",
    "Projection",
    "SqliteCollection",
    "UnflushedEditsError",
    "UnsafePathError",
    "claim_key",
    "hash_content",
    "shared_claims",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
