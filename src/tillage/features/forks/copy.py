"""Filling a fork's staging folder: a copy of the live workspace (by the fastest driver, its
`.tillage/` and an inner store left out) or a stored snapshot written out, and the fork's
path-index rows, so that its first seal reads only what changed.

A row is seeded for a file whose stat facts equal its row in the parent's path index (as the
last seal left it) before and after its copy (and not racily clean, INV-8), with the copy's own
facts (new inode and ctime): equal facts mean the row's content. A file that changed gets no
row and is read by the fork's first seal.
"""

from __future__ import annotations

import _thread
import os
from collections.abc import Callable
from pathlib import Path

from tillage.core.paths import CONTROL_DIR
from tillage.core.progress import ProgressFn, meter
from tillage.platform import clock
from tillage.platform.clone import CopyStats, copy_tree, probe
from tillage.store.rows import SnapshotRow
from tillage.store.store import Store
from tillage.workspace import nested, pathindex
from tillage.workspace.attach import Workspace
from tillage.workspace.materialize import apply_to_copy
from tillage.workspace.pathindex import (
    FACTS,
    PathIndex,
    Row,
    StaleIndexError,
    is_racy,
    stat_facts,
)
from tillage.workspace.seal import scan_live
from tillage.workspace.trees import flatten

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _store_rel(ws: Workspace) -> str | None:
    """The store's folder relative to the workspace, when it lies inside it."""
    home = ws.store.home.resolve()
    if ws.root in home.parents:
        return home.relative_to(ws.root).as_posix()
    return None


def copy_skip(ws: Workspace) -> Callable[[str], bool]:
    """What a fork's copy leaves out: the workspace's `.tillage/` (the fork gets its own
    pointer), the store's folder when it lies inside the workspace, and the workspaces nested
    in it (workspace/nested.py: another workspace, which a fork of this one does not copy)."""
    store_rel = _store_rel(ws)

    skipped = {CONTROL_DIR} if store_rel is None else {CONTROL_DIR, store_rel}
    skipped |= nested.catalog_roots(ws.store, ws.root)

    def skip(rel: str) -> bool:
        return rel in skipped

    return skip


class Seeder:
    """Collects the fork's path-index rows while the copy runs (see the module docstring)."""

    def __init__(self, parent: PathIndex) -> None:
        self.parent = parent.files
        # What the last seal counted in the whole folder (files, bytes), when it did.
        try:
            self.folder = parent.folders.get("")
        except StaleIndexError:
            self.folder = None
        self.rows: dict[str, Row] = {}
        self.now = clock.files_now_ns()

    def __call__(
        self, rel: str, before: os.stat_result, after: os.stat_result, copy: os.stat_result
    ) -> None:
        try:
            row = self.parent.get(rel)
        except StaleIndexError:
            return  # a shard of the base's index that won't load: the fork's seal reads it
        if row is None or row[FACTS - 1]:
            return  # unknown to the base seal, or a database with sidecars: read it
        facts = stat_facts(before)
        if row[:FACTS] != facts or stat_facts(after) != facts:
            return  # changed since the base seal, or while it was copied
        if is_racy(after.st_mtime_ns, after.st_ctime_ns, self.now):
            return  # INV-8: facts that a later change could leave equal are not trusted
        size, mtime, ctime, ino, dev, mode, aux = stat_facts(copy)
        self.rows[rel] = (size, mtime, ctime, ino, dev, mode, aux, *_content(row))


def _content(row: Row) -> tuple[int, bytes, int, int, tuple[tuple[bytes, bytes], ...]]:
    """What reading the file produced, from a path-index row (after its FACTS)."""
    return row[7], row[8], row[9], row[10], row[11]


def copy_live(
    ws: Workspace, staging: Path, seeder: Seeder, on_progress: ProgressFn | None = None
) -> CopyStats:
    """Copies the live workspace into the new folder `staging` by the fastest driver, its
    `.tillage/` (and an inner store) left out, `seeder` collecting the fork's index rows;
    `on_progress` hears the files copied, toward what the last seal counted."""
    driver = probe(ws.root, staging.parent)
    known = seeder.folder
    tally = meter(on_progress, "copying", known[0], known[1], every=16) if known else None
    on_file: Callable[..., None] = seeder
    if tally is not None:
        lock = _thread.allocate_lock()  # the copy's workers report too

        def on_file(rel: str, before: Any, after: Any, copy: Any) -> None:
            seeder(rel, before, after, copy)
            with lock:
                tally.add(1, int(after.st_size))

    # A reflink is metadata work under the file system's own locks: a worker thread only
    # contends for them (and the GIL) with the base seal running beside the copy, so the walk
    # clones as it goes (XFS, standard workload: 0.38 s a fork against 0.40 s with one worker
    # and 0.52 s with two).
    threads = 0 if driver == "reflink" else 2
    stats = copy_tree(
        ws.root,
        staging,
        skip=copy_skip(ws),
        driver=driver,
        threads=threads,
        on_file=on_file,
        skip_workspaces=True,  # a workspace nested in it is another's (workspace/nested.py)
    )
    if tally is not None:
        tally.done(stats.files, stats.bytes)  # the final numbers, exactly the copy's
    return stats


def materialized_stats(snapshot: SnapshotRow) -> CopyStats:
    """What writing a stored snapshot out copies (its files and bytes, a plain copy)."""
    return CopyStats("copy", snapshot.files, 0, snapshot.bytes)


def match_base(
    store: Store, fork_id: str, staging: Path, base: SnapshotRow, rows: dict[str, Row]
) -> dict[str, Row]:
    """Makes the copy in `staging` exactly its base (issue 21: the fork's record describes its
    own folder). The live copy and the base sealed beside it may see a parent file at
    different moments (an edit landing while the fork is made); left so, merging the untouched
    fork would put the copy's version back over the parent's. The copy is walked with its
    seeded rows (a file whose facts match is not read) and every path that differs from the
    base is written from the store. Saves the fork's path index, and returns its rows."""
    ws = Workspace(fork_id, staging, store)
    pathindex.save(store, fork_id, PathIndex(files=rows))
    copied = scan_live(ws)
    if copied.root == bytes.fromhex(base.tree) or copied.manifest is None:
        return rows  # the common case: the rows saved are the fork's
    want = flatten(store, bytes.fromhex(base.tree))
    current = copied.manifest
    differ = {p for p in current.keys() | want.keys() if current.get(p) != want.get(p)}
    written = apply_to_copy(ws, staging, current, want)
    fixed = {p: r for p, r in rows.items() if p not in differ}
    fixed.update(written)
    pathindex.save(store, fork_id, PathIndex(files=fixed))
    return fixed
