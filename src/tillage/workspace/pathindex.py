"""The path index: what the last seal saw of each file and directory, so the next one can skip
reading what did not change (INV-8), and, with a watcher's changed folders, skip even listing
the folders that did not change. It is a hint, never a fact: losing it costs a full read.

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


Xattrs = tuple[tuple[bytes, bytes], ...]
# What a folder the next seal does not open must contribute to it: (files, bytes below it,
# its own user xattrs, and the stat facts it was captured at: mtime_ns, ctime_ns, ino, dev).
Folder = tuple[int, int, Xattrs, int, int, int, int]
FOLDER_FACTS = 3

FORMAT = 6


@dataclass
class PathIndex:
    """What the last seal saw. `dirs` holds every folder's tree ID and `folders` its summary;
    `notes` the seal's fidelity notes as (path, reason); `links` the folders that held a
    multiply linked file (always visited); `token` names the watcher's view the index reflects
    (None: no watcher vouched for it); `policy` fingerprints the policy it was captured under."""

    files: dict[str, Row] = field(default_factory=dict)
    dirs: dict[str, bytes] = field(default_factory=dict)
    folders: dict[str, Folder] = field(default_factory=dict)
    notes: list[tuple[str, str]] = field(default_factory=list)
    links: frozenset[str] = frozenset()
    token: str | None = None
    policy: bytes = b""


def load(store: Store, workspace_id: str) -> PathIndex:
    """Returns the workspace's path index; an empty one when there is none or it won't load."""
    row = store.conn.execute(
        "SELECT data FROM pathindex WHERE workspace=?", (workspace_id,)
    ).fetchone()
    if row is None:
        return PathIndex()
    try:
        loaded = marshal.loads(zstandard.ZstdDecompressor().decompress(row[0]))
        fmt, files, dirs, folders, notes, links, token, policy = loaded
    except (ValueError, EOFError, TypeError, zstandard.ZstdError):
        return PathIndex()  # damaged, or an older format (which had fewer fields)
    if (
        fmt != FORMAT
        or not isinstance(files, dict)
        or not isinstance(dirs, dict)
        or not isinstance(folders, dict)
        or not isinstance(notes, list)
        or not isinstance(links, frozenset)
        or not isinstance(token, str | None)
        or not isinstance(policy, bytes)
    ):
        return PathIndex()
    return PathIndex(files, dirs, folders, notes, links, token, policy)


def save(store: Store, workspace_id: str, index: PathIndex) -> None:
    """Replaces the workspace's path index."""
    data = zstandard.ZstdCompressor(level=1).compress(
        marshal.dumps(
            (
                FORMAT,
                index.files,
                index.dirs,
                index.folders,
                index.notes,
                index.links,
                index.token,
                index.policy,
            )
        )
    )
    with ix.write_txn(store.conn):
        store.conn.execute(
            "INSERT OR REPLACE INTO pathindex(workspace, data) VALUES (?, ?)", (workspace_id, data)
        )
