"""The path index: what the last seal saw of each file and directory, so the next one can skip
reading what did not change (INV-8), and, with a watcher's changed folders, skip even listing
the folders that did not change. It is a hint, never a fact: losing it costs a full read.

Stored in the advisory index as a header row (token, policy, notes, links, and the generation
each shard was written at) and SHARDS marshal blobs grouped by parent folder, so a seal that
listed a few folders writes a few shards, not the whole index. Any part that does not load, or
a header of another format or shard count, makes the whole index empty: a full read follows.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import threading
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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

FORMAT = 7
# The index is stored in SHARDS rows, an entry in the one of its parent folder (a stable hash),
# so a seal that listed a few folders rewrites only their shards. At 1M files the whole index
# compresses to about 110 MiB: 4096 shards keep one near 27 KiB, and a one-file change (its
# folder and the folders above it) writes a few of them.
SHARDS = 4096


def shard_of(folder: str) -> int:
    """The shard that holds the entries whose parent folder is `folder` (stable across runs)."""
    return zlib.crc32(folder.encode("utf-8", "surrogateescape")) % SHARDS


def shard_of_path(path: str) -> int:
    """The shard that holds the entry at `path` (its parent folder's; the root's own is "")."""
    return shard_of(path.rpartition("/")[0])


@dataclass
class PathIndex:
    """What the last seal saw. `dirs` holds every folder's tree ID and `folders` its summary;
    `notes` the seal's fidelity notes as (path, reason); `links` the folders that held a
    multiply linked file (always visited); `token` names the watcher's view the index reflects
    (None: no watcher vouched for it); `policy` fingerprints the policy it was captured under.

    `dirty` names the shards that changed since the index was loaded (None: all of them, as
    for an index made anew); `generation` is the stored header's it was loaded from (0: none);
    `stamp` is unique to each stored header (a rebuilt index restarts the generations);
    `exact` tells that every file's folder is in `dirs`, so that a folder gone from `dirs`
    names every shard a removal touched."""

    files: dict[str, Row] = field(default_factory=dict)
    dirs: dict[str, bytes] = field(default_factory=dict)
    folders: dict[str, Folder] = field(default_factory=dict)
    notes: list[tuple[str, str]] = field(default_factory=list)
    links: frozenset[str] = frozenset()
    token: str | None = None
    policy: bytes = b""
    dirty: set[int] | None = field(default=None, compare=False)
    generation: int = field(default=0, compare=False)
    stamp: bytes = field(default=b"", compare=False)
    exact: bool = field(default=False, compare=False)
    shards: dict[int, int] = field(default_factory=dict, compare=False, repr=False)
    # Set by a seal: the folders whose entries it made anew (or found gone), and the keys of
    # the rows, dirs and folders it made; a dirty shard is then its stored self less those
    # folders' entries plus those keys, with no pass over the whole index.
    delta: tuple[set[str], tuple[list[str], list[str], list[str]]] | None = field(
        default=None, compare=False, repr=False
    )
    # Each folder's entries (the keys of its files and folders), built when first asked for.
    kids: dict[str, list[str]] | None = field(default=None, compare=False, repr=False)

    def update_files(self, rows: Mapping[str, Row]) -> None:
        """Puts `rows` in, marking their shards dirty."""
        self.files.update(rows)
        self.kids = None
        if self.dirty is not None:
            self.dirty.update(shard_of_path(p) for p in rows)
        self.exact = self.exact and all(p.rpartition("/")[0] in self.dirs for p in rows)


def _header(data: bytes) -> tuple[Any, ...] | None:
    """The stored header's fields, or None when it is damaged or of another format."""
    try:
        fields = marshal.loads(zstandard.ZstdDecompressor().decompress(data))
    except (ValueError, EOFError, TypeError, zstandard.ZstdError):
        return None
    if not isinstance(fields, tuple) or len(fields) != 10 or fields[0] != FORMAT:
        return None  # an older format (FORMAT 6 was one blob of 8 fields): read in full once
    _fmt, count, generation, shards, notes, links, token, policy, exact, stamp = fields
    if (
        count != SHARDS
        or not isinstance(stamp, bytes)
        or not isinstance(generation, int)
        or not isinstance(shards, dict)
        or not isinstance(notes, list)
        or not isinstance(links, frozenset)
        or not isinstance(token, str | None)
        or not isinstance(policy, bytes)
        or not isinstance(exact, bool)
    ):
        return None
    return fields


# The last index each of a few workspaces loaded or saved in this process, by its header's
# stamp: a long-lived process (the watcher's daemon, which serves `till snap`) then reads only
# the header while no other process wrote the index, instead of every shard.
_CACHE: dict[tuple[str, str], PathIndex] = {}
_CACHED = 4
_CACHE_LOCK = threading.Lock()  # the daemon seals on one thread and serves `snap` on others


def _copy(index: PathIndex) -> PathIndex:
    """A copy whose tables can be changed without changing `index`'s."""
    return PathIndex(
        dict(index.files),
        dict(index.dirs),
        dict(index.folders),
        list(index.notes),
        index.links,
        index.token,
        index.policy,
        None if index.dirty is None else set(index.dirty),
        index.generation,
        index.stamp,
        index.exact,
        dict(index.shards),
        None,
        None if index.kids is None else dict(index.kids),
    )


def children(index: PathIndex) -> dict[str, list[str]]:
    """The keys of each folder's entries in `index` (files and folders), by folder; the lists
    are never changed once made (copies of the index share them)."""
    if index.kids is None:
        kids: dict[str, list[str]] = {}
        for table in (index.files, index.dirs):
            for path in table:
                if path:
                    kids.setdefault(path.rpartition("/")[0], []).append(path)
        index.kids = kids
    return index.kids


def _remember(store: Store, workspace_id: str, index: PathIndex) -> None:
    key, kept = (str(store.index_path), workspace_id), _copy(index)
    with _CACHE_LOCK:
        _CACHE.pop(key, None)
        while len(_CACHE) >= _CACHED:
            del _CACHE[next(iter(_CACHE))]
        _CACHE[key] = kept


def load(store: Store, workspace_id: str) -> PathIndex:
    """Returns the workspace's path index; an empty one when there is none or any part of it
    won't load (a hint, never a fact: a full read follows, never a wrong answer)."""
    conn = store.conn
    row = conn.execute("SELECT data FROM pathindex WHERE workspace=?", (workspace_id,)).fetchone()
    fields = None if row is None else _header(row[0])
    if fields is None:
        return PathIndex()
    _fmt, _count, generation, shards, notes, links, token, policy, exact, stamp = fields
    with _CACHE_LOCK:
        cached = _CACHE.get((str(store.index_path), workspace_id))
        if cached is not None and cached.stamp == stamp and cached.generation == generation:
            index = _copy(cached)
            index.dirty = set()
            return index
    index = PathIndex(
        notes=notes,
        links=links,
        token=token,
        policy=policy,
        dirty=set(),
        generation=generation,
        stamp=stamp,
        exact=exact,
        shards=shards,
    )
    seen = 0
    decompress = zstandard.ZstdDecompressor().decompress
    for shard, data in conn.execute(
        "SELECT shard, data FROM pathshards WHERE workspace=?", (workspace_id,)
    ):
        try:
            part = marshal.loads(decompress(data))
            fmt, number, written, files, dirs, folders = part
        except (ValueError, EOFError, TypeError, zstandard.ZstdError):
            return PathIndex()
        if (
            fmt != FORMAT
            or number != shard
            or shards.get(shard) != written
            or not isinstance(files, dict)
            or not isinstance(dirs, dict)
            or not isinstance(folders, dict)
        ):
            return PathIndex()
        index.files.update(files)
        index.dirs.update(dirs)
        index.folders.update(folders)
        seen += 1
    if seen != len(shards):
        return PathIndex()  # a shard the header names is missing
    _remember(store, workspace_id, index)
    return index


_Part = tuple[dict[str, Row], dict[str, bytes], dict[str, Folder]]


def _parts(index: PathIndex, wanted: set[int] | None) -> tuple[dict[int, _Part], bool]:
    """The entries of the `wanted` shards (all: None), and whether every file's folder is in
    `dirs`. One pass with no call per entry: it is the cost of a seal that grows with the
    index (each folder is hashed once; a file's shard is its folder's)."""
    parts: dict[int, _Part] = {}
    where = {folder: shard_of(folder) for folder in index.dirs}
    known = len(where)
    for kind, table in ((0, index.files), (1, index.dirs), (2, index.folders)):
        items: Any = table.items()
        for path, value in items:
            folder = path.rpartition("/")[0]
            shard = where.get(folder)
            if shard is None:
                shard = where[folder] = shard_of(folder)
            if wanted is not None and shard not in wanted:
                continue
            part = parts.get(shard)
            if part is None:
                part = parts[shard] = ({}, {}, {})
            part[kind][path] = value
        if kind == 0:
            exact = len(where) == known  # no file outside the folders in `dirs`
    return parts, exact


def _delta_parts(
    conn: sqlite3.Connection, workspace_id: str, index: PathIndex, wanted: set[int]
) -> dict[int, _Part] | None:
    """The `wanted` shards from the stored ones and the seal's delta; None when a stored one
    does not load (then the caller makes them from the whole index)."""
    assert index.delta is not None
    remade, fresh = index.delta
    parts: dict[int, _Part] = {}
    decompress = zstandard.ZstdDecompressor().decompress
    for shard in wanted:
        row = conn.execute(
            "SELECT data FROM pathshards WHERE workspace=? AND shard=?", (workspace_id, shard)
        ).fetchone()
        stored: tuple[Any, ...] = (FORMAT, shard, index.shards.get(shard), {}, {}, {})
        if row is not None:
            try:
                stored = marshal.loads(decompress(row[0]))
            except (ValueError, EOFError, TypeError, zstandard.ZstdError):
                return None
        if len(stored) != 6 or stored[:3] != (FORMAT, shard, index.shards.get(shard)):
            return None
        parts[shard] = (
            {p: v for p, v in stored[3].items() if p.rpartition("/")[0] not in remade},
            {p: v for p, v in stored[4].items() if p.rpartition("/")[0] not in remade},
            {p: v for p, v in stored[5].items() if p.rpartition("/")[0] not in remade},
        )
    tables: tuple[dict[str, Any], ...] = (index.files, index.dirs, index.folders)
    for kind, keys in enumerate(fresh):
        for path in keys:
            shard = shard_of_path(path)
            if shard not in wanted:
                return None  # a key outside the dirty shards: not a delta this can apply
            parts[shard][kind][path] = tables[kind][path]
    return parts


def save(store: Store, workspace_id: str, index: PathIndex) -> None:
    """Stores the workspace's path index: only its dirty shards when the stored one is still
    the one it was loaded from, all of them otherwise, and the header, in one transaction."""
    compress = zstandard.ZstdCompressor(level=1, write_checksum=True).compress
    conn = store.conn
    with ix.write_txn(conn):
        row = conn.execute(
            "SELECT data FROM pathindex WHERE workspace=?", (workspace_id,)
        ).fetchone()
        stored = None if row is None else _header(row[0])
        whole = (
            index.dirty is None
            or stored is None
            or stored[2] != index.generation
            or stored[9] != index.stamp
            or index.generation == 0
        )
        generation = (stored[2] if stored is not None else index.generation) + 1
        stamp = os.urandom(16)
        if whole:
            parts, exact = _parts(index, None)
            shards: dict[int, int] = {}
            conn.execute("DELETE FROM pathshards WHERE workspace=?", (workspace_id,))
            wanted: set[int] = set(parts)
        else:
            assert index.dirty is not None
            wanted = set(index.dirty)
            made = None if index.delta is None else _delta_parts(conn, workspace_id, index, wanted)
            parts = _parts(index, wanted)[0] if made is None else made
            exact = index.exact
            shards = dict(index.shards)
        for shard in sorted(wanted):
            found = parts.get(shard)
            if found is None or not any(found):
                shards.pop(shard, None)
                conn.execute(
                    "DELETE FROM pathshards WHERE workspace=? AND shard=?", (workspace_id, shard)
                )
                continue
            shards[shard] = generation
            data = compress(marshal.dumps((FORMAT, shard, generation, *found)))
            conn.execute(
                "INSERT OR REPLACE INTO pathshards(workspace, shard, data) VALUES (?, ?, ?)",
                (workspace_id, shard, data),
            )
        header = (
            FORMAT,
            SHARDS,
            generation,
            shards,
            index.notes,
            index.links,
            index.token,
            index.policy,
            exact,
            stamp,
        )
        conn.execute(
            "INSERT OR REPLACE INTO pathindex(workspace, data) VALUES (?, ?)",
            (workspace_id, compress(marshal.dumps(header))),
        )
    index.generation, index.stamp, index.shards = generation, stamp, shards
    index.exact, index.dirty, index.delta = exact, set(), None
    _remember(store, workspace_id, index)
