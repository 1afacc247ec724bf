"""Public errors of the platform layer, in a module of their own so verbs can name them cheaply."""

from __future__ import annotations

from tillage.errors import TillageError


class DiskFullError(TillageError):
    code = -32110
    name = "store.disk_full"
    module = "store"
    next_step = "free some disk space, then retry; nothing was lost"
