"""A walk's path-index rows, grouped by parent folder, each folder's kept as one compressed
blob once its walk is done (issue 26).

A cold seal of a million files holds every file's row until it saves the index at its end: as
Python objects (a path string, a 12-tuple and its ints and content ID, a dict slot) that is
about 500 bytes a file, most of a seal's peak memory. A finished folder's rows as marshal bytes,
keyed by their names within the folder, are about 120, compressed about 70; the index's shards
(shards.Table) take the blobs as they are: a shard is decoded only when its entries are asked
for or saved, one at a time. A frozen folder changed again is decoded back into rows first.
"""

from __future__ import annotations

import marshal
import threading
from collections.abc import ItemsView, Iterator, MutableMapping, ValuesView
from typing import Any

import zstandard

# A folder's rows: its entries' names in it, with their rows, in the order they were put, as
# marshal bytes compressed (zstd level 1: a blob is about 60% of its marshal bytes, for about
# 2 us of each of its rows' 30 to 40 us walk).
Blob = bytes
# A frozen folder: (folder, how many rows, blob), one object shared by every table holding it.
Frozen = tuple[str, int, Blob]

# The device and mode ints every row of a walk shares (pathindex.stat_facts): a blob's rows
# share them within it only, so a decoded row is given the shared ones again (a loaded index,
# and the stored shards marshal makes of it, then hold one of each, not one per folder).
SHARED_INTS: dict[int, int] = {}
_DEV, _MODE = 4, 5

_local = threading.local()  # a compression context per thread (a walk runs in one)


def _contexts() -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    found: tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor] | None
    found = getattr(_local, "contexts", None)
    if found is None:
        found = _local.contexts = (zstandard.ZstdCompressor(level=1), zstandard.ZstdDecompressor())
    return found


def encode(folder: str, rows: dict[str, Any]) -> Blob:
    """The rows of the entries directly in `folder` (keyed by path) as one blob."""
    cut = len(folder) + 1 if folder else 0
    data = marshal.dumps(tuple((path[cut:], row) for path, row in rows.items()))
    return _contexts()[0].compress(data)


def decode(folder: str, blob: Blob, into: dict[str, Any] | None = None) -> dict[str, Any]:
    """The rows `encode` made of `folder`'s entries, keyed by path again (added to `into`)."""
    out: dict[str, Any] = {} if into is None else into
    prefix = f"{folder}/" if folder else ""
    share = SHARED_INTS.setdefault
    for name, row in marshal.loads(_contexts()[1].decompress(blob)):
        dev, mode = row[_DEV], row[_MODE]
        same_dev, same_mode = share(dev, dev), share(mode, mode)
        if same_dev is dev and same_mode is mode:
            out[prefix + name] = row
        else:
            out[prefix + name] = (*row[:_DEV], same_dev, same_mode, *row[_MODE + 1 :])
    return out


class FolderRows(MutableMapping[str, Any]):
    """Rows by path, kept by parent folder: those of a folder `freeze` was called for as one
    blob, decoded when one of them is asked for (the last decoded folder is remembered)."""

    __slots__ = ("_frozen", "_last", "_len", "_live")

    def __init__(self) -> None:
        self._live: dict[str, dict[str, Any]] = {}
        self._frozen: dict[str, Frozen] = {}
        self._len = 0
        self._last: tuple[str, dict[str, Any]] = ("\0", {})  # a decoded frozen folder

    def freeze(self, folder: str) -> None:
        """Keeps the rows of the entries directly in `folder` as one blob from now on."""
        rows = self._live.pop(folder, None)
        if rows:
            self._frozen[folder] = (folder, len(rows), encode(folder, rows))

    def frozen(self) -> Iterator[Frozen]:
        """Every frozen folder, with how many rows its blob holds."""
        yield from self._frozen.values()

    def live_items(self) -> Iterator[tuple[str, Any]]:
        """Every row not kept in a blob, by path."""
        for rows in self._live.values():
            yield from rows.items()

    def _folder(self, folder: str) -> dict[str, Any] | None:
        """The rows of `folder`'s entries (read-only), decoded if frozen."""
        found = self._live.get(folder)
        if found is not None:
            return found
        last_folder, last = self._last
        if last_folder == folder:
            return last
        frozen = self._frozen.get(folder)
        if frozen is None:
            return None
        decoded = decode(folder, frozen[2])
        self._last = (folder, decoded)
        return decoded

    def _thawed(self, folder: str) -> dict[str, Any]:
        """The rows of `folder`'s entries, to change in place (decoded first if frozen)."""
        found = self._live.get(folder)
        if found is None:
            frozen = self._frozen.pop(folder, None)
            found = {} if frozen is None else decode(folder, frozen[2])
            self._live[folder] = found
            if self._last[0] == folder:
                self._last = ("\0", {})
        return found

    # -- the mapping ------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        rows = self._folder(key.rpartition("/")[0])
        if rows is None:
            raise KeyError(key)
        return rows[key]

    def get(self, key: str, default: Any = None) -> Any:
        rows = self._folder(key.rpartition("/")[0])
        return default if rows is None else rows.get(key, default)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        rows = self._folder(key.rpartition("/")[0])
        return rows is not None and key in rows

    def __setitem__(self, key: str, value: Any) -> None:
        rows = self._thawed(key.rpartition("/")[0])
        self._len += key not in rows
        rows[key] = value

    def __delitem__(self, key: str) -> None:
        folder = key.rpartition("/")[0]
        if key not in self:
            raise KeyError(key)
        del self._thawed(folder)[key]
        self._len -= 1

    def __len__(self) -> int:
        return self._len

    def _items(self) -> Iterator[tuple[str, Any]]:
        for rows in list(self._live.values()):
            yield from rows.items()
        for folder, _count, blob in list(self._frozen.values()):
            yield from decode(folder, blob).items()

    def __iter__(self) -> Iterator[str]:
        for path, _row in self._items():
            yield path

    def items(self) -> ItemsView[str, Any]:
        return _Items(self)

    def values(self) -> ValuesView[Any]:
        return _Values(self)

    def __repr__(self) -> str:
        return f"FolderRows({dict(self._items())!r})"


class _Items(ItemsView[str, Any]):
    """A FolderRows' items, a folder's blob decoded once (not once per key)."""

    _mapping: FolderRows

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        yield from self._mapping._items()


class _Values(ValuesView[Any]):
    _mapping: FolderRows

    def __iter__(self) -> Iterator[Any]:
        for _path, row in self._mapping._items():
            yield row
