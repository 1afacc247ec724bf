"""`till merge NAME --into-fork`: the workspace merged into the fork, conflicts written out there.

The same three-way merge, the other way round (ancestor the fork's base, ours the fork, theirs
the workspace), landed in the fork's folder through the journal like any merge: what merges
cleanly lands, a text file both sides changed in the same lines is written with git-style
markers (`<<<<<<< workspace`, `||||||| base`, `=======`, `>>>>>>> NAME`), and anything else in
conflict keeps the fork's own version. The workspace is never written. The fork's base then
moves to the workspace's state that was merged (a `fork_base` fact, with what is left to
settle), so the fork holds the workspace's changes as common ground and the merge that lands
it later (`till merge NAME`) brings only the fork's own work and resolutions, once each
conflict is settled (features/merge/resolve.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

from tillage.core.merge_plan import Conflict, ConflictKind, TextJob
from tillage.core.progress import ProgressFn
from tillage.core.settle import Takes
from tillage.core.textmerge import with_markers
from tillage.core.treediff import diff_entry
from tillage.features.merge.land import Tell, drifted, rewrite_tree
from tillage.features.merge.merge import (
    MergeOutcome,
    file_reader,
    live_side,
    plan_sides,
    sealed_side,
)
from tillage.store.errors import SnapshotNotFoundError
from tillage.store.rows import SnapshotRow
from tillage.workspace.attach import Workspace
from tillage.workspace.locks import using_store, workspace_lock
from tillage.workspace.recovery import recover_if_interrupted
from tillage.workspace.seal import SealOptions, seal, seal_result

# A conflict's kind named from the workspace's side, for one planned from the fork's.
_FLIPPED = {
    ConflictKind.MODIFY_DELETE: ConflictKind.DELETE_MODIFY,
    ConflictKind.DELETE_MODIFY: ConflictKind.MODIFY_DELETE,
}
WORKSPACE_LABEL = "workspace"


def _flip(conflict: Conflict) -> Conflict:
    """A conflict planned with the fork as ours, named as every merge names it (ours: the
    workspace)."""
    kind = _FLIPPED.get(conflict.kind, conflict.kind)
    return replace(conflict, kind=kind, ours=conflict.theirs, theirs=conflict.ours)


def _fork_takes(takes: Takes) -> Takes:
    """The user's `--take` (ours: the workspace) as the reversed plan reads it."""
    swap = {"ours": "theirs", "theirs": "ours"}
    return Takes({p: swap[s] for p, s in takes.paths.items()})


@using_store
def merge_into_fork(
    ws: Workspace,
    name: str,
    *,
    takes: Takes,
    dry_run: bool = False,
    on_progress: ProgressFn | None = None,
) -> MergeOutcome:
    """Merges the workspace `ws` into its live fork `name` (see the module's doc)."""
    from tillage.features.forks.fork import open_fork, require_fork, require_fork_folder

    store = ws.store
    row = require_fork(ws, name)
    base = store.snapshot(row.base)
    if base is None:
        raise SnapshotNotFoundError(f"the fork's base {row.base[:12]} is not in the store")
    require_fork_folder(store, row)
    fork_ws = open_fork(ws, row)
    recover_if_interrupted(fork_ws)
    if dry_run:
        mine, fork_side = live_side(ws), live_side(fork_ws)
    else:
        mine = sealed_side(
            seal(ws, SealOptions(trigger="fork_base", label=f"merged into fork {name}"))
        )
        fork_side = sealed_side(
            seal_result(
                fork_ws,
                SealOptions(
                    trigger="pre_merge",
                    label="before merging its parent into it",
                    skip_unchanged=True,
                ),
            ).row
        )
    read = file_reader(store, (fork_side, mine))

    def markers(job: TextJob) -> bytes:
        # In the reversed plan ours is the fork: the workspace's lines come first, as named.
        return with_markers(
            read(0, job.path, job.base),
            read(2, job.path, job.theirs),
            read(1, job.path, job.ours),
            WORKSPACE_LABEL,
            name,
        )

    with contextlib.ExitStack() as stack:
        writer = None if dry_run else stack.enter_context(store.writer())
        planned = plan_sides(
            store,
            read,
            base,
            (fork_side, mine),
            writer,
            takes=_fork_takes(takes),
            markers=markers,
        )
        land, fork_now = planned.land, planned.o
        tree = ""
        if writer is not None and land:
            tree = rewrite_tree(store, writer, fork_side.tree, land).hex()
            writer.commit()  # INV-2: the intent names this tree and its new bytes
    conflicts = sorted((_flip(c) for c in planned.conflicts), key=lambda c: c.path)
    changes = tuple(c for c in (diff_entry(p, fork_now.get(p), land[p]) for p in sorted(land)) if c)

    def outcome(*, landed: bool = False, result: SnapshotRow | None = None) -> MergeOutcome:
        return MergeOutcome(
            fork=name,
            base=base,
            ours=mine.row,
            theirs=fork_side.row,
            changes=changes,
            merged=tuple(planned.merged),
            conflicts=tuple(conflicts),
            check=None,
            landed=landed,
            result=result,
            dry_run=dry_run,
            preview_digest="",
            into_fork=True,
        )

    if dry_run or not (land or conflicts):
        return outcome()
    assert mine.row is not None and fork_side.row is not None  # sealed: not a dry run
    pending = [
        {
            "path": c.path,
            "kind": str(c.kind),
            "how": "markers" if c.path in planned.marked else "take",
        }
        for c in conflicts
    ]
    from tillage.features.merge import land as merge_land

    label = f"merged the workspace into fork {name}"
    with workspace_lock(fork_ws):
        moved = drifted(fork_ws.root, land, fork_now, store.tmp_dir)
        if moved:
            conflicts.extend(
                Conflict(
                    p,
                    ConflictKind.MODIFY_MODIFY,
                    None,
                    None,
                    fork_now.get(p),
                    "changed in the fork while merging into it: merge again",
                )
                for p in moved
            )
            return outcome()
        sealed = merge_land.land(
            fork_ws,
            fork_side.row,
            fork_now,
            land,
            tree,
            label=label,
            merged_from=mine.row.id,
            tell=Tell(
                "fact",
                {
                    "workspace": row.workspace,
                    "parent": ws.id,
                    "name": name,
                    "base": mine.row.id,
                    "previous": row.base,
                    "into_fork": True,
                    "pending": pending,
                },
                record="fork_base",
            ),
            on_progress=on_progress,
        )
    return outcome(landed=True, result=sealed)
