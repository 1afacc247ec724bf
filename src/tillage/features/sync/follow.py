"""`till sync --follow`: keeps a workspace and a remote ref current both ways, one cycle at a
time, as a stream of one report per cycle (printed as one JSON line each, as `events --follow`).

A cycle pulls (a fast-forward when the folder has not changed since the last sync), then seals
and pushes when the folder moved away from what was last synced. A pull that diverged is merged
three-way on its own (the last synced snapshot the ancestor, as `git pull` merges), and the
merge is pushed: both machines editing, even the same file in different places, never stop
each other. Only a real conflict pauses the follower: its report names the conflicting paths,
the incoming snapshot and the command that lands it (`till merge --snapshot ID`), and nothing
is pushed until the folder descends from that snapshot; then the next cycle pushes the merge by
itself. A merge that conflicted is not tried again until the folder or the ref moves. An error
in a cycle (a network blip, an unmounted disk, a busy lease) is that cycle's report, and the
next cycle comes after a backoff: nothing but an interruption or a reader that went away ends
a follower.

An interruption (Ctrl-C, SIGTERM) that arrives while a cycle pulls or pushes is held until that
step is done (a second one stops at once; the rewind's journal finishes an interrupted pull),
so a follower never leaves a landed pull without its `sync_ref` fact (which would make the next
pull look diverged) nor a pushed ref this machine does not know it pushed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tillage.errors import TillageError
from tillage.features.sync.errors import RefMissingError
from tillage.features.sync.remotes import RemoteConfig
from tillage.platform.interrupts import interruptions_held
from tillage.workspace.attach import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from tillage.features.sync.engine import PullOutcome
    from tillage.store.rows import SnapshotRow
    from tillage.store.store import Store

# The after-write step a cycle ends with (store, workspace ID).
AfterWrite = Callable[["Store", str], None]
# Merges a diverged pull (workspace, incoming snapshot, the common ancestor): the merge's
# result snapshot when it landed, else None, and the conflicting paths. Handed down by the verb
# (sync imports no other feature).
MergeIncoming = Callable[[Workspace, str, str], "tuple[str | None, tuple[str, ...]]"]

DEFAULT_POLL_SECONDS = 2.0
MIN_POLL_SECONDS = 0.05
# After failed cycles the wait doubles, up to this (or the poll interval, when longer).
BACKOFF_CAP_SECONDS = 30.0
# While it waits, the stream yields None this often, so a host notices a reader that went away.
WAIT_SLICE = 0.1


@dataclass(frozen=True)
class FollowCycle:
    """One cycle of `sync --follow`, one JSON object per line.

    `pulled`: the pull's disposition (`up_to_date`, `fast_forwarded`, `diverged`; `missing`
    when nothing was pushed to the ref yet, so this cycle's push makes it), null when the cycle
    failed before the pull answered. `pushed`: the snapshot this cycle pushed, or null.
    `merged`: the snapshot this cycle's own three-way merge of a diverged pull landed, or null.
    `paused`: the ref diverged with `conflicts` (paths) and the follower waits for `till merge
    --snapshot <incoming>` (`next_step` says it exactly). `error`: the envelope of the error
    that ended this cycle (`{code, name, message, next}`), the follower goes on after
    `retry_in` seconds."""

    cycle: int
    at: str
    remote: str
    ref: str
    pulled: str | None
    fetched_objects: int
    pushed: str | None
    uploaded_objects: int
    uploaded_bytes: int
    paused: bool
    incoming: str | None
    next_step: str | None
    error: dict[str, Any] | None
    merged: str | None
    conflicts: tuple[str, ...]
    retry_in: float


def backoff(poll_seconds: float, failures: int) -> float:
    """The wait before the next cycle: the poll interval, doubled for each failure in a row
    (so a remote that is down is not hammered), never beyond the cap."""
    if failures <= 0:
        return poll_seconds
    cap = max(poll_seconds, BACKOFF_CAP_SECONDS)
    return float(min(cap, poll_seconds * (2 ** min(failures, 16))))


class Follower:
    """The cycles of one follower; `stream()` yields each report, and None while it waits."""

    def __init__(
        self,
        ws: Workspace,
        config: RemoteConfig,
        env: Mapping[str, str],
        cwd: str,
        ref: str,
        *,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        takeover: bool = False,
        accept_rollback: bool = False,
        after_write: AfterWrite | None = None,
        merge_incoming: MergeIncoming | None = None,
    ) -> None:
        self.ws, self.config, self.env, self.cwd, self.ref = ws, config, env, cwd, ref
        self.poll_seconds = poll_seconds
        self.takeover = takeover
        # Accepted by the first pull that reads the ref, never for the rest of the follow: a
        # rollback met later is refused (each cycle's error) like any other.
        self.accept_rollback = accept_rollback
        # What follows a cycle that changed the folder or the store, as it follows a verb
        # (features/after_write.py, handed down by the verb: sync imports no other feature).
        self.after_write = after_write
        self.merge_incoming = merge_incoming
        # (incoming, the folder's tree) of the last merge that conflicted: not tried again.
        self._conflicted: tuple[str, str] | None = None
        self._conflicts: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[FollowCycle]:
        for item in self.stream():
            if item is not None:
                yield item

    def stream(self) -> Iterator[FollowCycle | None]:
        """Cycles until the caller stops iterating (or an interruption ends the process)."""
        cycle = 0
        failures = 0
        while True:
            cycle += 1
            report = self.cycle(cycle)
            failures = failures + 1 if report["error"] is not None else 0
            wait = backoff(self.poll_seconds, failures)
            yield FollowCycle(**report, retry_in=round(wait, 3))
            deadline = time.monotonic() + wait
            while (left := deadline - time.monotonic()) > 0:
                yield None
                time.sleep(min(left, WAIT_SLICE))

    def cycle(self, number: int) -> dict[str, Any]:
        """One pull, then a push when the folder moved; an error ends the cycle as its report."""
        from tillage.features.sync import engine
        from tillage.platform import clock

        report: dict[str, Any] = {
            "cycle": number,
            "at": clock.rfc3339(clock.now_ns()),
            "remote": self.config.name,
            "ref": self.ref,
            "pulled": None,
            "fetched_objects": 0,
            "pushed": None,
            "uploaded_objects": 0,
            "uploaded_bytes": 0,
            "paused": False,
            "incoming": None,
            "next_step": None,
            "error": None,
            "merged": None,
            "conflicts": (),
        }
        try:
            must_push = False
            pulled: PullOutcome | None = None
            with interruptions_held():
                try:
                    pulled = engine.pull(
                        self.ws,
                        self.config,
                        self.env,
                        self.cwd,
                        self.ref,
                        accept_rollback=self.accept_rollback,
                    )
                except RefMissingError:
                    self.accept_rollback = False  # the pull read the ref: it is remembered
                    report["pulled"] = "missing"
                    must_push = True
                else:
                    self.accept_rollback = False
                    report["pulled"] = pulled.disposition
                    report["fetched_objects"] = pulled.fetched_objects
            if pulled is not None and pulled.disposition == "diverged":
                incoming = pulled.remote_snapshot
                report["incoming"] = incoming
                head = pulled.local
                if head is None or not engine.descends(self.ws.store, head.id, incoming):
                    with interruptions_held():
                        merged, conflicts = self._merge(incoming, head)
                    if merged is None:
                        report["paused"] = True
                        report["conflicts"] = conflicts
                        report["next_step"] = self._landing(incoming)
                        return report
                    report["merged"] = merged
                must_push = True  # merged, here or by the person: the folder descends from it
            with interruptions_held():
                if must_push or self._moved():
                    pushed = engine.push(
                        self.ws,
                        self.config,
                        self.env,
                        self.cwd,
                        self.ref,
                        takeover=self.takeover,
                    )
                    report["pushed"] = pushed.snapshot.id if pushed.moved else None
                    report["uploaded_objects"] = pushed.pushed.uploaded_objects
                    report["uploaded_bytes"] = pushed.pushed.uploaded_bytes
        except TillageError as err:
            report["error"] = err.envelope()
        wrote = bool(report["pushed"] or report["merged"]) or report["pulled"] not in (
            None,
            "up_to_date",
            "missing",
        )
        if wrote and self.after_write is not None:
            with contextlib.suppress(TillageError, OSError):
                self.after_write(self.ws.store, self.ws.id)
        return report

    def _merge(self, incoming: str, head: SnapshotRow | None) -> tuple[str | None, tuple[str, ...]]:
        """Merges a diverged pull three-way, its ancestor the last snapshot synced with the
        ref; returns the merge's result (None when it did not land) and its conflicts. A ref
        this workspace never synced has no ancestor to merge from: the person decides."""
        last = self.ws.store.sync_ref(self.ws.id, self.config.name, self.ref)
        if self.merge_incoming is None or last is None or head is None:
            return None, ()
        tried = (incoming, head.tree)
        if self._conflicted == tried:
            return None, self._conflicts
        merged, conflicts = self.merge_incoming(self.ws, incoming, last.snapshot)
        if merged is None:
            self._conflicted, self._conflicts = tried, conflicts
        return merged, conflicts

    def _landing(self, incoming: str) -> str:
        """How the person lands what diverged (as `sync --pull` says it): merge it, or, for a
        ref this workspace never synced, take the remote's state (the present sealed first).
        Either way the follower resumes by itself."""
        merge = f"till merge --snapshot {incoming}"
        if self.ws.store.sync_ref(self.ws.id, self.config.name, self.ref) is None:
            return f"till sync --pull --ref {self.ref} --bootstrap (or {merge})"
        return merge

    def _moved(self) -> bool:
        """Seals the folder (nothing when unchanged) and tells whether it holds anything but
        what was last synced with the ref."""
        from tillage.workspace.seal import SealOptions, seal_result

        store = self.ws.store
        label = f"sealed to push to {self.config.name}/{self.ref}"
        head = seal_result(
            self.ws, SealOptions(trigger="sync", label=label, skip_unchanged=True)
        ).row
        last = store.sync_ref(self.ws.id, self.config.name, self.ref)
        if last is None:
            return True
        if head.id == last.snapshot:
            return False
        # Against the remote's snapshot, not the local one a pull sealed when it landed: an
        # edit made while the pull applied is in that seal, and must still go up.
        synced = store.snapshot(last.snapshot)
        return synced is None or synced.tree != head.tree
