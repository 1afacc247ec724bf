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
"""

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
)
from tillage.projection.places import (
    HostPlace,
    MemoryPlace,
    Place,
    PlaceUnreadableError,
    UnsafePathError,
)

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
    "UnsafePathError",
    "claim_key",
    "hash_content",
    "shared_claims",
]
