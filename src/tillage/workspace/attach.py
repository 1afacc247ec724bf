"""Attaching a folder and finding it again, even after an agent deleted `.tillage/`.

The folder holds only the pointer `.tillage/workspace.json` (and a `.gitignore` that keeps it out
of `git status`); the store's catalog knows every attached root, so a missing pointer is
recreated rather than the workspace being lost. Nothing is ever written through a `.tillage`
that is a symlink or a file: it could lead into another project.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from tillage.core.paths import CONTROL_DIR
from tillage.errors import NotAttachedError, echo
from tillage.platform.fs import atomic_write_at
from tillage.platform.locks import file_lock
from tillage.platform.names import random_hex
from tillage.store.store import Store
from tillage.workspace.errors import (
    FolderMissingError,
    PointerDamagedError,
    RefusedRootError,
    UnsafeControlDirError,
)

POINTER = "workspace.json"
GITIGNORE = b"# tillage's pointer; not project content\n*\n"


@dataclass
class Workspace:
    """An attached folder and the store that keeps its timeline."""

    id: str
    root: Path
    store: Store


@dataclass(frozen=True)
class Attachment:
    """What attaching found: the workspace, whether it is new, and whether an earlier
    timeline of the same folder (kept by `till forget`) was picked up again."""

    workspace: Workspace
    new: bool
    resumed: bool
    # Snapshots of this folder's timeline taken back from the store's packs: its pointer named
    # a workspace whose records the store's log had lost (store/lost.py).
    recovered: int = 0


def _control_state(root: Path) -> str:
    """Returns "dir", "missing" or "unsafe" for the folder's `.tillage` (never followed)."""
    try:
        st = os.lstat(root / CONTROL_DIR)
    except FileNotFoundError:
        return "missing"
    except NotADirectoryError:
        return "missing"
    return "dir" if stat.S_ISDIR(st.st_mode) else "unsafe"


def _refuse_unsafe(root: Path) -> None:
    path = root / CONTROL_DIR
    kind = "a symlink" if path.is_symlink() else "not a folder"
    raise UnsafeControlDirError(
        f"{path} is {kind}: tillage will not write through it",
        details={"path": str(path)},
    )


def write_pointer(root: Path, workspace_id: str) -> None:
    """Writes `.tillage/` into the folder: the pointer and a .gitignore that hides it from git.

    The control folder is opened without following symlinks, and both files are written
    through its descriptor, so a `.tillage` swapped for a link never redirects a write.
    """
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(CONTROL_DIR, 0o755, dir_fd=root_fd)
        try:
            control_fd = os.open(
                CONTROL_DIR,
                os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=root_fd,
            )
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                _refuse_unsafe(root)
            raise
        try:
            atomic_write_at(control_fd, ".gitignore", GITIGNORE)
            try:
                atomic_write_at(
                    control_fd, POINTER, json.dumps({"workspace": workspace_id}).encode()
                )
            except IsADirectoryError:
                path = root / CONTROL_DIR / POINTER
                raise PointerDamagedError(
                    f"{path} is a folder: tillage will not write its pointer over it",
                    details={"path": str(path)},
                ) from None
        finally:
            os.close(control_fd)
    finally:
        os.close(root_fd)


def _read_pointer(root: Path) -> str | None:
    try:
        fd = os.open(root / CONTROL_DIR / POINTER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _control_state(root) != "dir":
            return None  # a `.tillage` symlink: its pointer belongs to another folder
        doc = json.loads(os.read(fd, 4096))
    except (ValueError, OSError):
        return None  # not JSON, or a folder in its place: no pointer (the catalog knows)
    finally:
        os.close(fd)
    value = doc.get("workspace") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def _within(path: Path, ancestor: Path) -> bool:
    return path == ancestor or ancestor in path.parents


def refusal(folder: Path, home_dir: Path | None, store_home: Path | None) -> str | None:
    """Says why `folder` may not be attached (`/`, a home directory or an ancestor of one, the
    store or a folder inside it or holding it); None when it may."""
    resolved = folder.resolve()
    if resolved == Path(resolved.anchor):
        return "refusing to attach the file-system root"
    if home_dir is not None:
        home = home_dir.resolve()
        if resolved == home or resolved in home.parents:
            return f"refusing to attach {resolved}: it holds your home directory"
    if store_home is not None:
        store = store_home.resolve()
        if _within(resolved, store):
            return f"refusing to attach {resolved}: it is inside tillage's store ({store})"
        if _within(store, resolved):
            return f"refusing to attach {resolved}: it holds tillage's store ({store})"
    return None


def check_attachable(folder: Path, home_dir: Path | None, store_home: Path | None = None) -> None:
    """Refuses `/`, the user's home directory and any ancestor of it, and the store's folder,
    anything inside it and anything holding it (a rewind there would cut other timelines)."""
    reason = refusal(folder, home_dir, store_home)
    if reason is not None:
        raise RefusedRootError(reason)


def require_folder(folder: Path) -> None:
    """Raises folder_missing when `folder` does not exist or is not a folder."""
    if not folder.is_dir():
        what = "does not exist" if not folder.exists() else "is not a folder"
        raise FolderMissingError(f"{echo(str(folder))} {what}")


def attach(home: Path, folder: Path, home_dir: Path | None) -> Attachment:
    """Attaches `folder` (or finds it attached). A folder attached before and forgotten (not
    purged) gets its earlier timeline back."""
    require_folder(folder)
    check_attachable(folder, home_dir, home)
    root = folder.resolve()
    if _control_state(root) == "unsafe":
        _refuse_unsafe(root)
    store = Store.open(home)
    # One attach per folder at a time, across processes and threads: two at once would each
    # find nothing and publish two workspaces for one folder.
    with file_lock(attach_lock(store, root), what="this folder's attachment"):
        found = _find(store, root)
        if found is not None:
            return Attachment(found, new=False, resumed=False)
        earlier = store.forgotten_workspace_by_root(str(root))
        lost = None if earlier is not None else lost_timeline(store, root)
        if earlier is not None:
            workspace_id = earlier.id
        else:
            workspace_id = lost[1] if lost is not None else random_hex(16)
        store.publish("attach", {"workspace": workspace_id, "root": str(root)})
        write_pointer(root, workspace_id)
        recovered = 0
        if lost is not None:
            from tillage.store.lost import republish

            recovered = republish(store, {workspace_id})
    return Attachment(
        Workspace(workspace_id, root, store),
        new=earlier is None and lost is None,
        resumed=earlier is not None or lost is not None,
        recovered=recovered,
    )


def lost_timeline(store: Store, root: Path) -> tuple[int, str] | None:
    """(snapshots, workspace ID) when the folder's pointer names a workspace the store's log
    no longer records at all (a lost or emptied log) whose snapshots its packs still hold;
    None otherwise. Such a folder is taken back, timeline and all, by attaching it."""
    workspace_id = _read_pointer(root)
    if workspace_id is None or store.ever_attached(workspace_id):
        return None
    from tillage.store.lost import lost_snapshots

    found = lost_snapshots(store, {workspace_id})
    return (len(found), workspace_id) if found else None


def attach_lock(store: Store, root: Path) -> Path:
    """The lock file that serialises attaching the folder `root` (held by attach, and by a
    clone while it puts its folder in place and attaches it)."""
    import hashlib

    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:24]
    return store.locks_dir / f"attach-{digest}.lock"


def _find(store: Store, start: Path, *, restore_pointer: bool = True) -> Workspace | None:
    """Finds the attached workspace holding `start`: by pointer walking up, else by catalog
    (which puts a removed pointer back, unless `restore_pointer` is False)."""
    for folder in (start, *start.parents):
        state = _control_state(folder)
        if state == "unsafe":
            if folder == start or store.workspace_by_root(str(folder)) is not None:
                _refuse_unsafe(folder)
            continue
        workspace_id = _read_pointer(folder) if state == "dir" else None
        if workspace_id is not None:
            row = store.workspace(workspace_id)
            if row is not None and row.root == str(folder):
                return Workspace(workspace_id, folder, store)
            if row is not None and not holds_pointer(Path(row.root), workspace_id):
                # The folder was moved (its old root no longer holds this pointer): follow it.
                store.publish("attach", {"workspace": workspace_id, "root": str(folder)})
                return Workspace(workspace_id, folder, store)
            # Otherwise a copy of another workspace, or a pointer the store does not know:
            # fall through to the catalog, which knows the folders really attached.
        row = store.workspace_by_root(str(folder))
        if row is not None:
            # The pointer was removed (e.g. `git clean -fdx`): put it back, unless something
            # that is not a file holds its place (`verify --repair` sets that aside).
            if restore_pointer and not _pointer_blocked(folder):
                write_pointer(folder, row.id)
            return Workspace(row.id, folder, store)
    return None


def _pointer_blocked(root: Path) -> bool:
    """Tells whether a folder (or anything but a file) is where the pointer should be."""
    try:
        return not stat.S_ISREG(os.lstat(root / CONTROL_DIR / POINTER).st_mode)
    except OSError:
        return False


def holds_pointer(root: Path, workspace_id: str) -> bool:
    """Tells whether the folder `root` is the workspace `workspace_id` (its own `.tillage`
    pointer names it; a `.tillage` that is a symlink never counts)."""
    return root.is_dir() and _read_pointer(root) == workspace_id


def reclaim_pointer(root: Path, workspace_id: str, *, restore: bool = True) -> bool:
    """For a folder the caller has proved is the workspace `workspace_id` but whose pointer is
    gone (`git clean -fdx` inside it): puts the pointer back (unless `restore` is False) and
    says yes; a folder whose `.tillage` is a link, or whose pointer names another workspace,
    is not reclaimed."""
    if _control_state(root) == "unsafe" or _read_pointer(root) is not None:
        return False
    if restore:
        write_pointer(root, workspace_id)
    return True


def find_workspace(
    home: Path, folder: Path, store: Store | None = None, *, restore_pointer: bool = True
) -> Workspace | None:
    """Returns the attached workspace holding `folder`, or None (opens no store if none exists).

    A long-lived door (the MCP server) passes the `store` it keeps open, so a call pays no
    store start-up; it stays open either way. A lookup finishes nothing: a command that works
    in the workspace opens it through recovery.open_workspace, which finishes an interrupted
    landing first (INV-7). A removed pointer is put back unless `restore_pointer` is False:
    the watcher, which looks on every seal, must not write into a folder being deleted (`rm
    -rf` of the folder would find `.tillage/` made again and fail, "Directory not empty").
    """
    if not folder.is_dir():
        return None
    if store is None:
        if not Store.exists(home):
            return None
        opened = Store.open(home)
    else:
        opened = store
    root = folder.resolve()
    found = _find(opened, root, restore_pointer=restore_pointer)
    if found is None:
        if store is None:
            opened.close()
        return None
    return found


def _lost_here(home: Path, folder: Path, store: Store | None) -> int | None:
    """How many snapshots of a lost timeline the folder's pointer names (lost_timeline)."""
    if not Store.exists(home):
        return None
    opened = store if store is not None else Store.open(home)
    try:
        root = folder.resolve()
        for candidate in (root, *root.parents):
            if _control_state(candidate) == "dir":
                found = lost_timeline(opened, candidate)
                return None if found is None else found[0]
        return None
    finally:
        if store is None:
            opened.close()


def require_workspace(
    home: Path,
    folder: Path,
    home_dir: Path | None = None,
    store: Store | None = None,
    *,
    restore_pointer: bool = True,
) -> Workspace:
    """Returns the attached workspace holding `folder`; folder_missing when the folder is gone,
    workspace.not_attached otherwise. `store` and `restore_pointer`: see find_workspace."""
    require_folder(folder)
    found = find_workspace(home, folder, store, restore_pointer=restore_pointer)
    if found is None:
        reason = refusal(folder, home_dir, home)
        if reason is not None:
            next_step = "change into a project folder and run `till watch` there"
        else:
            next_step = f"run `till watch` in {folder} to attach it"
        message = f"{folder} is not attached to tillage"
        lost = _lost_here(home, folder, store) if reason is None else None
        if lost is not None:
            message += (
                f": the store's log no longer records it, but its packs still hold {lost} "
                "snapshots of its timeline"
            )
            next_step = f"run `till watch` in {folder} to take its timeline back"
        raise NotAttachedError(message, next_step=next_step)
    return found
