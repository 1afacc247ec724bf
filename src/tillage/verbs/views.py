"""The shapes results share on the wire: the snapshot object and a change."""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class SnapshotInfo:
    """The contract's snapshot object (CONTRACT.md: in every result that names one)."""

    id: str
    short: str
    sealed_at: str
    trigger: str
    label: str | None
    grade: str
    pinned: bool
    parent: str | None
    files: int
    bytes: int
    agent: str | None
    turn: str | None
    session: str | None
    merged_from: str | None = None


@dataclass(frozen=True)
class ChangeInfo:
    path: str
    kind: str
    old_size: int | None
    new_size: int | None


def snapshot_info(row: Any) -> SnapshotInfo:
    """Returns a store SnapshotRow as the contract's snapshot object."""
    from tillage.platform.clock import rfc3339

    return SnapshotInfo(
        id=row.id,
        short=row.id[:12],
        sealed_at=rfc3339(row.sealed_at_ns),
        trigger=row.trigger,
        label=row.label,
        grade=row.grade,
        pinned=row.pinned,
        parent=row.parent,
        files=row.files,
        bytes=row.bytes,
        agent=row.agent,
        turn=row.turn,
        session=row.session,
        merged_from=row.merged_from,
    )


def change_infos(changes: Any) -> tuple[ChangeInfo, ...]:
    return tuple(ChangeInfo(c.path, str(c.kind), c.old_size, c.new_size) for c in changes)


@dataclass(frozen=True)
class PolicyProblemInfo:
    """A `.tillagepolicy` line that was skipped (the other lines still apply)."""

    file: str
    line: int
    text: str
    problem: str


def policy_problems(root: Any) -> tuple[PolicyProblemInfo, ...]:
    """The live policy's skipped lines, for results that should say why a pattern is ignored."""
    from tillage.workspace.policy import Policy

    return tuple(
        PolicyProblemInfo(p.file, p.line, p.text, p.problem) for p in Policy.load(root).problems
    )


# How a param that takes a snapshot says so (workspace/timeline.py resolves every one alike).
SNAPSHOT_REF = "a snapshot: head, head~N, latest, a fork's name, an ID or a unique prefix"
# ... and one that may also be the live folder (`diff`, `ls`, `cat`).
SNAPSHOT_OR_LIVE = SNAPSHOT_REF + ", or @ (the folder as it is now)"
