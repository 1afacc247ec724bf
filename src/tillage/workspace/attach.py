"""Attaching a folder and finding it again, even after an agent deleted `.tillage/`.

The folder holds only the pointer `.tillage/workspace.json` (and a `.gitignore` that keeps it out
of `git status`); the store's catalog knows every attached root, so a missing pointer is
recreated rather than the workspace being lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tillage.core.paths import CONTROL_DIR
from tillage.errors import NotAttachedError
from tillage.platform.fs import atomic_write
from tillage.platform.names import random_hex
from tillage.store.store import Store
from tillage.workspace.errors import FolderMissingError, RefusedRootError

POINTER = "workspace.json"


@dataclass
class Workspace:
    """An attached folder and the store that keeps its timeline."""

    id: str
    root: Path
    store: Store


def _pointer(root: Path) -> Path:
    return root / CONTROL_DIR / POINTER


def write_pointer(root: Path, workspace_id: str) -> None:
    """Writes `.tillage/` into the folder: the pointer and a .gitignore that hides it from git."""
    control = root / CONTROL_DIR
    control.mkdir(exist_ok=True)
    atomic_write(control / ".gitignore", b"# tillage's pointer; not project content\n*\n")
    atomic_write(_pointer(root), json.dumps({"workspace": workspace_id}).encode() + b"\n")


def _read_pointer(root: Path) -> str | None:
    try:
        doc = json.loads(_pointer(root).read_bytes())
    except (OSError, ValueError):
        return None
    value = doc.get("workspace") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def check_attachable(folder: Path, home_dir: Path | None) -> None:
    """Refuses `/`, the user's home directory and any ancestor of it."""
    resolved = folder.resolve()
    if resolved == Path(resolved.anchor):
        raise RefusedRootError("refusing to attach the file-system root")
    if home_dir is not None:
        home = home_dir.resolve()
        if resolved == home or resolved in home.parents:
            raise RefusedRootError(f"refusing to attach {resolved}: it holds your home directory")


def attach(home: Path, folder: Path, home_dir: Path | None) -> tuple[Workspace, bool]:
    """Attaches `folder` (or finds it attached); returns the workspace and whether it is new."""
    if not folder.is_dir():
        raise FolderMissingError(f"{folder} is not a folder")
    check_attachable(folder, home_dir)
    root = folder.resolve()
    store = Store.open(home)
    found = _find(store, root)
    if found is not None:
        return found, False
    workspace_id = random_hex(16)
    store.publish("attach", {"workspace": workspace_id, "root": str(root)})
    write_pointer(root, workspace_id)
    return Workspace(workspace_id, root, store), True


def _find(store: Store, start: Path) -> Workspace | None:
    """Finds the attached workspace holding `start`: by pointer walking up, else by catalog."""
    for folder in (start, *start.parents):
        workspace_id = _read_pointer(folder)
        if workspace_id is not None and store.workspace(workspace_id) is not None:
            return Workspace(workspace_id, folder, store)
        row = store.workspace_by_root(str(folder))
        if row is not None:
            # The pointer was removed (e.g. `git clean -fdx`): put it back.
            write_pointer(folder, row.id)
            return Workspace(row.id, folder, store)
    return None


def find_workspace(home: Path, folder: Path) -> Workspace | None:
    """Returns the attached workspace holding `folder`, or None (opens no store if none exists)."""
    if not Store.exists(home) or not folder.is_dir():
        return None
    root = folder.resolve()
    store = Store.open(home)
    found = _find(store, root)
    if found is None:
        store.close()
        return None
    from tillage.workspace.recovery import recover_if_interrupted

    recover_if_interrupted(found)
    return found


def require_workspace(home: Path, folder: Path) -> Workspace:
    """Returns the attached workspace holding `folder`; workspace.not_attached otherwise."""
    found = find_workspace(home, folder)
    if found is None:
        raise NotAttachedError(
            f"{folder} is not attached to tillage",
            next_step=f"run `till watch` in {folder} to attach it",
        )
    return found
