"""The watch-fork verb: a fork's new snapshots as they are sealed, one JSON line each, so a
parent agent can follow its children (features/forks/watching.py reads them from the log).

Without `--after` it starts now and delivers only what is sealed from then on, as a
subscription does (the reference's changelog service is a subscriber of new commits); the
stream says on stderr, once it has taken its place, which snapshot it follows: a reader knows
that every snapshot sealed after that line will reach it. `--after ID` is exclusive and
replays what came since, so a reader that stopped resumes from the last `id` it printed.
"""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import IntegrityError, InvalidArgumentError
from tillage.features.forks.errors import ForkNotFoundError, InvalidForkNameError
from tillage.store.errors import BadSnapshotIdError, SnapshotAmbiguousError, SnapshotNotFoundError
from tillage.verbs.contract import Effect, ToolSpec, Verb, agent_contract, param
from tillage.verbs.invoke import Context
from tillage.verbs.views import SnapshotInfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from tillage.features.forks.watching import ForkFollower


@dataclass(frozen=True)
class WatchForkRequest:
    name: str = param("the fork to follow (a fork of this workspace)", positional=True)
    after: str | None = param(
        "only snapshots sealed after this one (exclusive): an ID or prefix of one of the "
        "fork's snapshots or its base; default: from now on, only new ones",
        default=None,
        metavar="ID",
    )
    once: bool = param(
        "print the snapshots there are after --after now, then exit (instead of following)",
        default=False,
    )


@dataclass(frozen=True, kw_only=True)
class ForkSnapshotInfo(SnapshotInfo):
    """One line of the stream: the contract's snapshot object, and the fork it is of."""

    fork: str


@dataclass(frozen=True)
class ForkSnapshots:
    """The stream as one tool call answers it (`once`): the fork and its new snapshots."""

    fork: str
    after: str | None
    snapshots: tuple[ForkSnapshotInfo, ...]

    def model_text(self) -> str:
        """What a model reads back: each new snapshot, and what to pass next time."""
        from tillage.core.units import count

        if not self.snapshots:
            return f"Fork {self.fork} sealed nothing after {self.after}."
        lines = [
            f"- {s.id}  {s.sealed_at}  {s.trigger}" + (f' "{s.label}"' if s.label else "")
            for s in self.snapshots
        ]
        return "\n".join(
            [
                f"Fork {self.fork} sealed {count(len(self.snapshots), 'snapshot')} since, "
                "oldest first:",
                *lines,
                f"Pass after {self.snapshots[-1].id!r} next time to see only newer ones.",
            ]
        )


class ForkSnapshotStream:
    """The snapshots a request asked for, read lazily: iterating yields ForkSnapshotInfo;
    `stream()` also yields None while it waits, so a door can notice its reader went away.
    `note` is what a door says on stderr once, before the first line (None: nothing)."""

    def __init__(self, follower: ForkFollower, follow: bool) -> None:
        self.follower = follower
        self.follow = follow
        self.note = _note(follower) if follow else None

    def __iter__(self) -> Iterator[ForkSnapshotInfo]:
        for item in self.stream():
            if item is not None:
                yield item

    def stream(self) -> Iterator[ForkSnapshotInfo | None]:
        """Yields each new snapshot of the fork; following, None on each idle poll, until the
        fork is removed (its last state is the last line)."""
        from tillage.verbs.views import snapshot_info

        name = self.follower.fork.name
        for row in self.follower.snapshots(follow=self.follow):
            if row is None:
                yield None
                continue
            info = snapshot_info(row)
            yield ForkSnapshotInfo(**info.__dict__, fork=name)

    def held(self) -> ForkSnapshots:
        """Read to the end (a `once` stream), as a tool answers it."""
        after = self.follower.start.after
        return ForkSnapshots(
            fork=self.follower.fork.name,
            after=after.id if after is not None else None,
            snapshots=tuple(iter(self)),
        )


def _note(follower: ForkFollower) -> str:
    after = follower.start.after
    since = "from now on" if after is None else f"after {after.id[:12]}"
    return (
        f"following fork {follower.fork.name}: each snapshot sealed {since}, one line each, "
        "until the fork is removed (Ctrl-C stops)"
    )


def watch_fork(ctx: Context, req: WatchForkRequest) -> ForkSnapshotStream:
    from tillage.features.forks.watching import follow_fork

    if req.once and req.after is None:
        raise InvalidArgumentError(
            "--once needs --after ID: without it a watch starts now, and once there is "
            "nothing sealed after now",
            next_step="pass --after with the fork's `head` (from `till forks`) or its `base`, "
            "or leave --once off to follow it",
        )
    return ForkSnapshotStream(follow_fork(ctx.workspace, req.name, req.after), not req.once)


VERBS: tuple[Verb[Any, Any], ...] = (
    Verb(
        agent_contract(
            "fork.watch",
            "watch-fork",
            WatchForkRequest,
            ForkSnapshotInfo,
            Effect.READ,
            "Follow universe NAME: each snapshot it seals, as it is sealed, one JSON object "
            "per line (the snapshot object and `fork`), until the fork is removed (its last "
            "state is the last line; exit 0) or Ctrl-C. Without --after only new ones; "
            "`--after ID` is exclusive; `--once` prints what there is after it and exits.",
            errors=(
                InvalidForkNameError,
                ForkNotFoundError,
                BadSnapshotIdError,
                SnapshotNotFoundError,
                SnapshotAmbiguousError,
                IntegrityError,
            ),
            tool=ToolSpec(
                name="workspace_fork_snapshots",
                fixed=(("once", True),),
                required=("after",),
                doc="The snapshots universe `name` sealed after the snapshot `after` "
                "(exclusive), oldest first: each snapshot object and `fork`.",
                docs=(
                    (
                        "after",
                        "only snapshots sealed after this one (exclusive): the whole ID "
                        "of one of the fork's snapshots or of its base",
                    ),
                ),
                guide="What a fork sealed after a snapshot: pass `after` (the fork's base or "
                "head from workspace_forks, then the last `id` you got) to see only what is new.",
            ),
        ),
        watch_fork,
    ),
)
