"""Following a fork: its snapshots as they are sealed, read from the publication log after a
cursor, until the fork is removed.

The log is the one durable order of every seal (store/events.py), so a follower placed just
after a record misses nothing sealed later and sees nothing twice, whoever seals (the fork's
watcher, an agent's `till snap` in it, a merge, `fork-rm`'s last state). The fork's removal is
its `fork_removed` record in the same log, published after that last state: the stream ends
there, having delivered it. Waiting costs one stat of the log per poll (LogFollower.has_more),
as `till events --follow` does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from tillage.features.forks.fork import open_fork, require_fork
from tillage.store.events import LogFollower
from tillage.store.rows import ForkRow, SnapshotRow
from tillage.store.store import Store
from tillage.workspace.attach import Workspace
from tillage.workspace.timeline import resolve

# How often a waiting follower looks at the log's size (one stat each time): the same as
# `till events --follow`, so a seal reaches the reader within about a tenth of a second.
POLL_SECONDS = 0.1


@dataclass(frozen=True)
class Start:
    """Where a follower starts: after the log record `seq`; `after` is the snapshot that
    record published (None: the log's end when the follower started)."""

    seq: int
    after: SnapshotRow | None


class ForkFollower:
    """The snapshots of one fork published after a cursor, oldest first (log order)."""

    def __init__(self, store: Store, fork: ForkRow, start: Start) -> None:
        self.store = store
        self.fork = fork
        self.start = start
        self.removed = False  # set once the fork's removal was read
        # Seeking checks the lines it lands on: damage there is answered now, before any line.
        self._log = LogFollower(store.log, start.seq)

    def snapshots(self, *, follow: bool) -> Iterator[SnapshotRow | None]:
        """Yields each of the fork's snapshots after the cursor; following, also None on each
        idle poll (so a door can notice its reader went away) until the fork is removed.
        Without `follow` it stops at the log's end as it is now: a fork whose agent never
        stops sealing cannot keep it going."""
        end = None if follow else self._log.log_size()
        while True:
            for record in self._log.records():
                if end is not None and record.end_offset > end:
                    return
                body = record.body
                if body.get("workspace") != self.fork.workspace:
                    continue
                if record.kind == "fork_removed":
                    self.removed = True
                    return
                if record.kind == "snapshot":
                    row = self._row(body.get("id"))
                    if row is not None:
                        yield row
            if not follow:
                return
            while not self._log.has_more():
                yield None
                time.sleep(POLL_SECONDS)

    def _row(self, snapshot_id: object) -> SnapshotRow | None:
        """The snapshot as the index knows it (its pin included), once the index has caught
        up with the record; None when a gc removed it since."""
        if not isinstance(snapshot_id, str):
            return None
        row = self.store.snapshot(snapshot_id)
        if row is None:
            self.store.catch_up()
            row = self.store.snapshot(snapshot_id)
        return row


def follow_fork(ws: Workspace, name: str, after: str | None) -> ForkFollower:
    """A follower of `ws`'s live fork `name` (fork.not_found otherwise), placed after snapshot
    `after` (an ID or prefix the fork resolves: its own snapshots, its base, its family's) or,
    without it, at the log's end now: only what is sealed from now on."""
    store = ws.store
    # The cursor is taken before the fork is looked up in an index caught up at least that
    # far: a removal the lookup did not see comes after the cursor, so it ends the stream.
    seq = store.last_seq()
    fork = require_fork(ws, name)
    if after is None:
        return ForkFollower(store, fork, Start(seq, None))
    snapshot = resolve(open_fork(ws, fork), after)
    return ForkFollower(store, fork, Start(snapshot.seq, snapshot))
