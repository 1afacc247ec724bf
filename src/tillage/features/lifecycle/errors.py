"""Public errors of the store's lifecycle (shared codes besides: busy, invalid_argument).

Apart from the gc machinery so that verbs can name them in their contracts without importing it.
"""

from __future__ import annotations

from tillage.errors import TillageError

__all__ = ["BytesDroppedError", "SnapshotPartialError"]


class SnapshotPartialError(TillageError):
    """A pin was asked for a snapshot that a gc has thinned: the bytes it lost cannot come back,
    so pinning it would promise what it no longer holds. Nothing was changed."""

    code = -32270
    name = "lifecycle.snapshot_partial"
    module = "lifecycle"
    next_step = (
        "pin a snapshot that is still exact (`till timeline` marks thinned ones partial), or "
        "`till snap` and pin that"
    )


class BytesDroppedError(TillageError):
    """The file's bytes were dropped from this snapshot by retention (its content class has a
    byte window, e.g. dependency bytes 3 days); its name, size and mode are still known."""

    code = -32271
    name = "lifecycle.bytes_dropped"
    module = "lifecycle"
    next_step = "read it from a newer snapshot (`till timeline`), or rebuild it (reinstall)"
