"""The path index: what the last seal saw of each file and directory, so the next one can skip
reading what did not change (INV-8). It is a hint, never a fact: losing it costs a full read.

Stored as one marshal blob per workspace in the advisory index, because a seal loads all of it
at once and must do so in a few milliseconds; a blob that does not load is treated as empty.
"""

from __future__ import annotations

import marshal
import os
from dataclasses import dataclass, field

import zstandard

from tillage.store import index as ix
from tillage.store.store import Store

# (size, mtime_ns, ctime_ns, ino, dev, mode, aux,        <- FACTS: what a stat tells
#  content_kind, content, flags, content_size, xattrs)   <- what reading the file produced
# `aux` holds the facts of a SQLite database's sidecar files.
Row = tuple[
    int, int, int, int, int, int, str, int, bytes, int, int, tuple[tuple[bytes, bytes], ...]
]
FACTS = 7
Facts = tuple[int, int, int, int, int, int, str]


def stat_facts(st: os.stat_result, aux: str = "") -> Facts:
    """What a stat tells of a file, in a row's FACTS order: equal facts mean an unchanged file
    (unless it was racily clean, INV-8)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev, st.st_mode, aux)


FORMAT = 5


@dataclass
class PathIndex:
    files: dict[str, Row] = field(default_factory=dict)
    dirs: dict[str, bytes] = field(default_factory=dict)


def load(store: Store, workspace_id: str) -> PathIndex:
    """Returns the workspace's path index; an empty one when there is none or it won't load."""
    row = store.conn.execute(
        "SELECT data FROM pathindex WHERE workspace=?", (workspace_id,)
    ).fetchone()
    if row is None:
        return PathIndex()
    try:
        fmt, files, dirs = marshal.loads(zstandard.ZstdDecompressor().decompress(row[0]))
    except (ValueError, EOFError, TypeError, zstandard.ZstdError):
        return PathIndex()
    if fmt != FORMAT or not isinstance(files, dict) or not isinstance(dirs, dict):
        return PathIndex()
    return PathIndex(files, dirs)


def save(store: Store, workspace_id: str, index: PathIndex) -> None:
    """Replaces the workspace's path index."""
    data = zstandard.ZstdCompressor(level=1).compress(
        marshal.dumps((FORMAT, index.files, index.dirs))
    )
    with ix.write_txn(store.conn):
        store.conn.execute(
            "INSERT OR REPLACE INTO pathindex(workspace, data) VALUES (?, ?)", (workspace_id, data)
        )
