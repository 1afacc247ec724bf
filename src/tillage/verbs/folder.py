"""What `till status` says of the folder itself, not only of its head: how many paths differ
from the head, which snapshot it is at, and whether a rewind put it there.

Status is the most-called command, so the folder is looked at only when that is cheap: with a
watcher that vouches for what changed since the last seal, only those folders are listed; with
none, a folder whose head holds at most WALK_MAX files is walked whole (a stat walk: a file is
read only when its stat facts changed; 1,000 files cost about 10 ms); a larger one is "not
checked", and `till diff head` is the command that compares it. Past WATCHED_MAX files even a
watched folder is not checked: the path index a delta walk starts from is read whole (20,000
files cost about 38 ms, 1,000 about 2 ms: bench/status_folder.py). Paths are counted as
`till diff head` lists them, reading only the folders whose trees differ from the head's.
"""

from __future__ import annotations

from dataclasses import dataclass

from tillage.errors import TillageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.store.rows import SnapshotRow

WALK_MAX = 1_000
WATCHED_MAX = 10_000  # with a watcher: its path index is read whole on every status


@dataclass(frozen=True)
class FolderInfo:
    """The folder as it is now. `checked`: whether it was looked at (`how`: "watcher", only
    what the watcher saw change, or "walk", all of it; `note` says why not). `differs`: the
    paths that differ from the head, as `till diff head` lists them (0: the folder is the
    head; null when not checked or not counted). `at`: the newest snapshot of this timeline
    the folder equals whole (null when it equals none, or was not checked). `rewound_at`:
    when the rewind that put the folder at `at` ran (RFC 3339; null when no rewind did, or
    the folder changed since)."""

    checked: bool
    how: str | None
    differs: int | None
    at: str | None
    rewound_at: str | None
    note: str | None


def folder_info(ws: Any, head: SnapshotRow | None) -> FolderInfo:
    """The folder compared with `head`, as cheaply as the module's docstring says."""
    if head is None:
        return FolderInfo(False, None, None, None, None, "no snapshot yet")
    from tillage.workspace.watchstate import scan_is_bounded

    scanned = None
    if scan_is_bounded(ws, head.files, walk_max=WALK_MAX, watched_max=WATCHED_MAX):
        from tillage.workspace.seal import scan_bounded

        scanned = scan_bounded(ws, walk_max=WALK_MAX, watched_max=WATCHED_MAX)
    if scanned is None:
        why = (
            f"not checked: {'' if head.files > WATCHED_MAX else 'no watcher, and '}the folder "
            f"held {head.files:,} files at the last seal (`till diff head` compares it)"
        )
        return FolderInfo(False, None, None, None, None, why)
    capture, vouched = scanned
    root = capture.root.hex()
    differs = 0 if root == head.tree else _count(ws.store, bytes.fromhex(head.tree), capture.root)
    at, rewound = _at(ws.store, ws.id, root)
    note = None if differs is not None else "differs from the head (not counted)"
    return FolderInfo(True, "watcher" if vouched else "walk", differs, at, rewound, note)


def _count(store: Any, old: bytes, new: bytes) -> int | None:
    """How many paths differ from tree `old` to tree `new` (as `till diff` lists them): only
    the folders whose trees differ are read, from the walk's trees or the store; None when a
    tree is in neither (a cache that let it go)."""
    from tillage.core import codec
    from tillage.core.models import Entry
    from tillage.core.treediff import diff_entry
    from tillage.core.treewalk import walk
    from tillage.workspace.trees import TREES

    def read(tid: bytes) -> tuple[Entry, ...] | list[Entry]:
        return TREES.get(tid) or codec.decode_tree(store.read(tid))

    try:
        return sum(diff_entry(path, a, b) is not None for path, (a, b) in walk(read, (old, new)))
    except (KeyError, TillageError):
        return None


def _at(store: Any, workspace: str, tree: str) -> tuple[str | None, str | None]:
    """The snapshot the folder (its tree `tree`) is at, and when a rewind put it there: a
    rewind is the newest `pre_rewind` seal when every snapshot published after it holds the
    folder as it is now (the watcher resealing the rewound state changes nothing), and then
    the snapshot it is at is the newest before that rewind with this tree (its target)."""
    from tillage.platform.clock import rfc3339

    conn = store.conn
    last = conn.execute(
        "SELECT seq, sealed_at_ns, tree FROM snapshots WHERE workspace=? AND trigger='pre_rewind' "
        "ORDER BY seq DESC LIMIT 1",
        (workspace,),
    ).fetchone()
    if last is not None and last[2] != tree:
        since = conn.execute(
            "SELECT COUNT(*) FROM snapshots WHERE workspace=? AND seq > ? AND tree != ?",
            (workspace, last[0], tree),
        ).fetchone()[0]
        if not since:
            target = conn.execute(
                "SELECT id FROM snapshots WHERE workspace=? AND seq < ? AND tree=? "
                "ORDER BY seq DESC LIMIT 1",
                (workspace, last[0], tree),
            ).fetchone()
            if target is not None:
                return target[0], rfc3339(last[1])
    found = conn.execute(
        "SELECT id FROM snapshots WHERE workspace=? AND tree=? ORDER BY seq DESC LIMIT 1",
        (workspace, tree),
    ).fetchone()
    return (found[0] if found else None), None
