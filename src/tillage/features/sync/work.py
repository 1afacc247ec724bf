"""`till work`: a headless run against a remote, for a CI runner or a sandbox with no workspace
of its own. It pulls the input ref's snapshot into a disposable folder, runs a command there,
seals the result as a child of the input snapshot, pushes it to the result ref (even when the
command failed) and removes the folder and its timeline.

The disposable folder is `<tmp>/till-work-<name>-XXXX/<name>` (`<tmp>`: TMPDIR or the system's,
never inside the store, where nothing may be attached), attached to the store at
TILLAGE_HOME like any workspace, so the command may run `till` there. `<name>` (`--name`) is
also what that workspace calls the remote, and appears in the result's label.

The input snapshot is written out (every object checked against its ID first) and published
as the disposable workspace's first snapshot, so the seal after the command has it as its
parent. When this store already knows the input snapshot in another timeline (a snapshot
belongs to one), the seal is published once more with the input as its parent (the same tree,
no new objects): either way the pushed result's parent is the input.

What the result ref held when the run began is recorded as seen, so a run replaces the
previous run's result (which stays in the ref's history); a result another run pushed to the
same ref meanwhile is not replaced (`sync.pull_first`). Different result refs never contend:
each ref has its own head and its own lease.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tillage.errors import TillageError
from tillage.features.sync.errors import RefMissingError
from tillage.features.sync.remotes import RemoteConfig
from tillage.workspace.attach import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from tillage.platform.launch import Launch
    from tillage.store.rows import SnapshotRow
    from tillage.store.store import Store
    from tillage.workspace.seal import SealOptions


@dataclass(frozen=True)
class WorkOutcome:
    """A finished run: the input and result snapshots (IDs), the command's status and output
    (its tail), the kept folder (None once removed) and what the push sent."""

    input: str
    result: str
    exit_code: int
    output: str
    folder: Path | None
    uploaded_objects: int
    uploaded_bytes: int


def work(
    home: Path,
    user_home: Path | None,
    env: Mapping[str, str],
    cwd: str,
    config: RemoteConfig,
    in_ref: str,
    out_ref: str,
    command: tuple[str, ...],
    *,
    keep: bool = False,
    launch: Launch | None = None,
    accept_rollback: bool = False,
) -> WorkOutcome:
    """Runs `command` on the snapshot `in_ref` names and pushes its result to `out_ref` (see
    the module docstring). The command's failure is its status, not an error; a failure of
    the remote or the push is the error, after the folder is removed (unless `keep`)."""
    from tillage.features.sync import engine, seen
    from tillage.features.sync.refs import doc_key
    from tillage.platform.commands import argv_of, run_command
    from tillage.store.store import Store
    from tillage.workspace.seal import SealOptions

    argv_of(command)  # an empty command is refused before anything is made
    store = Store.open(home)
    parent: Path | None = None
    ws: Workspace | None = None
    try:
        with store.sharing():  # INV-14: what is fetched is published before a gc may look
            remote = engine.open_for(config, env, cwd)
            try:
                opened = engine.ensure_config(remote, config.key, create=False)
                # Checked against what this store saw of them (a rolled-back remote is refused).
                key, accept = doc_key(opened), accept_rollback
                found = seen.read(store, remote, key, in_ref, config.url, accept_rollback=accept)
                if found is None:
                    raise RefMissingError(
                        f"nothing was pushed to ref {in_ref!r} of {config.url}",
                        next_step=f"push it first on a machine that has the timeline (`till "
                        f"sync --push --ref {in_ref}` there)",
                    )
                prior = seen.read(store, remote, key, out_ref, config.url, accept_rollback=accept)
                engine.download(store, remote, opened, found.snapshot)
            finally:
                remote.close()
            input_id = found.snapshot
            parent = Path(tempfile.mkdtemp(prefix=f"till-work-{config.name}-", dir=_tmp(env)))
            ws = _prepare(store, home, user_home, parent / config.name, input_id)
        ran = run_command(
            command,
            ws.root,
            # Never the key it could push with (it may be an agent): run_command drops every
            # variable naming it, and the `till` above it holds it in neither argv nor
            # environ (platform/keyhandoff.py).
            env={
                "TILLAGE_WORK_INPUT": input_id,
                "TILLAGE_WORK_REF": in_ref,
                "TILLAGE_WORK_RESULT_REF": out_ref,
            },
            launch=launch,
        )
        text = " ".join(command)
        label = f"work {config.name}: `{text[:60]}{'...' if len(text) > 60 else ''}` exited "
        _seal_on(ws, input_id, SealOptions(trigger="sync", label=f"{label}{ran.exit_code}"))
        if prior is not None:
            # Seen: this run's result replaces the last one (kept in the ref's history).
            ws.store.publish(
                "sync_ref",
                {
                    "workspace": ws.id,
                    "remote": config.name,
                    "ref": out_ref,
                    "snapshot": prior.snapshot,
                    # Not the input: a result equal to the input must still replace another
                    # run's result (a push moves nothing only when the folder holds the ref).
                    "local": prior.snapshot,
                },
            )
        pushed = engine.push(ws, config, env, cwd, out_ref, accept_rollback=accept_rollback)
        return WorkOutcome(
            input=input_id,
            result=pushed.snapshot.id,
            exit_code=ran.exit_code,
            output=ran.output,
            folder=ws.root if keep else None,
            uploaded_objects=pushed.pushed.uploaded_objects,
            uploaded_bytes=pushed.pushed.uploaded_bytes,
        )
    finally:
        try:
            if not keep:
                _remove(ws, parent)
        finally:
            if ws is not None and ws.store is not store:
                ws.store.close()
            store.close()


def _tmp(env: Mapping[str, str]) -> str:
    """Where the disposable folder goes: the caller's TMPDIR, else the system's."""
    folder = env.get("TMPDIR")
    return folder if folder and Path(folder).is_dir() else tempfile.gettempdir()


def _prepare(
    store: Store, home: Path, user_home: Path | None, folder: Path, input_id: str
) -> Workspace:
    """Writes the input snapshot out into `folder` (new), attaches it and makes the input its
    first snapshot (when this store knows it nowhere else), the path index seeded with what was
    written so the seal after the command reads only what the command changed."""
    from tillage.core import codec
    from tillage.workspace import pathindex
    from tillage.workspace.attach import attach
    from tillage.workspace.materialize import materialize

    rows = materialize(store, _row_of(store, input_id), folder)
    ws = attach(home, folder, user_home).workspace
    if ws.store.snapshot(input_id) is None:
        record = codec.decode_snapshot(ws.store.read(bytes.fromhex(input_id)))
        body = {"id": input_id, **codec.snapshot_summary(record)}
        body.update({"workspace": ws.id, "parent": None})  # its parent is not known here
        ws.store.publish("snapshot", body)
    pathindex.save(ws.store, ws.id, pathindex.PathIndex(files=rows))
    return ws


def _row_of(store: Store, snapshot_id: str) -> SnapshotRow:
    """The snapshot as the index knows it, or, for one fetched but not yet published, as its
    own record says (what materialize reads of it: its tree)."""
    from tillage.core import codec
    from tillage.store.rows import SnapshotRow

    row = store.snapshot(snapshot_id)
    if row is not None:
        return row
    record = codec.decode_snapshot(store.read(bytes.fromhex(snapshot_id)))
    return SnapshotRow(
        id=snapshot_id,
        workspace=record.workspace,
        seq=0,
        sealed_at_ns=record.sealed_at_ns,
        trigger=record.trigger,
        label=record.label,
        parent=record.parent,
        tree=record.tree,
        files=record.files,
        bytes=record.bytes,
        grade=record.grade,
        agent=record.agent,
        turn=record.turn,
        session=record.session,
        merged_from=record.merged_from,
        pinned=False,
    )


def _seal_on(ws: Workspace, input_id: str, options: SealOptions) -> SnapshotRow:
    """Seals the folder as a child of the input snapshot: a plain seal when the input is the
    workspace's head, else that seal published once more with the input as its parent."""
    from tillage.workspace.capture import Capture
    from tillage.workspace.locks import workspace_lock
    from tillage.workspace.seal import publish_capture, seal, snapshot_record

    sealed = seal(ws, options)
    if sealed.parent == input_id:
        return sealed
    record = snapshot_record(ws.store, sealed.id)
    capture = Capture(
        root=bytes.fromhex(sealed.tree),
        files=sealed.files,
        total_bytes=sealed.bytes,
        notes=list(record.fidelity),
    )
    with workspace_lock(ws), ws.store.sharing(), ws.store.writer() as writer:
        return publish_capture(ws.store, ws.id, writer, capture, options, input_id)


def _remove(ws: Workspace | None, parent: Path | None) -> None:
    """Drops the disposable workspace's timeline (the pushed result lives on the remote) and
    removes its folder."""
    if ws is not None:
        with contextlib.suppress(OSError, TillageError):  # the run's own answer comes first
            ws.store.publish("forget", {"workspace": ws.id, "purge": True})
    if parent is not None:
        shutil.rmtree(parent, ignore_errors=True)
