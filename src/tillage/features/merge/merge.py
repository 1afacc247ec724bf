"""`till merge`: a three-way merge of a fork (or a stored snapshot) into the workspace.

Ancestor, ours and theirs are snapshots: the fork's base, the workspace sealed first (trigger
`pre_merge`, which is also the merge's undo) and the fork's head sealed now (trigger `fork`). A
dry run seals nothing: its live sides are scanned (IDs computed, nothing stored) and their
changed files read where they lie. Sealed trees are walked together from the store, descending
only into folders theirs changed, so a merge costs what changed, not the size of the
workspace. The pure plan (core.merge_plan) decides each path, `--take` settles paths by a side
(core.settle), and text files both sides changed are merged line by line (core.textmerge). Any
conflict, or a failed `--check`, lands nothing; every outcome carries the plan's digest, and
`--expect` lands only the plan previewed. The check runs in a scratch copy of the merged result
beside the workspace, never in it, and the copy is removed however the check ends. Landing is
merge_land's, on the journal's crash-safe machinery; `--into-fork` is into_fork.py's.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tillage.core import codec
from tillage.core.format import WHOLE_FILE_MAX
from tillage.core.ids import chunk_id
from tillage.core.merge_plan import Conflict, ConflictKind, TextJob, plan_merge, preview_digest
from tillage.core.models import Change, ContentKind, Entry, EntryFlag, EntryKind
from tillage.core.paths import CONTROL_DIR
from tillage.core.progress import ProgressFn
from tillage.core.settle import Takes, settle
from tillage.core.textmerge import MAX_MERGE_BYTES, merge_text
from tillage.core.treediff import diff_entry
from tillage.core.treewalk import walk
from tillage.features.merge.errors import (
    MergeRequestError,
    MergeUnsettledError,
    NoCommonAncestorError,
    StalePreviewError,
)
from tillage.features.merge.land import Tell, drifted, manifests_for, rewrite_tree
from tillage.features.merge.resolve import entries_at
from tillage.platform import clock
from tillage.platform.launch import Launch
from tillage.store.errors import SnapshotNotFoundError
from tillage.store.rows import SnapshotRow
from tillage.store.store import ObjectWriter, Store
from tillage.workspace.attach import Workspace
from tillage.workspace.locks import using_store, workspace_lock
from tillage.workspace.policy import POLICY_FILE, Policy, outside_policy
from tillage.workspace.recovery import recover_if_interrupted
from tillage.workspace.seal import SealOptions, scan_live, seal, seal_result
from tillage.workspace.trees import flatten, read_file_bytes

Manifest = dict[str, Entry]
Sides3 = tuple[Manifest, Manifest, Manifest]
NO_TAKES = Takes({})

# The environment a merge check runs with, so a check script can tell it is one.
CHECK_ENV = {"TILLAGE_MERGE_CHECK": "1"}
# Ancestor search: snapshots visited at most (a damaged index's cycle must not spin).
MAX_ANCESTRY = 1_000_000

_REASONS = {
    "overlap": "both sides changed the same lines",
    "binary": "binary file changed on both sides",
    "too_large": f"too large to merge line by line (over {MAX_MERGE_BYTES >> 20} MiB)",
}


@dataclass(frozen=True)
class CheckRun:
    """The merge check: its exit status and its captured output."""

    exit_code: int
    output: str


@dataclass(frozen=True)
class Side:
    """One side of a merge: a sealed snapshot, or (in a dry run, which writes nothing) the
    live folder as scanned, its files read from where they are. `row` is the snapshot the side
    is, or for a live side the head when the folder is still exactly it (None otherwise)."""

    row: SnapshotRow | None
    tree: bytes
    live: Path | None = None
    manifest: Manifest | None = None


@dataclass(frozen=True)
class MergeOutcome:
    """What a merge did or would do (see the verb's result for the fields' meaning)."""

    fork: str | None
    base: SnapshotRow
    ours: SnapshotRow | None
    theirs: SnapshotRow | None
    changes: tuple[Change, ...]
    merged: tuple[str, ...]
    conflicts: tuple[Conflict, ...]
    check: CheckRun | None
    landed: bool
    result: SnapshotRow | None
    dry_run: bool
    preview_digest: str
    into_fork: bool = False


# -- finding the three sides ------------------------------------------------------------------


@using_store
def merge_fork(
    ws: Workspace,
    name: str,
    *,
    check: str | None = None,
    dry_run: bool = False,
    expect: str | None = None,
    takes: Takes = NO_TAKES,
    launch: Launch | None = None,
    on_progress: ProgressFn | None = None,
) -> MergeOutcome:
    """Merges the live fork `name` of `ws` into it: the fork's base is the ancestor (it moves
    to the state merged, so the next merge counts from there)."""
    from tillage.features.forks.fork import open_fork, require_fork, require_fork_folder

    row = require_fork(ws, name)
    base = ws.store.snapshot(row.base)
    if base is None:
        raise SnapshotNotFoundError(f"the fork's base {row.base[:12]} is not in the store")
    require_fork_folder(ws.store, row)
    fork_ws = open_fork(ws, row)
    recover_if_interrupted(fork_ws)  # a rewind or merge of the fork killed half-way
    if dry_run:
        ours, theirs = live_side(ws), live_side(fork_ws)
    else:
        ours = sealed_side(seal(ws, _pre_merge(f"before merge {name}")))
        theirs = sealed_side(
            seal_result(
                fork_ws,
                SealOptions(
                    trigger="fork", label="sealed for a merge into its parent", skip_unchanged=True
                ),
            ).row
        )
    _require_settled(ws.store, row.workspace, theirs, takes)
    return _merge(
        ws,
        base,
        ours,
        theirs,
        fork=name,
        check=check,
        dry_run=dry_run,
        expect=expect,
        takes=takes,
        launch=launch,
        on_progress=on_progress,
        label=f"merge {name}",
        merged_from=None,
        tell=Tell(
            "fact",
            {
                "workspace": row.workspace,
                "parent": ws.id,
                "name": name,
                "base": theirs.row.id if theirs.row is not None else row.base,
                "previous": row.base,  # what a rewind to before this merge puts back
            },
        ),
    )


@using_store
def merge_snapshot(
    ws: Workspace,
    ref: str,
    base_ref: str | None = None,
    *,
    check: str | None = None,
    dry_run: bool = False,
    expect: str | None = None,
    takes: Takes = NO_TAKES,
    launch: Launch | None = None,
    on_progress: ProgressFn | None = None,
) -> MergeOutcome:
    """Merges a stored snapshot into `ws`; the ancestor is `base_ref`, or the nearest snapshot
    both sides descend from (following `parent` and `merged_from`)."""
    theirs = find_snapshot(ws, ref)
    base = find_snapshot(ws, base_ref) if base_ref is not None else None
    label = f"before merge {theirs.id[:12]}"
    ours = live_side(ws) if dry_run else sealed_side(seal(ws, _pre_merge(label)))
    if base is None:
        # A live side descends from the head it was scanned over.
        mine = ours.row if ours.row is not None else ws.store.head(ws.id)
        base = common_ancestor(ws.store, mine, theirs) if mine is not None else None
        if base is None:
            raise NoCommonAncestorError(
                f"snapshot {theirs.id[:12]} shares no ancestor with this workspace's timeline"
            )
    return _merge(
        ws,
        base,
        ours,
        sealed_side(theirs),
        fork=None,
        check=check,
        dry_run=dry_run,
        expect=expect,
        takes=takes,
        launch=launch,
        on_progress=on_progress,
        label=f"merge {theirs.id[:12]}",
        merged_from=theirs.id,
        tell=Tell("event", {"snapshot": theirs.id, "short": theirs.id[:12], "base": base.id}),
    )


def _require_settled(store: Store, fork_id: str, theirs: Side, takes: Takes) -> None:
    """Refuses to land a fork that still holds what a merge into it left in conflict."""
    from tillage.features.merge.resolve import unsettled

    pending = store.fork_pending(fork_id)
    if not pending:
        return
    roots = [p for p, _kind, _how in pending]
    at = entries_at(store, theirs.tree, theirs.manifest, roots)
    read = file_reader(store, (theirs, theirs))
    left = unsettled(pending, at, lambda path, entry: read(2, path, entry), takes)
    if left:
        listed = "; ".join(f"{u.path}: {u.why}" for u in left[:10])
        more = f" (and {len(left) - 10} more)" if len(left) > 10 else ""
        raise MergeUnsettledError(
            f"{len(left)} path(s) the merge into the fork left in conflict are not settled: "
            f"{listed}{more}. Nothing was landed.",
            details={"unsettled": [{"path": u.path, "kind": u.kind, "why": u.why} for u in left]},
        )


def check_request(name: str | None, snapshot: str | None, base: str | None) -> None:
    """A merge names a fork or a snapshot, exactly one; --base goes with --snapshot."""
    if (name is None) == (snapshot is None):
        raise MergeRequestError(
            "give a fork's NAME or --snapshot ID, not both"
            if name is not None
            else "nothing to merge: give a fork's NAME or --snapshot ID"
        )
    if base is not None and snapshot is None:
        raise MergeRequestError("--base goes with --snapshot (a fork's base is known)")


def find_snapshot(ws: Workspace, ref: str) -> SnapshotRow:
    """A snapshot of the workspace's family by ID or prefix, or any snapshot of the store by
    its full ID (one pulled from another machine)."""
    from tillage.workspace.timeline import resolve

    try:
        return resolve(ws, ref)
    except SnapshotNotFoundError:
        found = ws.store.snapshot(ref.strip().lower())
        if found is None:
            raise
        return found


def _pre_merge(label: str) -> SealOptions:
    return SealOptions(trigger="pre_merge", label=label)


def sealed_side(row: SnapshotRow) -> Side:
    return Side(row, bytes.fromhex(row.tree))


def live_side(ws: Workspace) -> Side:
    """The folder as it is now, scanned without storing anything (a dry run writes nothing,
    CONTRACT.md): its IDs are computed, its changed files read where they lie."""
    capture = scan_live(ws)
    head = ws.store.head(ws.id)
    row = head if head is not None and bytes.fromhex(head.tree) == capture.root else None
    return Side(row, capture.root, ws.root, capture.manifest or {})


def common_ancestor(store: Store, ours: SnapshotRow, theirs: SnapshotRow) -> SnapshotRow | None:
    """The nearest snapshot both descend from, searching both histories a step at a time
    (parents, merge parents, and a fork's base for its first snapshot)."""
    marks: dict[str, int] = {}
    rows: dict[str, SnapshotRow] = {ours.id: ours, theirs.id: theirs}
    queues = (deque([ours.id]), deque([theirs.id]))
    for side, start in enumerate((ours.id, theirs.id)):
        marks[start] = marks.get(start, 0) | (1 << side)
        if marks[start] == 3:
            return rows[start]
    visited = 0
    while (queues[0] or queues[1]) and visited < MAX_ANCESTRY:
        for side in (0, 1):
            if not queues[side]:
                continue
            current = rows[queues[side].popleft()]
            visited += 1
            for parent in _parents(store, current):
                if parent not in rows:
                    row = store.snapshot(parent)
                    if row is None:
                        continue
                    rows[parent] = row
                before = marks.get(parent, 0)
                if before & (1 << side):
                    continue
                marks[parent] = before | (1 << side)
                if marks[parent] == 3:
                    return rows[parent]
                queues[side].append(parent)
    return None


def _parents(store: Store, row: SnapshotRow) -> list[str]:
    found = [p for p in (row.parent, row.merged_from) if p]
    if row.parent is None:
        fork = store.fork_of(row.workspace)
        if fork is not None and fork.base != row.id:
            found.append(fork.base)
    return found


# -- planning ---------------------------------------------------------------------------------


def three_way(store: Store, base: bytes | None, ours: bytes | None, theirs: bytes | None) -> Sides3:
    """The three trees as flat manifests, read only where they matter: a folder is entered
    when theirs changed it and ours is not already the same as theirs. Everything the plan
    needs is there, and a merge of 100 files in a 5,000-file workspace reads a few dozen
    trees."""

    def read(tid: bytes) -> list[Entry]:
        return codec.decode_tree(store.read(tid))

    def enter(path: str, subtrees: tuple[bytes | None, ...]) -> bool:
        b, o, t = subtrees
        return t not in (o, b)  # theirs changed it, and ours does not hold their change yet

    out: tuple[Manifest, Manifest, Manifest] = ({}, {}, {})
    for path, sides in walk(read, (base, ours, theirs), enter=enter):
        for manifest, entry in zip(out, sides, strict=True):
            if entry is not None:
                manifest[path] = entry
    return out


# Reads one file of a side: (side index 0 base, 1 ours, 2 theirs; path; entry) -> its bytes.
ReadFile = Callable[[int, str, Entry], bytes]


def file_reader(store: Store, sides: tuple[Side, Side]) -> ReadFile:
    """Reads a side's file from the store, or for a live side (a dry run) from its folder,
    where a file changed since the last seal is the only copy of its bytes."""

    def read(side: int, path: str, entry: Entry) -> bytes:
        live = sides[side - 1].live if side else None
        if live is None:
            return read_file_bytes(store, entry)
        # Never through a link: a name swapped for one since the scan is not followed out.
        fd = os.open(os.path.join(live, path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    return read


def captured_by_both(
    read: ReadFile, sides: tuple[Manifest, Manifest, Manifest]
) -> tuple[Manifest, Manifest, Manifest]:
    """The three manifests without the paths ours' or theirs' own policy excludes (INV-11, as
    for a rewind): a side that does not capture a folder knows nothing of it, so a fork that
    stops capturing `data/` does not delete it from the parent, and a folder the parent leaves
    out is not written over from a fork that captures it."""
    _base, ours, theirs = sides

    def policy(side: int, manifest: Manifest) -> Policy:
        entry = manifest.get(POLICY_FILE)
        if entry is None or entry.kind is not EntryKind.FILE:
            return Policy([])
        return Policy.from_bytes(read(side, POLICY_FILE, entry))

    policies = [policy(1, ours), policy(2, theirs)]

    def kept(manifest: Manifest) -> Manifest:
        for policy in policies:
            manifest = outside_policy(manifest, policy)
        return manifest

    return kept(sides[0]), kept(ours), kept(theirs)


def _merge_job(read: ReadFile, job: TextJob) -> bytes | str | None:
    """The merged bytes of a file both sides changed, why it is a conflict, or None when the
    merge is what ours already holds (theirs' change is in it already)."""
    if max(job.base.size, job.ours.size, job.theirs.size) > MAX_MERGE_BYTES:
        return _REASONS["too_large"]
    ours = read(1, job.path, job.ours)
    merged = merge_text(read(0, job.path, job.base), ours, read(2, job.path, job.theirs))
    if merged.merged is None:
        return _REASONS.get(str(merged.reason), "both sides changed it")
    if merged.merged == ours and job.entry.mode == job.ours.mode:
        return None
    return merged.merged


def _merged_entry(writer: ObjectWriter | None, job: TextJob, data: bytes) -> Entry:
    """The result's entry for merged bytes, storing them through `writer` (None: a dry run,
    the ID is computed only)."""
    if len(data) <= WHOLE_FILE_MAX:
        cid = chunk_id(data)
        if writer is not None:
            writer.put(codec.Kind.CHUNK, cid, data)
        kind, content = ContentKind.CHUNK, bytes(cid)
    else:
        from tillage.workspace.content import store_content

        fd = os.memfd_create("tillage-merge")
        try:
            os.write(fd, data)
            raw_kind, content, _size = store_content(fd, writer, st=os.fstat(fd))
            kind = ContentKind(raw_kind)
        finally:
            os.close(fd)
    return replace(
        job.entry,
        size=len(data),
        mtime_ns=clock.files_now_ns(),
        content_kind=kind,
        content=content,
        flags=EntryFlag.NONE,
        link=b"",
    )


def manifests(store: Store, base: SnapshotRow, ours: Side, theirs: Side) -> Sides3:
    """The three manifests a plan needs: read from the store where it matters (three_way) when
    both sides are sealed; a live side's whole scan beside the others' whole trees otherwise
    (a dry run: the plan is the same, since a manifest may hold more than the plan needs)."""
    root = bytes.fromhex(base.tree)
    if ours.manifest is None and theirs.manifest is None:
        return three_way(store, root, ours.tree, theirs.tree)

    def whole(side: Side) -> Manifest:
        return side.manifest if side.manifest is not None else flatten(store, side.tree)

    return flatten(store, root), whole(ours), whole(theirs)


@dataclass
class Planned:
    """A merge planned and its text merged: the three manifests, what lands over ours, the
    conflicts, and the paths merged line by line."""

    b: Manifest
    o: Manifest
    t: Manifest
    land: dict[str, Entry | None]
    conflicts: list[Conflict]
    merged: list[str]
    marked: list[str] = field(default_factory=list)  # text conflicts written with markers


# Writes a text conflict out with markers (merge --into-fork): the job -> the file's bytes.
Markers = Callable[[TextJob], bytes]


def plan_sides(
    store: Store,
    read: ReadFile,
    base: SnapshotRow,
    sides: tuple[Side, Side],
    writer: ObjectWriter | None,
    *,
    takes: Takes,
    markers: Markers | None = None,
) -> Planned:
    """Plans merging theirs into ours, settles what `takes` names, and merges text: a text
    conflict is a conflict, written out with `markers` when they are given (and still listed,
    as what is left to settle)."""
    ours_side, theirs_side = sides
    b, o, t = captured_by_both(read, manifests(store, base, ours_side, theirs_side))
    plan = plan_merge(b, o, t)
    if takes:
        roots = list(takes.paths)
        at_roots = (
            entries_at(store, ours_side.tree, ours_side.manifest, roots),
            entries_at(store, theirs_side.tree, theirs_side.manifest, roots),
        )
        plan = settle(plan, takes, o, at_roots)
    planned = Planned(b, o, t, dict(plan.land), list(plan.conflicts), [])
    for job in plan.text:
        data = _merge_job(read, job)
        if data is None:
            continue
        if isinstance(data, str):
            written = markers is not None and data == _REASONS["overlap"]
            planned.conflicts.append(
                Conflict(
                    job.path,
                    ConflictKind.MODIFY_MODIFY,
                    job.base,
                    job.ours,
                    job.theirs,
                    "both sides changed the same lines: written with conflict markers"
                    if written
                    else data,
                )
            )
            if written and markers is not None:
                planned.land[job.path] = _merged_entry(writer, job, markers(job))
                planned.marked.append(job.path)
        else:
            planned.land[job.path] = _merged_entry(writer, job, data)
            planned.merged.append(job.path)
    return planned


def _merge(
    ws: Workspace,
    base: SnapshotRow,
    ours_side: Side,
    theirs_side: Side,
    *,
    fork: str | None,
    check: str | None,
    dry_run: bool,
    launch: Launch | None,
    on_progress: ProgressFn | None,
    label: str,
    merged_from: str | None,
    tell: Tell,
    expect: str | None = None,
    takes: Takes = NO_TAKES,
) -> MergeOutcome:
    store = ws.store
    read = file_reader(store, (ours_side, theirs_side))
    ours, theirs = ours_side.row, theirs_side.row
    tree = ""
    digest = ""
    planned = Planned({}, {}, {}, {}, [], [])

    def outcome(
        *, landed: bool = False, result: SnapshotRow | None = None, ran: CheckRun | None = None
    ) -> MergeOutcome:
        land, o = planned.land, planned.o
        changes = (diff_entry(p, o.get(p), land[p]) for p in sorted(land))
        return MergeOutcome(
            fork=fork,
            base=base,
            ours=ours,
            theirs=theirs,
            changes=tuple(c for c in changes if c is not None),
            merged=tuple(planned.merged),
            conflicts=tuple(sorted(planned.conflicts, key=lambda c: c.path)),
            check=ran,
            landed=landed,
            result=result,
            dry_run=dry_run,
            preview_digest=digest,
        )

    with contextlib.ExitStack() as stack:
        writer = None if dry_run else stack.enter_context(store.writer())
        planned = plan_sides(store, read, base, (ours_side, theirs_side), writer, takes=takes)
        land, conflicts, o = planned.land, planned.conflicts, planned.o
        digest = preview_digest(base.id, o, land, conflicts)
        if expect is not None and expect != digest:
            raise StalePreviewError(
                "the merge's plan changed since it was previewed: nothing was landed",
                details={"preview_digest": digest},
            )
        if conflicts or dry_run:
            return outcome()
        if writer is not None and land:
            tree = rewrite_tree(store, writer, ours_side.tree, land).hex()
            writer.commit()  # INV-2: the intent will name this tree and its new bytes
    ran = run_check(ws, o, land, check, launch) if check is not None else None
    if ran is not None and ran.exit_code != 0:
        return outcome(ran=ran)
    if not land:
        return outcome(ran=ran)
    from tillage.features.merge import land as merge_land

    with workspace_lock(ws):
        moved = drifted(ws.root, land, o, ws.store.tmp_dir)
        if moved:
            conflicts.extend(
                Conflict(
                    path,
                    ConflictKind.MODIFY_MODIFY,
                    planned.b.get(path),
                    o.get(path),
                    planned.t.get(path),
                    "changed in the workspace while merging: merge again",
                )
                for path in moved
            )
            return outcome(ran=ran)
        changes = sum(1 for p in land if diff_entry(p, o.get(p), land[p]) is not None)
        assert ours is not None  # a merge that lands sealed its sides
        row = merge_land.land(
            ws,
            ours,
            o,
            land,
            tree,
            label=label,
            merged_from=merged_from,
            tell=replace(tell, body={**tell.body, "changes": changes}),
            on_progress=on_progress,
        )
    return outcome(landed=True, result=row, ran=ran)


# -- the check --------------------------------------------------------------------------------


def run_check(
    ws: Workspace,
    ours: Manifest,
    land: dict[str, Entry | None],
    command: str,
    launch: Launch | None,
) -> CheckRun:
    """Runs `command` through /bin/sh -c in a scratch copy of the merged result: the live
    folder copied (fast drivers first) beside the workspace, the merge applied there. The copy
    is removed however the check ends."""
    from tillage.platform.clone import copy_tree
    from tillage.platform.commands import run_command
    from tillage.workspace.materialize import apply_to_copy
    from tillage.workspace.scratch import scratch_folder

    with scratch_folder(ws.store, _scratch_parent(ws), f".{ws.root.name}.merge-check-") as holder:
        copy = holder / ws.root.name
        copy_tree(ws.root, copy, skip=_left_out(ws), skip_workspaces=True)  # not a nested one
        if land:
            now, want = manifests_for(ours, land)
            apply_to_copy(ws, copy, now, want)
        done = run_command((command,), copy, env=CHECK_ENV, launch=launch)
        return CheckRun(done.exit_code, done.output)


def _left_out(ws: Workspace) -> Callable[[str], bool]:
    """What the check's copy leaves out: the workspace's `.tillage/` (the copy is no workspace)
    and the store's folder when it lies inside the workspace."""
    skipped = {CONTROL_DIR}
    home = ws.store.home.resolve()
    if ws.root in home.parents:
        skipped.add(home.relative_to(ws.root).as_posix())
    return skipped.__contains__


def _scratch_parent(ws: Workspace) -> Path:
    """Where the check's copy goes: beside the workspace (same file system: the copy can share
    extents), or the store's temporary folder when the workspace's parent is not writable."""
    if os.access(ws.root.parent, os.W_OK | os.X_OK):
        return ws.root.parent
    ws.store.tmp_dir.mkdir(parents=True, exist_ok=True)
    return ws.store.tmp_dir
