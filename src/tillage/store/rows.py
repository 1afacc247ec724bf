"""What the index answers: one frozen row type per table, and the columns each is read from."""

from __future__ import annotations

from dataclasses import dataclass

# The command line opens a store on most calls: what only the type checker or a seal's
# compression pool needs is not imported at start-up.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class SnapshotRow:
    """A published snapshot as the index knows it (the log's facts plus its pin)."""

    id: str
    workspace: str
    seq: int
    sealed_at_ns: int
    trigger: str
    label: str | None
    parent: str | None
    tree: str
    files: int
    bytes: int
    grade: str
    agent: str | None
    turn: str | None
    session: str | None
    merged_from: str | None
    pinned: bool


@dataclass(frozen=True)
class WorkspaceRow:
    id: str
    root: str
    attached_at_ns: int


@dataclass(frozen=True)
class ForkRow:
    """A universe forked from `parent` at snapshot `base`, attached at `root` (its own
    timeline); `removed_ns` and `last` (its final state, sealed first) once `fork-rm` ran;
    `port` the TCP port it holds in its family (None for a fork made before ports were
    recorded, until a command runs in it); `identity` names its very folder (device, inode and
    generation: platform.folders.folder_identity), None when the file system keeps no
    generation or the fork is older."""

    workspace: str
    parent: str
    name: str
    base: str
    root: str
    created_ns: int
    removed_ns: int | None
    last: str | None
    port: int | None = None
    identity: str | None = None


@dataclass(frozen=True)
class ClaimRow:
    """An advisory lease on a path glob, shared by a workspace and all its forks (`family`:
    the ID of the workspace at the root of the fork tree); expires_ns None means no expiry.
    `workspace` is the workspace (or fork) that took it and `root` its folder, None when the
    claim's fact does not say."""

    id: str
    family: str
    pattern: str
    owner: str
    expires_ns: int | None
    claimed_ns: int
    workspace: str | None = None
    root: str | None = None


@dataclass(frozen=True)
class SessionCommitRow:
    """A commit of an agent session's chain as the index knows it (a `session_commit` fact):
    the snapshot it names, its parent commit (None for the baseline) and its change counts."""

    id: str
    workspace: str
    session: str
    seq: int
    parent: str | None
    snapshot: str
    description: str
    created_ns: int
    file_count: int
    total_size: int
    changed_files: int
    changed_total_size: int
    baseline: bool
    agent: str | None


@dataclass(frozen=True)
class SessionRow:
    """An agent session of a workspace: its commits' count, times and head commit, and when
    `session end` marked it ended (None while it goes on)."""

    workspace: str
    id: str
    created_ns: int
    updated_ns: int
    commits: int
    head: str
    ended_ns: int | None


@dataclass(frozen=True)
class SyncRefRow:
    """The last sync of a workspace with one ref of one remote: the remote's snapshot then,
    and the local snapshot that held the same folder."""

    workspace: str
    remote: str
    ref: str
    snapshot: str
    local: str
    synced_ns: int


COMMIT_COLS = (
    "id, workspace, session, seq, parent, snapshot, description, created_ns, file_count, "
    "total_size, changed_files, changed_total_size, baseline, agent"
)
SESSION_COLS = "workspace, id, created_ns, updated_ns, commits, head, ended_ns"


def commit_row(row: tuple[Any, ...]) -> SessionCommitRow:
    # The columns are COMMIT_COLS in SessionCommitRow's field order; `baseline` is 0 or 1.
    values = list(row)
    values[12] = bool(values[12])
    return SessionCommitRow(*values)


SNAP_COLS = (
    "id, workspace, seq, sealed_at_ns, trigger, label, parent, tree, files, bytes, grade, "
    "agent, turn, session, merged_from, "
    "EXISTS(SELECT 1 FROM pins WHERE pins.snapshot = snapshots.id)"
)


def snapshot_row(row: tuple[Any, ...]) -> SnapshotRow:
    # The columns are SNAP_COLS in SnapshotRow's field order; the last is the pin flag.
    return SnapshotRow(*(*row[:-1], bool(row[-1])))
