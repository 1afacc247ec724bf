"""A clone in progress, recorded so that a kill at any step leaves a finished clone or nothing.

`till clone` writes `intents/clone-<workspace>.json` in the store before it makes anything,
builds the folder in a hidden staging folder (TEMP_MARK in its name: no seal or watcher of an
outer workspace ever takes it), and records everything the new workspace is (its first
snapshots, its remote, its sync fact) under a workspace ID no folder is attached as yet. Then
it rewrites the intent as `committed`: the commit point. Only after it does the folder reach
its place (one rename, or, into an existing empty folder, its entries moved in with `.tillage/`
first) and the workspace get attached, at that final path.

The next clone, `till watch` or any command in a workspace finishes what a killed one left
(`finish_clones`): a committed clone is rolled forward (moved into place and attached), any
other is rolled back (its staging folder, the folders it made on the way, its remote entry and
the intent removed: the destination is as it was). A clone still running holds its maker lock
and is left alone.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from dataclasses import dataclass
from pathlib import Path

from tillage.errors import BusyError
from tillage.features.sync import remotes
from tillage.platform import failpoints
from tillage.platform.clone import rename_noreplace
from tillage.platform.folders import remove_folder
from tillage.platform.fs import TEMP_MARK, atomic_write, fsync_dir
from tillage.platform.locks import file_lock, is_held
from tillage.store.store import Store
from tillage.workspace.attach import attach_lock, holds_pointer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

PREFIX = "clone-"
STAGING_MARK = f"{TEMP_MARK}clone-"
NAME_KEPT = 64  # of the destination's name in its staging name (the whole stays < 255)
CONTROL = ".tillage"


@dataclass(frozen=True)
class CloneIntent:
    """What a clone in progress will make: the workspace ID, its final folder, where it is
    built, the folders made on the way there (deepest last), whether the destination was an
    empty folder already, and what was cloned (a retry of the same clone is told it is done)."""

    workspace: str
    root: Path
    staging: Path
    made: tuple[str, ...]
    into_existing: bool
    url: str
    ref: str
    committed: bool = False

    def doc(self) -> dict[str, object]:
        return {
            "workspace": self.workspace,
            "root": str(self.root),
            "staging": str(self.staging),
            "made": list(self.made),
            "into_existing": self.into_existing,
            "url": self.url,
            "ref": self.ref,
            "committed": self.committed,
            "pid": os.getpid(),
        }


def staging_for(root: Path, workspace_id: str, *, into_existing: bool) -> Path:
    """Where the clone is built: beside its destination, or inside it when the destination is
    an empty folder already (the same file system even when it is a mount point)."""
    name = f".{root.name[:NAME_KEPT]}{STAGING_MARK}{workspace_id}"
    return root / name if into_existing else root.parent / name


def intent_path(store: Store, workspace_id: str) -> Path:
    return store.intents_dir / f"{PREFIX}{workspace_id}.json"


def maker_lock(store: Store, workspace_id: str) -> Path:
    """Held by the process making the clone, for as long as it runs."""
    return store.locks_dir / f"clone-{workspace_id}.lock"


def write(store: Store, intent: CloneIntent) -> None:
    """Records the intent durably (the first write, and the commit point)."""
    store.intents_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(intent_path(store, intent.workspace), json.dumps(intent.doc()).encode())


def read(path: Path) -> CloneIntent | None:
    """The intent in `path`; None when it is torn (written atomically: never acted on)."""
    try:
        doc = json.loads(path.read_bytes())
        return CloneIntent(
            str(doc["workspace"]),
            Path(doc["root"]),
            Path(doc["staging"]),
            tuple(str(m) for m in doc["made"]),
            bool(doc["into_existing"]),
            str(doc["url"]),
            str(doc["ref"]),
            bool(doc["committed"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def place(store: Store, intent: CloneIntent) -> bool:
    """Moves a committed clone into its place and attaches it there (the roll-forward, and the
    clone's own last steps): idempotent, so a kill anywhere in it is finished the same way.
    Under the folder's attach lock; False, with nothing moved, when the place was taken
    meanwhile (a `till watch` there, a file put into the empty folder): the caller undoes it."""
    staging, root = intent.staging, intent.root
    with file_lock(attach_lock(store, root), what="this folder's attachment"):
        if store.workspace(intent.workspace) is not None:
            return True
        if _taken(store, intent):
            return False
        if os.path.lexists(staging):
            if intent.into_existing:
                _move_entries(staging, root)
            else:
                rename_noreplace(staging, root)
                fsync_dir(root.parent)
        if not holds_pointer(root, intent.workspace):
            return False
        gone = store.workspace_by_root(str(root))
        if gone is not None and gone.id != intent.workspace:
            # A workspace whose folder was deleted: the clone takes its place, and its
            # timeline is kept as `till forget` keeps one.
            store.publish("forget", {"workspace": gone.id, "purge": False})
        store.publish("attach", {"workspace": intent.workspace, "root": str(root)})
    return True


def _taken(store: Store, intent: CloneIntent) -> bool:
    """Tells whether the clone's place holds something else now (the clone's own pointer not
    there yet): anything at a new destination, or in an empty one anything but its staging
    folder, or another workspace attached there."""
    if holds_pointer(intent.root, intent.workspace):
        return False  # its own: renamed, or moved in part (`.tillage/` goes first)
    if not intent.into_existing:
        return os.path.lexists(intent.root)  # (a workspace recorded there lost its folder)
    row = store.workspace_by_root(str(intent.root))
    if row is not None and row.id != intent.workspace:
        return True
    try:
        return set(os.listdir(intent.root)) != {intent.staging.name}
    except OSError:
        return True  # the folder it was to fill is gone


def _move_entries(staging: Path, root: Path) -> None:
    """Moves what the staging folder inside `root` holds up into `root`, `.tillage/` first:
    from the first move on, `root` is a workspace of its own to an outer one's seals."""
    names = sorted(os.listdir(staging), key=lambda n: n != CONTROL)
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            rename_noreplace(staging / name, root / name)
        failpoints.hit("clone.mid_move")
    os.rmdir(staging)
    fsync_dir(root)


def undo(store: Store, intent: CloneIntent) -> None:
    """Removes what an uncommitted clone made: its staging folder, the folders it made on the
    way (when still empty), its remote entry, its timeline (purged: a seal killed before it
    published leaves a snapshot in a pack that no log line names, which `verify` would
    otherwise report as a lost timeline). The destination is left as it was."""
    if os.path.lexists(intent.staging) and STAGING_MARK in intent.staging.name:
        remove_folder(intent.staging, durable=True)
    for made in reversed(intent.made):
        try:
            os.rmdir(made)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
                raise
            break  # something else is in it now: it stays, and so do the folders above
    remotes.forget_remotes(store, intent.workspace)
    store.publish("forget", {"workspace": intent.workspace, "purge": True})


def finish_clones(store: Store) -> list[CloneIntent]:
    """Finishes what killed clones left (see the module docstring); returns those rolled
    forward. Costs one listing of the intents folder when there is none."""
    finished: list[CloneIntent] = []
    for path in _intents(store):
        workspace_id = path.name[len(PREFIX) : -len(".json")]
        lock = maker_lock(store, workspace_id)
        if is_held(lock):
            continue  # a clone still being made
        try:
            with file_lock(lock, timeout=0, what="a clone being made"):
                intent = read(path)
                if intent is None:
                    path.unlink(missing_ok=True)
                elif intent.committed:
                    if place(store, intent):
                        finished.append(intent)
                    else:
                        undo(store, intent)  # its place was taken meanwhile: nothing is made
                    path.unlink(missing_ok=True)
                else:
                    undo(store, intent)
                    path.unlink(missing_ok=True)
        except BusyError:
            continue
    return finished


def _intents(store: Store) -> Iterator[Path]:
    try:
        names = os.listdir(store.intents_dir)
    except FileNotFoundError:
        return
    for name in sorted(names):
        # A folder in an intent's place is `verify`'s to report (store/controls.py).
        path = store.intents_dir / name
        if name.startswith(PREFIX) and name.endswith(".json") and path.is_file():
            yield path
