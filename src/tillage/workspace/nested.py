"""Nested workspaces: a folder inside a workspace that is itself a workspace is not the outer's.

The rule is git's for a nested repository. A folder below the root that holds its own
`.tillage/` folder, or that the store's catalog records as an attached workspace's root, is
another workspace; the outer's seals stop at it as at a path its policy excludes. Its content
is never captured, never written, moved or deleted by the outer's rewinds, merges and pulls,
never copied into the outer's forks, and its events are not the outer's watcher's. A
`.tillage` below the root is never written by the outer either: an old snapshot that captured
an inner pointer (before this rule) does not bring it back, so restoring it cannot make a copy
pose as the inner workspace.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tillage.core.models import Entry, EntryKind
from tillage.core.paths import CONTROL_DIR
from tillage.core.rewind_plan import Action, Op
from tillage.store.store import Store

__all__ = [
    "catalog_roots",
    "holds_control_dir",
    "inside_control_dir",
    "outside_nested",
    "spare_nested",
]


def holds_control_dir(dir_fd: int, name: str | None = None) -> bool:
    """Tells whether the folder `name` below `dir_fd` (or `dir_fd` itself) holds a `.tillage`
    folder (never followed: a `.tillage` that is a link is no workspace's)."""
    where = CONTROL_DIR if name is None else os.path.join(name, CONTROL_DIR)
    try:
        st = os.stat(where, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode)


def catalog_roots(store: Store, root: Path) -> frozenset[str]:
    """The roots of the attached workspaces the catalog records below `root`, relative to it."""
    prefix = str(root).rstrip("/") + "/"
    # '0' sorts just after '/': the range is every path that starts with the prefix.
    rows = store.conn.execute(
        "SELECT root FROM workspaces WHERE forgotten=0 AND root > ? AND root < ?",
        (prefix, prefix[:-1] + "0"),
    ).fetchall()
    return frozenset(str(r[0])[len(prefix) :] for r in rows if str(r[0]).startswith(prefix))


def inside_control_dir(path: str) -> bool:
    """Tells whether a workspace path is, or lies inside, a `.tillage` folder."""
    return CONTROL_DIR in path.split("/")


def outside_nested(root: Path, store: Store, want: Mapping[str, Entry]) -> dict[str, Entry]:
    """A target manifest without what lies at or below a workspace nested in the folder at
    `root` now (by the catalog or its `.tillage/`), and without any `.tillage` below the root:
    what a rewind plans, and so what its dry run lists, is what it will do."""
    roots = catalog_roots(store, root)
    dropped: set[str] = set()
    kept: dict[str, Entry] = {}
    for path in sorted(want, key=lambda p: p.count("/")):  # parents before children
        parent = path.rpartition("/")[0]
        if parent in dropped or inside_control_dir(path):
            dropped.add(path)
            continue
        entry = want[path]
        if entry.kind is EntryKind.DIR and (path in roots or _holds(root / path)):
            dropped.add(path)
            continue
        kept[path] = entry
    return kept


def _holds(folder: Path) -> bool:
    st = _lstat(folder / CONTROL_DIR)
    return st is not None and stat.S_ISDIR(st.st_mode)


def spare_nested(
    root: Path, store: Store, actions: Sequence[Action], known: Iterable[str] = ()
) -> tuple[Action, ...]:
    """The planned actions without those that would touch another workspace nested in the
    folder at `root`: at or below a nested root (by the catalog, `known`, or a `.tillage`
    folder there now), or inside any `.tillage` below the root. A folder above a nested root
    that the plan deletes is emptied but kept (the applier spares what holds a workspace)."""
    roots = set(catalog_roots(store, root)) | set(known)
    seen: dict[str, bool] = {}
    below: dict[str, bool] = {"": False}  # folder -> it, or a folder above it, is nested

    def nested(rel: str) -> bool:
        answer = seen.get(rel)
        if answer is None:
            answer = rel in roots or _holds(root / rel)
            seen[rel] = answer
        return answer

    def inside(folder: str) -> bool:
        chain = []
        while folder not in below:
            chain.append(folder)
            folder = folder.rpartition("/")[0]
        answer = below[folder]
        for step in reversed(chain):  # outermost first
            answer = answer or nested(step)
            below[step] = answer
        return answer

    spared: set[str] = set()
    kept: list[Action] = []
    for action in actions:
        path = action.path
        if inside_control_dir(path) or inside(path.rpartition("/")[0]) or path in spared:
            continue
        entry = action.entry
        is_dir = action.op is Op.MAKE_DIR or (entry is not None and entry.kind is EntryKind.DIR)
        if is_dir and action.op is not Op.WRITE and nested(path):
            spared.add(path)  # the nested root itself: not deleted, remade or touched
            continue
        if action.op is Op.WRITE and any(r.startswith(path + "/") for r in roots):
            continue  # a file over a folder that holds a workspace: the folder stays
        kept.append(action)
    return tuple(kept)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None
