"""Landing a planned change in a folder, journaled, and finishing one a crash interrupted.

`land` is the one sequence every change of a folder takes (INV-7): stage (every object read and
verified, the folder untouched), write the intent, apply, one sync, complete, remove the
intent. A rewind, a merge, a sync pull and a session revert all land through it. `finish` rolls
any recorded landing forward from its intent alone: the folder is sealed first (whatever was
written into it after the crash is kept), the landing is re-planned against the folder as it
is, and its completion (a merge's seal and what it tells the log) is made once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tillage.core.models import Entry, EntryFlag, EntryKind
from tillage.core.paths import CONTROL_DIR, ancestors
from tillage.core.progress import ProgressFn
from tillage.core.rewind_plan import Action, Op, plan_actions
from tillage.errors import IntegrityError, TillageError
from tillage.platform import failpoints
from tillage.platform.folders import remove_temp_files
from tillage.store.rows import SnapshotRow
from tillage.workspace import pathindex
from tillage.workspace.attach import Workspace
from tillage.workspace.errors import MergeStoppedError, RewindStoppedError
from tillage.workspace.journal.applier import Applier
from tillage.workspace.journal.intents import pre_trigger, remove_intent, write_intent
from tillage.workspace.nested import spare_nested
from tillage.workspace.pathindex import Row, settled
from tillage.workspace.policy import outside_policy, snapshot_policy
from tillage.workspace.seal import SealOptions, seal_locked
from tillage.workspace.shards import StaleIndexError
from tillage.workspace.thinned import spare_missing
from tillage.workspace.trees import flatten

STAGING_PREFIX = "staging-"
# Snapshots looked through for an interrupted landing's own completion seal (a watcher may
# have sealed after it before the next command came).
RECENT = 50


@dataclass(frozen=True)
class Landed:
    """What a landing wrote (as path-index rows), and the files a concurrent writer changed
    while it ran, kept in the `rescue` snapshot."""

    written: dict[str, Row]
    rescued: tuple[str, ...]
    rescue: str | None
    completed: SnapshotRow | None  # the seal the landing ended with, when it asks for one


def land(
    ws: Workspace,
    current: dict[str, Entry],
    actions: tuple[Action, ...],
    intent: Mapping[str, Any],
    *,
    on_progress: ProgressFn | None = None,
) -> Landed:
    """Turns the folder from `current` (what it holds, as sealed) by `actions`, journaled.

    The caller holds the workspace lock and has sealed the present as `intent["undo"]`. A
    failure part-way is not a crash: this process is alive to say so, so the intent goes (left,
    every later command would retry the same failure) and the error names the way back. The
    completion the intent names (a merge's seal and its fact or event) is made after the writes
    are durable and before the intent is removed.
    """
    op, undo = str(intent.get("op") or "rewind"), str(intent.get("undo", ""))
    # A workspace nested in this one is another's: nothing of it is touched (nested.py).
    actions = spare_nested(ws.root, ws.store, actions)
    applier = Applier(ws, current, on_progress)
    applier.stage(actions)  # a damaged store fails here, the folder untouched
    write_intent(ws, intent)
    failpoints.hit("rewind.after_intent")
    try:
        applier.run(actions)
    except (OSError, TillageError) as exc:
        remove_intent(ws)
        err = stopped(op, exc, undo)
        if applier.rescued:
            with contextlib.suppress(OSError, TillageError):
                err.details["rescue"] = applier.publish_rescue(undo, op)
        if err is exc:
            raise
        raise err from exc
    rescue = applier.publish_rescue(undo, op) if applier.rescued else None
    remember_written(ws, applier.written)
    completed = complete(ws, intent)
    failpoints.hit("rewind.before_intent_removed")
    remove_intent(ws)
    return Landed(applier.written, tuple(sorted(applier.rescued)), rescue, completed)


def remember_written(ws: Workspace, written: dict[str, Row]) -> None:
    """Puts what a landing wrote into the path index (INV-8: files written within the racy
    window are remembered with facts that never match), so the next seal skips reading it."""
    if not written:
        return
    index = pathindex.load(ws.store, ws.id)
    try:
        index.update_files(settled(written))
    except StaleIndexError:
        index = pathindex.PathIndex(files=settled(written))  # what the index held is lost
    pathindex.save(ws.store, ws.id, index)


def moved_since(
    root: Path, expected: Mapping[str, Entry], actions: tuple[Action, ...]
) -> list[str]:
    """The paths a landing would touch that changed since the seal `expected` came from (a
    file's kind, size or mtime; a folder to be removed that gained or lost an entry; a path
    that appeared or went). Looked at right before the intent: a caller that decided on that
    seal lands nothing over an edit made after it."""
    moved: list[str] = []
    for action in actions:
        known = expected.get(action.path)
        try:
            st = os.lstat(root / action.path)
        except FileNotFoundError:
            if known is not None:
                moved.append(action.path)
            continue
        except NotADirectoryError:
            moved.append(action.path)
            continue
        if known is None:
            if action.op is not Op.MAKE_DIR or not stat.S_ISDIR(st.st_mode):
                moved.append(action.path)
            continue
        if known.flags & EntryFlag.SQLITE_IMAGE:
            continue  # sealed as a consistent image, not as the live file's bytes
        if known.kind is EntryKind.DIR:
            same = stat.S_ISDIR(st.st_mode) and (
                action.op is not Op.DELETE or st.st_mtime_ns == known.mtime_ns
            )
        elif known.kind is EntryKind.FILE:
            same = (
                stat.S_ISREG(st.st_mode)
                and st.st_size == known.size
                and st.st_mtime_ns == known.mtime_ns
            )
        else:
            same = stat.S_ISLNK(st.st_mode) if known.kind is EntryKind.SYMLINK else True
        if not same:
            moved.append(action.path)
    return moved


def stopped(op: str, exc: OSError | TillageError, undo: str) -> TillageError:
    """Turns a failure part-way through a landing into a public error naming the way back: a
    rewind keeps a public error's own code, a merge always answers merge.stopped."""
    if op == "merge":
        if isinstance(exc, TillageError) and exc.code == MergeStoppedError.code:
            return exc
        what = exc.message if isinstance(exc, TillageError) else f"{exc.strerror}: {exc.filename}"
        return MergeStoppedError(
            f"the merge stopped part-way: {what}",
            next_step=(
                "fix the cause and merge again; to put the folder back as it was before the "
                f"merge, run `till rewind {undo} --yes`"
            ),
            details={"undo": undo},
        )
    next_step = (
        "fix the cause and rewind again; to go back to how the folder was before, "
        f"run `till rewind {undo} --yes`"
    )
    if isinstance(exc, TillageError):
        exc.message = f"the rewind stopped part-way: {exc.message}"
        exc.next = next_step
        exc.details["undo"] = undo
        return exc
    return RewindStoppedError(
        f"the rewind stopped part-way: {exc.strerror}: {exc.filename}",
        next_step=next_step,
        details={"undo": undo},
    )


# -- completion: the seal and the record a landing ends with --------------------------------


@dataclass(frozen=True)
class Completion:
    """The seal a landing ends with, and the record that tells the log about it (a fact, or an
    appended event, of `kind`, its body given the seal's ID as `result`)."""

    trigger: str
    label: str
    merged_from: str | None
    how: str | None  # "fact", "event" or None (nothing to tell)
    kind: str
    body: Mapping[str, Any]
    # The snapshot whose own tree the seal publishes instead of a walk of the folder (a pull's
    # local twin: an edit made while it landed is the next seal's change, never "synced").
    tree_of: str | None = None
    result_as: str = "result"  # the body's field that names the seal


def completion_of(intent: Mapping[str, Any]) -> Completion | None:
    """The intent's completion. A merge's intent written by an earlier build has no `seal`
    entry: its seal is trigger `merge`, and a fact it tells is `fork_merged`, an event
    `merged`."""
    seal = intent.get("seal")
    if seal is None and intent.get("op") != "merge":
        return None
    seal = seal or {"trigger": "merge"}
    tell = intent.get("tell")
    how = tell.get("how") if isinstance(tell, dict) else None
    default_kind = "fork_merged" if how == "fact" else "merged"
    return Completion(
        trigger=str(seal["trigger"]),
        label=str(seal.get("label", intent.get("label", ""))),
        merged_from=seal.get("merged_from", intent.get("merged_from")),
        how=how,
        kind=str(tell.get("kind", default_kind)) if isinstance(tell, dict) else "",
        body=dict(tell.get("body") or {}) if isinstance(tell, dict) else {},
        tree_of=seal.get("tree_of"),
        result_as=str(tell.get("result_as", "result")) if isinstance(tell, dict) else "result",
    )


def complete(ws: Workspace, intent: Mapping[str, Any]) -> SnapshotRow | None:
    """Seals the landed folder and tells the log, when the intent asks for it."""
    done = completion_of(intent)
    if done is None:
        return None
    options = SealOptions(trigger=done.trigger, label=done.label, merged_from=done.merged_from)
    if done.tree_of is not None:
        row = _publish_tree_of(ws, done.tree_of, options)
    else:
        row = seal_locked(ws, options)
    failpoints.hit("merge.after_seal")  # a merge is the landing that completes with a seal
    _tell(ws, done, row)
    return row


def _publish_tree_of(ws: Workspace, snapshot_id: str, options: SealOptions) -> SnapshotRow:
    """Publishes a snapshot holding exactly `snapshot_id`'s tree, as this workspace's head."""
    from tillage.workspace.seal import publish_tree, snapshot_record

    source = ws.store.snapshot(snapshot_id)
    if source is None:
        raise IntegrityError(f"a landing names unknown snapshot {snapshot_id[:12]}")
    notes = list(snapshot_record(ws.store, source.id).fidelity)
    with ws.store.writer() as writer:
        return publish_tree(
            ws.store,
            ws.id,
            writer,
            bytes.fromhex(source.tree),
            source.files,
            source.bytes,
            notes,
            options,
        )


def _tell(ws: Workspace, done: Completion, row: SnapshotRow) -> None:
    body = {**done.body, done.result_as: row.id}
    if done.how == "fact":
        ws.store.publish(done.kind, body)
    elif done.how == "event":
        from tillage.store.events import announce

        announce(ws.store, ws.id, done.kind, body)


def _told(ws: Workspace, done: Completion, row: SnapshotRow) -> bool:
    """Whether the record telling of seal `row` reached the log after it (a landing killed
    between the two is told by the next command)."""
    if done.how is None:
        return True
    from tillage.store.events import EVENT_RECORD, LogFollower

    for record in LogFollower(ws.store.log, row.seq).records():
        body = record.body
        if done.how == "fact" and record.kind == done.kind and body.get(done.result_as) == row.id:
            return True
        detail = body.get("detail")
        if (
            done.how == "event"
            and record.kind == EVENT_RECORD
            and body.get("kind") == done.kind
            and isinstance(detail, dict)
            and detail.get("result") == row.id
        ):
            return True
    return False


def _completed_already(
    ws: Workspace, intent: Mapping[str, Any], done: Completion
) -> SnapshotRow | None:
    """The interrupted landing's own completion seal, when it was published (it comes after
    the folder is landed and right before its record)."""
    started = int(intent.get("started_ns") or 0)
    for row in ws.store.snapshots(ws.id, limit=RECENT):
        if row.sealed_at_ns < started:
            return None
        if row.trigger == done.trigger and row.label == done.label:
            return row
    return None


# -- finishing what a crash interrupted -------------------------------------------------------


def finish(ws: Workspace, intent: Mapping[str, Any]) -> None:
    """Rolls the recorded landing forward (the caller holds the workspace lock).

    An intent names what the folder must become: a rewind its `target` snapshot within its
    `scopes`, a merge its result `tree` at its exact `paths`. The folder is sealed again first,
    and the interrupted landing's own `undo` still holds the state before it.
    """
    op, undo = str(intent.get("op") or "rewind"), str(intent.get("undo", ""))
    remove_staging(ws.root)
    remove_temp_files(ws.root)
    done = completion_of(intent)
    if done is not None:
        sealed = _completed_already(ws, intent, done)
        if sealed is not None:
            # Killed after its seal: what it tells the log is told now if it was not yet.
            if not _told(ws, done, sealed):
                _tell(ws, done, sealed)
            remove_intent(ws)
            return
    try:
        current, actions = _replan(ws, op, intent, undo)
    except (OSError, TillageError) as exc:
        remove_intent(ws)
        err = stopped(op, exc, undo)
        if err is exc:
            raise
        raise err from exc
    land(ws, current, actions, intent)


def _replan(
    ws: Workspace, op: str, intent: Mapping[str, Any], undo: str
) -> tuple[dict[str, Entry], tuple[Action, ...]]:
    """Seals the folder as it is and plans the landing again against it."""
    paths = intent.get("paths")
    scopes = None if paths is not None else intent.get("scopes")
    exact = [str(p) for p in paths] if paths is not None else None
    live: dict[str, Entry] = {}
    seal_locked(
        ws,
        SealOptions(trigger=pre_trigger(op), label=f"before finishing a {op} (undo {undo[:12]})"),
        manifest_out=live,
        manifest_scopes=exact if exact is not None else scopes,
    )
    if exact is not None:
        result = flatten(ws.store, bytes.fromhex(str(intent["tree"])), exact)
        now, want = along_paths(live, result, exact)
        return now, plan_actions(now, want).actions
    target = ws.store.snapshot(str(intent["target"]))
    if target is None:
        raise IntegrityError(f"an interrupted rewind names unknown snapshot {intent['target']}")
    want = flatten(ws.store, bytes.fromhex(target.tree), scopes)
    live = outside_policy(live, snapshot_policy(ws.store, want))
    want, _missing = spare_missing(ws.store, target.id, live, want)
    return live, plan_actions(live, want, scopes).actions


def along_paths(
    live: Mapping[str, Entry], result: Mapping[str, Entry], paths: list[str]
) -> tuple[dict[str, Entry], dict[str, Entry]]:
    """The two manifests of a landing at exact `paths`: what the folder holds along them (and
    the folders above), and what it must hold (a folder on the way is left as it is)."""
    keys = with_folders(paths)
    now = {k: live[k] for k in keys if k in live}
    want: dict[str, Entry] = {}
    wanted = set(paths)
    for key in keys:
        kept = now.get(key)
        if key not in wanted and kept is not None and kept.kind is EntryKind.DIR:
            want[key] = kept
        elif key in result:
            want[key] = result[key]
    return now, want


def with_folders(paths: list[str] | set[str]) -> set[str]:
    """The paths and every folder above them."""
    out = set(paths)
    for path in paths:
        out.update(ancestors(path))
    return out


def remove_staging(root: Path) -> None:
    """Removes staging folders a rewind of an earlier version left in `.tillage/`."""
    control = root / CONTROL_DIR
    if control.is_dir() and not control.is_symlink():
        for leftover in control.glob(f"{STAGING_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)
