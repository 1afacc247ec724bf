"""The path index: what the last seal saw of each file and directory, so the next one can skip
reading what did not change (INV-8), and, with a watcher's changed folders, skip even listing
the folders that did not change. It is a hint, never a fact: losing it costs a full read.

Stored in the advisory index as a header row (token, policy, notes, links, and the generation
each shard was written at, an array of one uint32 a shard) and marshal blobs grouped by folder
(shards.py). A
load reads the header only, and each shard when first asked for; a seal that listed a few
folders reads and writes a few shards, not the whole index. A header of another format or
shard count makes the whole index empty, and a shard that does not load raises
StaleIndexError to the reader, which starts over from an empty one: a full read follows.
"""

from __future__ import annotations

import marshal
import os
import sys
from array import array
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import zstandard

from tillage.platform import clock
from tillage.store import index as ix
from tillage.store.store import Store
from tillage.workspace.folderrows import SHARED_INTS
from tillage.workspace.shards import (
    FILES,
    FORMAT,
    MIN_SHARDS,
    NAMES,
    SUMMARIES,
    TREES,
    Dirs,
    Part,
    StoredShards,
    Table,
    encode_part,
    shard_of_path,
    shards_for,
    valid_count,
)
from tillage.workspace.shards import StaleIndexError as _Stale

# (size, mtime_ns, ctime_ns, ino, dev, mode, aux,        <- FACTS: what a stat tells
#  content_kind, content, flags, content_size, xattrs)   <- what reading the file produced
# `aux` holds the facts of a SQLite database's sidecar files.
Row = tuple[
    int, int, int, int, int, int, str, int, bytes, int, int, tuple[tuple[bytes, bytes], ...]
]
FACTS = 7
Facts = tuple[int, int, int, int, int, int, str]

# A file modified this close to the start of a capture may change again within the file
# system's timestamp granularity without its facts changing: it is re-read next time. Linux
# file systems with nanosecond timestamps tick with the coarse clock (at most 10 ms); a file
# whose timestamps have no sub-second part is on a file system that keeps whole seconds.
RACY_WINDOW_NS = 50_000_000
RACY_WINDOW_WHOLE_SECONDS_NS = 2_000_000_000


# One int object per device and per mode seen: a walk keeps a row per file, a million of
# them at scale, and most share both (as a fresh file's ctime is its mtime); a row decoded
# from a folder's blob shares them again (folderrows.py).
_SHARED = SHARED_INTS


def stat_facts(st: os.stat_result, aux: str = "") -> Facts:
    """What a stat tells of a file, in a row's FACTS order: equal facts mean an unchanged file
    (unless it was racily clean, INV-8)."""
    mtime, ctime, dev, mode = st.st_mtime_ns, st.st_ctime_ns, st.st_dev, st.st_mode
    shared = _SHARED
    return (
        st.st_size,
        mtime,
        mtime if ctime == mtime else ctime,
        st.st_ino,
        shared.setdefault(dev, dev),
        shared.setdefault(mode, mode),
        aux,
    )


Xattrs = tuple[tuple[bytes, bytes], ...]
# What a folder the next seal does not open must contribute to it: (files, bytes below it,
# its own user xattrs, and the stat facts it was captured at: mtime_ns, ctime_ns, ino, dev).
Folder = tuple[int, int, Xattrs, int, int, int, int]
FOLDER_FACTS = 3

# Raised by a table's read of a shard that will not load (the engine's interface names it here).
StaleIndexError = _Stale


@dataclass
class PathIndex:
    """What the last seal saw. `dirs` holds every folder's tree ID and `folders` its summary;
    `notes` the seal's fidelity notes as (path, reason); `links` the folders that held a
    multiply linked file (always visited); `token` names the watcher's view the index reflects
    (None: no watcher vouched for it); `policy` fingerprints the policy it was captured under.
    `files` and `folders` are shards.Table, `dirs` a shards.Dirs (a mapping given is made
    into one).

    `dirty` names the shards that changed since the index was loaded (None: all of them, as
    for an index made anew); `generation` is the stored header's it was loaded from (0: none);
    `stamp` is unique to each stored header (a rebuilt index restarts the generations);
    `exact` tells that every file's folder is in `dirs`, so that a folder gone from `dirs`
    names every shard a removal touched."""

    files: MutableMapping[str, Row] = field(default_factory=dict)
    dirs: MutableMapping[str, bytes] = field(default_factory=dict)
    folders: MutableMapping[str, Folder] = field(default_factory=dict)
    notes: list[tuple[str, str]] = field(default_factory=list)
    links: frozenset[str] = frozenset()
    token: str | None = None
    policy: bytes = b""
    dirty: set[int] | None = field(default=None, compare=False)
    generation: int = field(default=0, compare=False)
    stamp: bytes = field(default=b"", compare=False)
    exact: bool = field(default=False, compare=False)
    shards: dict[int, int] = field(default_factory=dict, compare=False, repr=False)
    # The stored shards the index (or the one it was made from) was loaded with: what a save
    # compares its dirty shards with, to write nothing when they hold what is stored.
    loaded_from: StoredShards | None = field(default=None, compare=False, repr=False)
    # How many shards the tables are kept in (shards.shards_for; a loaded index's own).
    count: int = field(default=MIN_SHARDS, compare=False)

    def __post_init__(self) -> None:
        self.files = _table(self.files, self.count, FILES)
        self.dirs = _dirs(self.dirs, self.count)
        self.folders = _table(self.folders, self.count, SUMMARIES)

    def update_files(self, rows: Mapping[str, Row]) -> None:
        """Puts `rows` in, marking their shards dirty."""
        self.files.update(rows)
        if self.dirty is not None:
            self.dirty.update(shard_of_path(p, self.count) for p in rows)
        self.exact = self.exact and all(p.rpartition("/")[0] in self.dirs for p in rows)


def _table(entries: MutableMapping[str, Any], count: int, kind: int) -> Table[Any]:
    if isinstance(entries, Table) and entries.count == count:
        return entries
    return Table.of(entries, count, kind)  # regrouped: its entries as they are, in `count` shards


def _dirs(entries: MutableMapping[str, bytes], count: int) -> Dirs:
    if isinstance(entries, Dirs) and entries.count == count:
        return entries
    return Dirs.of(entries, count)


def table(entries: MutableMapping[str, Any]) -> Table[Any]:
    """The files or folders table of an index as the Table it is (PathIndex makes them so)."""
    assert isinstance(entries, Table)
    return entries


def dirs_table(entries: MutableMapping[str, bytes]) -> Dirs:
    """An index's dirs as the shards.Dirs it is (PathIndex makes it so)."""
    assert isinstance(entries, Dirs)
    return entries


def entries_in(index: PathIndex, folder: str) -> list[str]:
    """The keys of the files and folders directly in `folder`."""
    return [*table(index.files).children(folder), *dirs_table(index.dirs).children(folder)]


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
        not valid_count(count)
        or not isinstance(stamp, bytes)
        or not isinstance(generation, int)
        or not isinstance(shards, bytes)
        or len(shards) != count * 4
        or not isinstance(notes, list)
        or not isinstance(links, frozenset)
        or not isinstance(token, str | None)
        or not isinstance(policy, bytes)
        or not isinstance(exact, bool)
    ):
        return None
    return (*fields[:3], _generations_of(shards), *fields[4:])


def _generations_of(stored: bytes) -> dict[int, int]:
    """Each stored shard's generation, from the header's array (0: no such shard)."""
    found = array("I", stored)
    if sys.byteorder != "little":
        found.byteswap()
    return {shard: generation for shard, generation in enumerate(found) if generation}


def _generations_stored(generations: Mapping[int, int], count: int) -> bytes:
    """The header's array of the shards' generations: 64 KiB at 16,384 shards, that compresses
    to a few hundred bytes (a dict of them was 27 KB, rewritten at every seal)."""
    stored = array("I", bytes(count * 4))
    for shard, generation in generations.items():
        stored[shard] = generation
    if sys.byteorder != "little":
        stored.byteswap()
    return stored.tobytes()


def load(store: Store, workspace_id: str) -> PathIndex:
    """Returns the workspace's path index, its shards read as they are asked for; an empty one
    when there is none or its header won't load (a hint, never a fact: a full read follows,
    never a wrong answer)."""
    conn = store.conn
    row = conn.execute("SELECT data FROM pathindex WHERE workspace=?", (workspace_id,)).fetchone()
    fields = None if row is None else _header(row[0])
    if fields is None:
        return PathIndex()
    _fmt, count, generation, shards, notes, links, token, policy, exact, stamp = fields
    source = StoredShards(conn, workspace_id, count, shards)
    return PathIndex(
        Table(source, FILES),
        Dirs(Table(source, TREES), Table(source, NAMES)),
        Table(source, SUMMARIES),
        notes=notes,
        links=links,
        token=token,
        policy=policy,
        dirty=set(),
        generation=generation,
        stamp=stamp,
        exact=exact,
        shards=shards,
        loaded_from=source,
        count=count,
    )


def readable_rows(index: PathIndex) -> Iterator[Row]:
    """Every file row of the index that loads: a shard that does not is never trusted by a
    seal (it starts over without the index), so its rows name nothing a seal would reuse."""
    yield from _readable(table(index.files))


def readable_trees(index: PathIndex) -> Iterator[bytes]:
    """Every folder's tree ID in the index that loads (as readable_rows)."""
    yield from _readable(dirs_table(index.dirs).trees)


def _readable(entries: Table[Any]) -> Iterator[Any]:
    for shard in entries.shards():
        try:
            part = entries.view(shard)
        except StaleIndexError:
            continue
        yield from part.values()


def forget(store: Store, workspace_id: str) -> None:
    """Drops the workspace's path index: its next seal reads every file."""
    conn = store.conn
    with ix.write_txn(conn):
        conn.execute("DELETE FROM pathshards WHERE workspace=?", (workspace_id,))
        conn.execute("DELETE FROM pathindex WHERE workspace=?", (workspace_id,))


def _exact(index: PathIndex) -> bool:
    """Whether every file's folder is in `dirs` (one lookup per folder, not per file)."""
    seen: dict[str, bool] = {}
    dirs = index.dirs
    for folder in table(index.files).folders():
        known = seen.get(folder)
        if known is None:
            known = seen[folder] = folder in dirs
        if not known:
            return False
    return True


def _part(index: PathIndex, shard: int) -> Part:
    # A frozen shard (a walk's FolderRows) is decoded for the time it is compared or saved.
    dirs = dirs_table(index.dirs)
    return (
        table(index.files).view(shard),
        dirs.trees.view(shard),
        table(index.folders).view(shard),
        dirs.names.view(shard),
    )


def save(store: Store, workspace_id: str, index: PathIndex) -> None:
    """Stores the workspace's path index: only its dirty shards when the stored one is still
    the one it was loaded from (and nothing at all when they and the header hold what is
    stored already), all of them otherwise, and the header, in one transaction. An index
    whose shards no longer load is dropped instead: the next seal reads every file."""
    try:
        _save(store, workspace_id, index)
    except StaleIndexError:
        forget(store, workspace_id)


def _save(store: Store, workspace_id: str, index: PathIndex) -> None:
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
            or _outgrown(index)
        )
        if whole:
            _regroup(index, shards_for(_files_counted(index)))
            wanted = set(table(index.files).shards())
            wanted.update(dirs_table(index.dirs).shards(), table(index.folders).shards())
            exact = _exact(index)
            shards: dict[int, int] = {}
        else:
            assert index.dirty is not None and stored is not None
            exact = index.exact
            shards = dict(index.shards)
            # A full walk marks every shard dirty: only those that differ are written, and
            # nothing when none does (an idle rescan of a large tree must not rewrite it).
            wanted = _differing(index, index.dirty)
            if not wanted and _header_as_stored(index, stored, exact):
                index.dirty = set()
                return
        generation = (stored[2] if stored is not None else index.generation) + 1
        stamp = os.urandom(16)
        if whole:
            # _exact's pass over the files read every stored shard (a shard's row holds all
            # three tables), so nothing is left to read from the rows deleted here.
            conn.execute("DELETE FROM pathshards WHERE workspace=?", (workspace_id,))
        for shard in sorted(wanted):
            found = _part(index, shard)
            if not any(found):
                shards.pop(shard, None)
                conn.execute(
                    "DELETE FROM pathshards WHERE workspace=? AND shard=?", (workspace_id, shard)
                )
                continue
            shards[shard] = generation
            conn.execute(
                "INSERT OR REPLACE INTO pathshards(workspace, shard, data) VALUES (?, ?, ?)",
                (workspace_id, shard, encode_part(shard, generation, found)),
            )
        header = (
            FORMAT,
            index.count,
            generation,
            _generations_stored(shards, index.count),
            index.notes,
            index.links,
            index.token,
            index.policy,
            exact,
            stamp,
        )
        compress = zstandard.ZstdCompressor(level=1, write_checksum=True).compress
        conn.execute(
            "INSERT OR REPLACE INTO pathindex(workspace, data) VALUES (?, ?)",
            (workspace_id, compress(marshal.dumps(header))),
        )
    index.generation, index.stamp, index.shards = generation, stamp, shards
    index.exact, index.dirty = exact, set()


def _files_counted(index: PathIndex) -> int:
    """The files the count is chosen for: what the root's summary counts (symlinks too), known
    without reading every shard; the file rows when there is no summary."""
    root = index.folders.get("")
    return root[0] if root is not None else len(index.files)


def _outgrown(index: PathIndex) -> bool:
    """Whether the folder grew past four times what its shard count was chosen for (then the
    index is stored anew in more shards: a delta seal's cost follows the shards' size). The
    same measure as the count is chosen by, so a count just chosen is never outgrown."""
    return "" in index.folders and shards_for(_files_counted(index)) >= index.count * 4


def _regroup(index: PathIndex, count: int) -> None:
    if count != index.count:
        index.count = count
        # Regrouped as they are: a frozen folder's blob moves to its new shard undecoded.
        index.files = Table.of(table(index.files), count, FILES)
        index.dirs = _dirs(dict(index.dirs), count)
        index.folders = Table.of(table(index.folders), count, SUMMARIES)


def _header_as_stored(index: PathIndex, stored: tuple[Any, ...], exact: bool) -> bool:
    return (index.notes, index.links, index.token, index.policy, exact) == tuple(stored[4:9])


def _differing(index: PathIndex, dirty: set[int]) -> set[int]:
    """The `dirty` shards whose entries differ from the stored ones the index was loaded with
    (all of them when it was loaded with none)."""
    source = index.loaded_from
    if source is None:
        return set(dirty)
    differ = set()
    for shard in dirty:
        if shard in source.generations:
            if _part(index, shard) != source.part(shard):
                differ.add(shard)
        elif any(_part(index, shard)):
            differ.add(shard)
    return differ


def is_racy(mtime_ns: int, ctime_ns: int, now_ns: int) -> bool:
    """Tells whether a later change could leave a file's facts unchanged (INV-8): it changed
    within the file system's timestamp granularity of `now_ns`."""
    whole_seconds = mtime_ns % 1_000_000_000 == 0 and ctime_ns % 1_000_000_000 == 0
    window = RACY_WINDOW_WHOLE_SECONDS_NS if whole_seconds else RACY_WINDOW_NS
    return max(mtime_ns, ctime_ns) >= now_ns - window


def settled(written: Mapping[str, Row]) -> dict[str, Row]:
    """Path-index rows of files just written (a rewind, a merge, a materialized snapshot),
    racily-clean ones marked with facts that never match (INV-8), so that the next seal skips
    reading the rest and reads those again."""
    now = clock.files_now_ns()
    return {
        path: (row[0], -1, *row[2:]) if is_racy(row[1], row[2], now) else row
        for path, row in written.items()
    }
