"""The path index's tables in shards by folder, each read from the store when first asked for
and copied when first changed (issue 26).

A file's row is in the shard of its folder; a folder's tree ID and summary are in the shard of
the folder itself, and its name in its parent's (what lists a folder's subfolders). A change
deep in the tree then rewrites the shards of the folders above it, each holding what is about
that folder, and not the tree IDs of every sibling: a node_modules/ of 2,000 packages put
2,000 tree IDs and summaries in one 115 KB shard that every seal below it rewrote.

A seal with a watcher looks at a few folders of a million-file tree: it reads the few shards
that hold their entries, and the index it leaves shares every other shard with the one it
loaded, so neither memory nor time grows with the folder. A shard that does not load, or
was written since the header it was loaded by (another generation), raises StaleIndexError:
its reader starts over from an empty index, which means a full read, never a wrong answer.
"""

from __future__ import annotations

import marshal
import sqlite3
import zlib
from collections.abc import (
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    ValuesView,
)
from typing import Any, TypeVar

import zstandard

from tillage.workspace import folderrows

V = TypeVar("V")

FORMAT = 8
# The index is stored in `count` rows (its shards), an entry in the one of its folder (a
# stable hash; KEYED_BY_OWN_PATH), so a seal that listed a few folders rewrites only their
# shards. The count follows the folder's size, about FILES_PER_SHARD files a shard, a power
# of two from MIN_SHARDS to MAX_SHARDS: at 1M files the whole index compresses to about 110 MiB, and
# 16,384 shards keep one near 7 KiB (a one-file change writes a few of them); a small
# workspace's index is not spread over thousands of near-empty rows (every one a compressed
# frame and a row's overhead: its store would be larger for nothing).
MIN_SHARDS = 64
MAX_SHARDS = 16384
FILES_PER_SHARD = 64

# One shard's entries, one dict per kind: files' rows, folders' tree IDs, folders' summaries,
# and folders' names (a key per folder; the value is None).
Part = tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]
FILES, TREES, SUMMARIES, NAMES = range(4)
# The kinds whose entry is in the shard of the path itself, not of its parent folder.
KEYED_BY_OWN_PATH = (False, True, True, False)


class StaleIndexError(Exception):
    """A shard of the loaded index is damaged, missing, or of another generation than the
    header it was loaded by names: what the index says can no longer be trusted."""


def shards_for(files: int) -> int:
    """How many shards an index of `files` files is stored in."""
    count = MIN_SHARDS
    while count < MAX_SHARDS and count * FILES_PER_SHARD < files:
        count *= 2
    return count


def valid_count(count: object) -> bool:
    """Whether a stored header's shard count is one this version makes."""
    return isinstance(count, int) and MIN_SHARDS <= count <= MAX_SHARDS and count & (count - 1) == 0


def shard_of(folder: str, count: int) -> int:
    """The shard that holds the entries whose parent folder is `folder` (stable across runs)."""
    return zlib.crc32(folder.encode("utf-8", "surrogateescape")) % count


def shard_of_path(path: str, count: int) -> int:
    """The shard of `path`'s parent folder (the root's own is ""): where a file's row and a
    folder's name are."""
    return shard_of(path.rpartition("/")[0], count)


def encode_part(shard: int, generation: int, part: Part) -> bytes:
    compress = zstandard.ZstdCompressor(level=1, write_checksum=True).compress
    return compress(marshal.dumps((FORMAT, shard, generation, *part)))


def decode_part(data: bytes, shard: int, generation: int | None) -> Part:
    """A stored shard's entries; StaleIndexError unless it is whole, of this format, of this
    shard and of the generation the header names."""
    try:
        fields = marshal.loads(zstandard.ZstdDecompressor().decompress(data))
        fmt, number, written, *part = fields
    except (ValueError, EOFError, TypeError, zstandard.ZstdError) as exc:
        raise StaleIndexError(f"shard {shard} does not load") from exc
    if (
        fmt != FORMAT
        or number != shard
        or written != generation
        or len(part) != len(KEYED_BY_OWN_PATH)
        or not all(isinstance(entries, dict) for entries in part)
    ):
        raise StaleIndexError(f"shard {shard} is not the one the header names")
    files, trees, summaries, names = part
    return files, trees, summaries, names


class StoredShards:
    """The shards of one stored index, as its header named them (shard -> generation), each
    read once, when first asked for."""

    def __init__(
        self, conn: sqlite3.Connection, workspace_id: str, count: int, generations: dict[int, int]
    ):
        self.conn = conn
        self.count = count
        self.workspace_id = workspace_id
        self.generations = generations
        self.read: dict[int, Part] = {}

    def part(self, shard: int) -> Part:
        found = self.read.get(shard)
        if found is None:
            found = self.read[shard] = self._load(shard)
        return found

    def _load(self, shard: int) -> Part:
        generation = self.generations.get(shard)
        if generation is None:
            return {}, {}, {}, {}  # the header names no such shard: nothing is in it
        row = self.conn.execute(
            "SELECT data FROM pathshards WHERE workspace=? AND shard=?",
            (self.workspace_id, shard),
        ).fetchone()
        if row is None:
            raise StaleIndexError(f"shard {shard} is missing")
        return decode_part(row[0], shard, generation)


# A shard's entries still kept as their folders' blobs (folderrows.py): (folder, count, blob).
Frozen = tuple[folderrows.Frozen, ...]


class Table(MutableMapping[str, V]):
    """One kind of the index's entries (FILES, TREES, SUMMARIES or NAMES), in shards by folder:
    each read from `source` when first asked for, copied when first changed, so a copy
    (`fork`) costs what is changed in it, never the table's size. A table made of a walk's
    FolderRows keeps their frozen folders' blobs: a shard is decoded when its entries are
    asked for by key (and kept), or only for the time of a pass (`view`, iterating)."""

    __slots__ = (
        "_by_own_path",
        "_frozen",
        "_kind",
        "_last",
        "_mine",
        "_parts",
        "_source",
        "count",
    )

    def __init__(
        self, source: StoredShards | None = None, kind: int = 0, count: int = MIN_SHARDS
    ) -> None:
        self._source = source
        self.count = count if source is None else source.count
        self._kind = kind
        self._by_own_path = KEYED_BY_OWN_PATH[kind]
        self._parts: dict[int, dict[str, V]] = {}
        self._frozen: dict[int, Frozen] = {}  # parts' entries still as blobs (none if source)
        self._mine: set[int] = set()  # the parts this table made or copied: changed in place
        self._last = ("\0", 0)  # the folder last hashed and its shard (a walk asks by folder)

    @classmethod
    def of(cls, entries: Mapping[str, V], count: int = MIN_SHARDS, kind: int = FILES) -> Table[V]:
        """A table of `kind` holding `entries` in `count` shards, stored nowhere yet (the
        frozen folders of a FolderRows, or of a Table, as their blobs)."""
        table: Table[V] = cls(kind=kind, count=count)
        frozen: dict[int, list[folderrows.Frozen]] = {}
        if isinstance(entries, folderrows.FolderRows | Table):
            live: Iterable[tuple[str, V]] = entries.live_items()
            for blob in entries.frozen():
                frozen.setdefault(shard_of(blob[0], count), []).append(blob)
            table._frozen = {shard: tuple(found) for shard, found in frozen.items()}
        else:
            live = entries.items()
        assert not (frozen and table._by_own_path), "only files' rows are kept in blobs"
        parts = table._parts
        shard_by_folder: dict[str, int] = {}
        own = table._by_own_path
        for path, value in live:
            folder = path if own else path.rpartition("/")[0]
            shard = shard_by_folder.get(folder)
            if shard is None:
                shard = shard_by_folder[folder] = shard_of(folder, count)
            part = parts.get(shard)
            if part is None:
                part = parts[shard] = {}
            part[path] = value
        table._mine = set(parts)
        return table

    def frozen(self) -> Iterator[folderrows.Frozen]:
        """The folders whose entries this table still keeps as blobs."""
        for found in self._frozen.values():
            yield from found

    def live_items(self) -> Iterator[tuple[str, V]]:
        """Every entry not kept in a blob."""
        for shard in self.shards():
            if shard not in self._frozen:
                yield from self.part(shard).items()
            else:
                yield from self._parts.get(shard, {}).items()

    def folders(self) -> Iterator[str]:
        """Every entry's parent folder (a frozen folder's once, not once per entry)."""
        for folder, _n, _blob in self.frozen():
            yield folder
        for path, _value in self.live_items():
            yield path.rpartition("/")[0]

    def _shard(self, path: str) -> int:
        folder = path if self._by_own_path else path.rpartition("/")[0]
        last_folder, last_shard = self._last
        if folder == last_folder:
            return last_shard
        shard = shard_of(folder, self.count)
        self._last = (folder, shard)
        return shard

    @property
    def source(self) -> StoredShards | None:
        """The stored shards this table reads from (None: made anew)."""
        return self._source

    def part(self, shard: int) -> dict[str, V]:
        """The entries of `shard` (read-only: change them through the table)."""
        if shard in self._frozen:
            thawed = self._parts[shard] = self._thawed(shard)
            del self._frozen[shard]
            self._mine.add(shard)
            return thawed
        found = self._parts.get(shard)
        if found is None:
            found = {} if self._source is None else self._source.part(shard)[self._kind]
            self._parts[shard] = found
        return found

    def view(self, shard: int) -> dict[str, V]:
        """The entries of `shard` (read-only), a frozen shard decoded for the caller only: a
        pass over every shard holds one decoded at a time."""
        if shard in self._frozen:
            return self._thawed(shard)
        return self.part(shard)

    def _thawed(self, shard: int) -> dict[str, V]:
        found = dict(self._parts.get(shard, {}))
        for folder, _n, blob in self._frozen[shard]:
            folderrows.decode(folder, blob, found)
        return found

    def _own(self, shard: int) -> dict[str, V]:
        found = self.part(shard)
        if shard not in self._mine:
            found = self._parts[shard] = dict(found)
            self._mine.add(shard)
        return found

    def shards(self) -> list[int]:
        """Every shard that may hold an entry."""
        known = set(self._parts)
        known.update(self._frozen)
        if self._source is not None:
            known.update(self._source.generations)
        return sorted(known)

    def fork(self) -> Table[V]:
        """A copy that shares every shard until one is changed in either."""
        copy: Table[V] = Table(self._source, self._kind, self.count)
        copy._parts = dict(self._parts)
        copy._frozen = dict(self._frozen)  # blobs are never changed: decoded into a new part
        # Neither may change a shared part in place any more.
        self._mine = set()
        return copy

    def children(self, folder: str) -> list[str]:
        """The keys of the entries directly in `folder` (of a kind kept by parent folder)."""
        assert not self._by_own_path, "entries kept by their own path are not listed by folder"
        return [
            p for p in self.part(shard_of(folder, self.count)) if p.rpartition("/")[0] == folder
        ]

    # -- the mapping ------------------------------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        return self.part(self._shard(key)).get(key, default)

    def __getitem__(self, key: str) -> V:
        return self.part(self._shard(key))[key]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.part(self._shard(key))

    def __setitem__(self, key: str, value: V) -> None:
        self._own(self._shard(key))[key] = value

    def __delitem__(self, key: str) -> None:
        shard = self._shard(key)
        if key not in self.part(shard):
            raise KeyError(key)
        del self._own(shard)[key]

    def pop(self, key: str, default: Any = None) -> Any:
        shard = self._shard(key)
        if key not in self.part(shard):
            return default
        return self._own(shard).pop(key)

    def update(self, other: Any = (), /, **kwargs: V) -> None:
        items: Iterable[tuple[str, V]] = other.items() if isinstance(other, Mapping) else other
        for key, value in items:
            self[key] = value
        for key, value in kwargs.items():
            self[key] = value

    def __iter__(self) -> Iterator[str]:
        for shard in self.shards():
            yield from self.view(shard)

    def items(self) -> ItemsView[str, V]:
        return _Items(self)

    def values(self) -> ValuesView[V]:
        return _Values(self)

    def _items(self) -> Iterator[tuple[str, V]]:
        for shard in self.shards():
            yield from self.view(shard).items()

    def __len__(self) -> int:
        total = 0
        for shard in self.shards():
            frozen = self._frozen.get(shard)
            if frozen is None:
                total += len(self.part(shard))
            else:
                total += len(self._parts.get(shard, {})) + sum(n for _f, n, _b in frozen)
        return total

    def __repr__(self) -> str:
        return f"Table({dict(self.items())!r})"


class _Items(ItemsView[str, V]):
    """A table's items, a frozen shard decoded once for the pass (not once per key)."""

    _mapping: Table[V]

    def __iter__(self) -> Iterator[tuple[str, V]]:
        yield from self._mapping._items()


class _Values(ValuesView[V]):
    _mapping: Table[V]

    def __iter__(self) -> Iterator[V]:
        for _key, value in self._mapping._items():
            yield value


class Dirs(MutableMapping[str, bytes]):
    """The index's folders: each one's tree ID (in the folder's own shard, TREES) and its name
    (in its parent's, NAMES), kept together so that a folder's subfolders can be listed
    (`children`) while a change below a wide folder rewrites none of its siblings' IDs."""

    __slots__ = ("names", "trees")

    def __init__(self, trees: Table[bytes], names: Table[None]) -> None:
        self.trees = trees
        self.names = names

    @classmethod
    def of(cls, entries: Mapping[str, bytes], count: int = MIN_SHARDS) -> Dirs:
        """Folders holding `entries` (path -> tree ID) in `count` shards, stored nowhere yet."""
        return cls(Table.of(entries, count, TREES), Table.of(dict.fromkeys(entries), count, NAMES))

    @property
    def count(self) -> int:
        return self.trees.count

    @property
    def source(self) -> StoredShards | None:
        return self.trees.source

    def shards(self) -> list[int]:
        """Every shard that may hold a tree ID or a name."""
        return sorted({*self.trees.shards(), *self.names.shards()})

    def fork(self) -> Dirs:
        """A copy that shares every shard until one is changed in either."""
        return Dirs(self.trees.fork(), self.names.fork())

    def children(self, folder: str) -> list[str]:
        """The folders directly in `folder`."""
        return self.names.children(folder)

    # -- the mapping ------------------------------------------------------------------------

    # A path is looked up by its name first, in its parent's shard (which a walk that looks
    # at it reads anyway): a file's path never reads the shard its own path hashes to.

    def get(self, key: str, default: Any = None) -> Any:
        return self.trees.get(key, default) if key in self.names else default

    def __getitem__(self, key: str) -> bytes:
        if key not in self.names:
            raise KeyError(key)
        return self.trees[key]

    def __contains__(self, key: object) -> bool:
        return key in self.names and key in self.trees

    def __setitem__(self, key: str, value: bytes) -> None:
        self.trees[key] = value
        if key not in self.names:  # a name set again would copy its shard for nothing
            self.names[key] = None

    def __delitem__(self, key: str) -> None:
        if key not in self.names:
            raise KeyError(key)
        del self.trees[key]
        del self.names[key]

    def pop(self, key: str, default: Any = None) -> Any:
        if key not in self.names:
            return default
        found = self.trees.pop(key, default)
        del self.names[key]
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self.trees)

    def __len__(self) -> int:
        return len(self.trees)

    def __repr__(self) -> str:
        return f"Dirs({dict(self.items())!r})"
