"""Finding snapshots by name, ID or prefix within one workspace's timeline: the one resolver
every verb that takes a snapshot uses (show, cat, diff, ls, rewind, pin, fork --at, merge
--snapshot, bisect, ...), so a name means the same everywhere.

The names, in the order they are tried:
- `@`: the folder as it is now. Not a stored snapshot: `resolve` refuses it (LiveFolderError),
  and the verbs that can read the live folder (diff, ls, cat) ask `is_live` first.
- `head` (or `HEAD`): the workspace's newest snapshot, the first line of `till timeline`.
  `latest` is the same snapshot, under the name restic users type: the newest snapshot of this
  workspace (a fork's snapshots are another timeline, named by the fork's name).
- `head~N` (`latest~N`): N back along the timeline, the (N+1)-th line of `till timeline`;
  `head~` is `head~1`, and `head^^` is `head~2` as in git.
- A live fork's name: that fork's head (its newest sealed state).
- A full ID, or a unique prefix of at least 6 hex digits.

A name beats a prefix, as a ref does in git: a fork called `cafe01` is that fork, never the
snapshots whose IDs start `cafe01` (their longer prefixes still name them); a full 64-digit ID
is always the ID (a fork name is at most 40 characters).
"""

from __future__ import annotations

import string

from tillage.errors import echo
from tillage.store.errors import (
    BadSnapshotIdError,
    LiveFolderError,
    SnapshotAmbiguousError,
    SnapshotBeyondTimelineError,
    SnapshotNotFoundError,
)
from tillage.store.rows import SnapshotRow
from tillage.workspace.attach import Workspace

MIN_PREFIX = 6
_HEX = set(string.hexdigits.lower())
LIVE = "@"
HEAD_NAMES = ("head", "latest")


def is_live(ref: str) -> bool:
    """Tells whether `ref` is `@`, the folder as it is now."""
    return ref.strip() == LIVE


def reserved(name: str) -> bool:
    """Tells whether `name` is one the resolver gives its own meaning (a fork may not take
    it: `head` would never name the fork)."""
    return name.lower() in HEAD_NAMES or name == LIVE


def resolve(ws: Workspace, ref: str) -> SnapshotRow:
    """Returns the snapshot `ref` names (the module's docstring lists the names): a name, a
    full ID or a unique prefix of at least 6 hex digits, in the workspace's own timeline first,
    then in its family's (forks and their parents)."""
    text = ref.strip()
    if text == LIVE:
        raise LiveFolderError(
            "`@` is the folder as it is now, not a stored snapshot: this needs a snapshot"
        )
    back = steps_back(text)
    if back is not None:
        return _back_along(ws, text, back)
    fork = ws.store.fork_named(ws.id, text)
    if fork is not None:
        head = ws.store.head(fork.workspace)
        if head is not None:
            return head
    prefix = text.lower()
    if len(prefix) < MIN_PREFIX or len(prefix) > 64 or not set(prefix) <= _HEX:
        raise _unknown(ws, ref)
    matches = ws.store.snapshots_with_prefix(ws.id, prefix)
    if not matches and _in_family(ws):
        # Not in its own timeline: a snapshot of its family (a fork's base, the last state of
        # a removed fork) is named by ID as well.
        from tillage.workspace.family import members

        matches = ws.store.snapshots_with_prefix_in(members(ws.store, ws.id), prefix)
    if not matches:
        # What a pull brought and kept (a diverged one): `till merge --snapshot ID` lands it.
        matches = ws.store.snapshots_with_prefix(f"{ws.id}.sync", prefix)
    if not matches:
        raise not_found(ws, prefix, ref)
    if len(matches) > 1:
        raise SnapshotAmbiguousError(f"{echo(ref)} matches more than one snapshot")
    row = ws.store.snapshot(matches[0])
    assert row is not None
    return row


def steps_back(text: str) -> int | None:
    """How many snapshots back from the head `text` counts (`head` 0, `head~3` 3, `head^^`
    2); None when it is not a head name. A malformed count is bad_id."""
    lower = text.lower()
    for name in HEAD_NAMES:
        if lower == name:
            return 0
        if not lower.startswith(name) or lower[len(name)] not in "~^":
            continue
        rest = lower[len(name) :]
        if set(rest) == {"^"}:
            return len(rest)
        count = rest[1:]
        if rest[0] == "~" and (count == "" or (count.isascii() and count.isdigit())):
            return int(count or "1")
        raise BadSnapshotIdError(
            f"{echo(text)} does not count back along the timeline: write {name}~N, N a whole "
            f"number (`{name}~1` is the snapshot before `{name}`)",
            next_step="list the timeline with `till timeline`",
        )
    return None


def _back_along(ws: Workspace, text: str, back: int) -> SnapshotRow:
    rows = ws.store.snapshots(ws.id, limit=back + 1)
    if len(rows) > back:
        return rows[back]
    if not rows:
        raise SnapshotNotFoundError(
            f"{echo(text)} names nothing yet: this workspace's timeline is empty",
            next_step="seal the folder with `till snap`",
        )
    count = len(rows)
    raise SnapshotBeyondTimelineError(
        f"{echo(text)} is beyond the timeline: it holds {count} snapshot"
        f"{'' if count == 1 else 's'}, so head~{count - 1} is the oldest",
        next_step=f"list them with `till timeline -n {count}`",
        details={"snapshots": count, "oldest": rows[-1].id},
    )


def _unknown(ws: Workspace, ref: str) -> SnapshotNotFoundError | BadSnapshotIdError:
    """The answer for a word that is no name, no fork and no ID prefix: a removed fork's name
    says where its last state is."""
    text = ref.strip()
    for row in reversed(ws.store.forks_of(ws.id, removed=True)):
        if row.name == text and row.removed_ns is not None and row.last:
            return SnapshotNotFoundError(
                f"the fork {echo(text)} was removed; its last state is snapshot {row.last[:12]}",
                next_step=f"use its ID: `till show {row.last[:12]}`",
                details={"fork": text, "last": row.last},
            )
    return BadSnapshotIdError(
        f"{echo(ref)} is not a snapshot: no fork of this workspace is called that, and it is "
        "not a name (head, head~N, latest, @) nor a snapshot ID (64 hex characters, or a "
        "prefix of at least 6)"
    )


def not_found(ws: Workspace, snapshot_id: str, ref: str | None = None) -> SnapshotNotFoundError:
    """The not_found answer, saying so when a gc removed the snapshot (a full ID only: a prefix
    could name anything)."""
    if len(snapshot_id) == 64 and ws.store.was_dropped(snapshot_id):
        return SnapshotNotFoundError(
            f"snapshot {snapshot_id[:12]} was removed by gc (the retention schedule)",
            next_step="list what is kept with `till timeline`; `till retention` shows the "
            "schedule, and `till pin ID` keeps a snapshot through any gc",
        )
    return SnapshotNotFoundError(f"no snapshot matches {echo(ref or snapshot_id)}")


def still_there(ws: Workspace, target: SnapshotRow) -> None:
    """Raises not_found when a gc removed `target` since it was looked up (an operation that
    waited for the gc to finish)."""
    if ws.store.snapshot(target.id) is None:
        raise not_found(ws, target.id)


def _in_family(ws: Workspace) -> bool:
    return ws.store.fork_of(ws.id) is not None or bool(ws.store.forks_of(ws.id, removed=True))
