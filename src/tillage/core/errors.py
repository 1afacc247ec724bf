"""Public errors raised by pure core logic (kept in a module of their own so declaring a verb's
errors imports nothing heavy)."""

from __future__ import annotations

from tillage.errors import NotFoundError


class PathNotInSnapshotError(NotFoundError):
    name = "rewind.path_not_in_snapshot"
    module = "rewind"
    next_step = "list the snapshot's files with `till ls SNAPSHOT`, or check the path's spelling"
