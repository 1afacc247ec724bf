"""The events verb: the workspace's seals, rewinds, pins (and later forks, merges, claims) as a
stream, read from the publication log after a cursor, optionally followed as it grows.

The stream is the log itself (store/events.py says why), so `cursor` is a record's seq: exact,
strictly increasing, and the same after a restart or a repair.
"""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import IntegrityError, InvalidArgumentError
from tillage.verbs.contract import (
    Audience,
    Contract,
    Effect,
    Scope,
    ToolLimit,
    ToolSpec,
    Verb,
    param,
)
from tillage.verbs.invoke import Context

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from tillage.store.events import Event, LogFollower
    from tillage.store.store import Store

# How often a follower looks at the log's size while it waits (well within the second the
# contract allows; one stat each time, so an idle follower costs next to nothing).
POLL_SECONDS = 0.1


@dataclass(frozen=True)
class EventsRequest:
    after: str | None = param(
        "only events after this cursor (exclusive): the `cursor` of the last event you saw",
        default=None,
        metavar="CURSOR",
    )
    limit: int | None = param(
        "at most this many events (with --follow: in all, then it stops)",
        default=None,
        short="-n",
    )
    follow: bool = param(
        "keep delivering new events as they are published, until interrupted", default=False
    )
    all_workspaces: bool = param(
        "events of every workspace in the store, not only this one", default=False, flag="--all"
    )
    family: bool = param(
        "events of this workspace's family too: its forks, their forks, and the workspaces it "
        "was forked from",
        default=False,
    )


@dataclass(frozen=True)
class EventInfo:
    """One event: one JSON object per line on the wire."""

    cursor: int
    at: str
    kind: str
    workspace: str | None  # the folder (absolute path); null when the store no longer knows it
    workspace_id: str | None
    detail: dict[str, Any]


class EventStream:
    """The events a request asked for, read lazily: iterating yields EventInfo; `stream()`
    also yields None while a follower waits, so a host can notice its reader went away."""

    def __init__(
        self,
        store: Store,
        follower: LogFollower,
        workspaces: frozenset[str] | None,
        limit: int | None,
        follow: bool,
    ) -> None:
        self.store = store
        self.follower = follower
        # The workspaces whose events are delivered; None: every workspace in the store.
        self.workspaces = workspaces
        self.limit = limit
        self.follow = follow
        self._roots: dict[str, str | None] = {}

    def __iter__(self) -> Iterator[EventInfo]:
        for item in self.stream():
            if item is not None:
                yield item

    def stream(self) -> Iterator[EventInfo | None]:
        """Yields each event in log order; following, yields None on each idle poll."""
        import time

        from tillage.store.events import event_of

        delivered = 0
        # Without --follow the stream ends at the log's end as it is now: a writer that never
        # stops cannot keep it going.
        end = None if self.follow else self.follower.log_size()
        while True:
            for record in self.follower.records():
                if end is not None and record.end_offset > end:
                    return
                event = event_of(self.store, record)
                if event is None or (
                    self.workspaces is not None and event.workspace not in self.workspaces
                ):
                    continue
                yield self._info(event)
                delivered += 1
                if self.limit is not None and delivered >= self.limit:
                    return
            if not self.follow:
                return
            while not self.follower.has_more():
                yield None
                time.sleep(POLL_SECONDS)

    def _info(self, event: Event) -> EventInfo:
        from tillage.platform.clock import rfc3339
        from tillage.store.events import workspace_root

        root = None
        if event.workspace is not None:
            if event.workspace not in self._roots:
                self._roots[event.workspace] = workspace_root(self.store, event.workspace)
            root = self._roots[event.workspace]
        return EventInfo(
            cursor=event.seq,
            at=rfc3339(event.at_ns),
            kind=event.kind,
            workspace=root,
            workspace_id=event.workspace,
            detail=event.detail,
        )


def parse_cursor(text: str | int | None) -> int:
    """Returns a cursor as its seq (0: from the start); invalid_argument when it is not one."""
    from tillage.errors import echo

    if text is None:
        return 0
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and text.strip().isascii() and text.strip().isdigit():
        value = int(text.strip())
    else:
        raise InvalidArgumentError(
            f"--after takes an event's cursor (a whole number), not {echo(str(text))}",
            next_step="pass the `cursor` of the last event you saw, or leave --after off",
        )
    if value < 0:
        raise InvalidArgumentError(
            f"--after takes an event's cursor (0 or more), not {value}",
            next_step="pass the `cursor` of the last event you saw, or leave --after off",
        )
    return value


def events(ctx: Context, req: EventsRequest) -> EventStream:
    from tillage.store.events import LogFollower

    after = parse_cursor(req.after)
    if req.limit is not None and req.limit < 1:
        raise InvalidArgumentError("--limit must be at least 1")
    ws = ctx.workspace
    # Seeking reads (and checks) the lines it lands on: damage there is answered now, before
    # any event is printed.
    follower = LogFollower(ws.store.log, after)
    return EventStream(ws.store, follower, _whose(ws, req), req.limit, req.follow)


def _whose(ws: Any, req: EventsRequest) -> frozenset[str] | None:
    """The workspaces a request reads the events of: this one, its family (forks below it at
    any depth, the forks it descends from), or every one (None; a person's `--all`: a tool
    never offers it, so a model sees nothing of workspaces unrelated to its own)."""
    if req.all_workspaces:
        return None
    if not req.family:
        return frozenset((ws.id,))
    from tillage.workspace import family

    return frozenset(
        (ws.id, *family.ancestors(ws.store, ws.id), *family.descendants(ws.store, ws.id))
    )


VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        Contract(
            name="workspace.events",
            since=1,
            scope=Scope.WORKSPACE,
            audience=Audience.AGENT,
            effect=Effect.READ,
            request=EventsRequest,
            result=EventInfo,
            cli="events",
            errors=(IntegrityError,),
            tool=ToolSpec(
                hidden=("follow", "all_workspaces"),
                limits=(ToolLimit("limit", 50, 500),),
                doc="What happened to this workspace (seals, restores, pins, forks, merges, "
                "claims, ...), oldest first: each event's `cursor`, `at`, `kind`, `workspace` "
                "and `detail`. `family: true` adds the events of its forks (at any depth) and "
                "of the workspaces it was forked from; no other workspace's are shown.",
                docs=(("limit", "at most this many events"),),
                guide="Pass the last `cursor` you saw as `after` to read only what is new.",
            ),
            doc="What happened to the workspace (seals, rewinds, pins, ...), oldest first, one "
            "JSON object per line: `cursor`, `at`, `kind`, `workspace`, `detail`. `--after` "
            "is exclusive; `--follow` keeps delivering new events within a second.",
        ),
        events,
    ),
)
