"""The remote's index (format 2): which pack holds which blob, and its cache on this machine.

Each push writes one document `index/<64 random hex>` after its packs are durable and before
its ref moves (so a blob an index names is in a pack that is there), listing every pack it
wrote with each blob's ID, kind, offset and length; sealed under the master key (AD = its
name) and padded (Padmé) like the packs. Index documents are immutable, so a machine keeps
each one it has read, opened, under `<store>/remotes/index/<repo id>/` (0600 in 0700), and a
later push or pull lists `index/` and fetches only the new ones; a cached one the remote no
longer lists (superseded by a repair, or the remote restored from an older backup) is
forgotten. A push that finds more than COMPACT_AT documents writes one naming everything in
their place (then removes them), so `index/` stays short under `--follow`. A pack no index
names (a push cut before its index) is *unindexed*: a push adopts it by reading its trailer
and header (two ranged reads), so the blobs it holds are not sent again, and names it in its
own index.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from tillage.crypto import MasterKey, open_meta, seal_meta
from tillage.errors import IntegrityError
from tillage.features.sync.packs import (
    ENTRY,
    TRAILER,
    BlobEntry,
    open_header,
    open_trailer,
    pack_size,
    padme,
)
from tillage.platform.fs import atomic_write
from tillage.platform.names import random_hex
from tillage.remote.errors import RemoteMissingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from tillage.remote.base import Remote

__all__ = [
    "IndexedPack",
    "Located",
    "Problem",
    "RemoteIndex",
    "load",
    "read_pack_entries",
    "write_index",
    "write_superseding",
]

_MAGIC = b"TIX2"
_HEAD = struct.Struct("<4sI")
_PACK = struct.Struct("<HQI")  # name length, pack size, blob count
MIN_INDEX = 4 << 10
COMPACT_AT = 64  # a push that finds more index documents than this writes one in their place
PACKS_PREFIX = "packs/"
INDEX_PREFIX = "index/"


@dataclass(frozen=True)
class Located:
    """Where the remote holds one blob."""

    pack: str
    kind: int
    offset: int
    length: int


@dataclass(frozen=True)
class IndexedPack:
    """One pack as an index lists it."""

    name: str
    size: int
    entries: tuple[BlobEntry, ...]


@dataclass(frozen=True)
class Problem:
    """Something wrong on the remote: the name it concerns and what is wrong."""

    object: str
    problem: str


@dataclass
class RemoteIndex:
    """Every index the remote lists, merged: blob ID -> where it lies, pack -> size."""

    blobs: dict[bytes, Located] = field(default_factory=dict)
    packs: dict[str, IndexedPack] = field(default_factory=dict)
    documents: dict[str, tuple[str, ...]] = field(default_factory=dict)  # index -> its packs
    listed_packs: set[str] | None = None  # packs/ as listed, when it was

    def add(self, pack: IndexedPack) -> None:
        """Takes one pack's blobs in (a blob in several packs keeps the first seen)."""
        self.packs.setdefault(pack.name, pack)
        for e in pack.entries:
            self.blobs.setdefault(e.id, Located(pack.name, e.kind, e.offset, e.length))

    def unindexed(self) -> list[str]:
        """Packs the remote lists that no index names (a cut push's; known after adopt)."""
        return sorted((self.listed_packs or set()) - set(self.packs))


def encode(packs: Iterable[IndexedPack]) -> bytes:
    """An index document's plaintext (before padding)."""
    items = list(packs)
    out = [_HEAD.pack(_MAGIC, len(items))]
    for pack in items:
        name = pack.name.encode()
        out.append(_PACK.pack(len(name), pack.size, len(pack.entries)))
        out.append(name)
        out.extend(ENTRY.pack(e.id, e.kind, e.offset, e.length) for e in pack.entries)
    return b"".join(out)


def decode(plain: bytes, what: str) -> list[IndexedPack]:
    """The packs an index document lists; IntegrityError when it does not decode."""
    try:
        magic, count = _HEAD.unpack_from(plain, 0)
        if magic != _MAGIC:
            raise ValueError("not an index")
        at = _HEAD.size
        packs: list[IndexedPack] = []
        for _ in range(count):
            length, size, blobs = _PACK.unpack_from(plain, at)
            at += _PACK.size
            name = bytes(plain[at : at + length]).decode("ascii")
            at += length
            entries = tuple(
                BlobEntry(*ENTRY.unpack_from(plain, at + i * ENTRY.size)) for i in range(blobs)
            )
            at += blobs * ENTRY.size
            if not name.startswith(PACKS_PREFIX):
                raise ValueError(f"names {name!r}, not a pack")
            packs.append(IndexedPack(name, size, entries))
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise IntegrityError(f"{what} does not decode ({exc})") from None
    return packs


def _ad(name: str) -> bytes:
    return b"index\0" + name.encode()


def _cache_file(cache: Path, name: str) -> Path:
    return cache / name.rpartition("/")[2]


def _cached(cache: Path | None, name: str) -> bytes | None:
    if cache is None:
        return None
    try:
        return _cache_file(cache, name).read_bytes()
    except OSError:
        return None


def _keep(cache: Path | None, name: str, plain: bytes) -> None:
    """Keeps an opened index for the next process (best effort: it is only a cache)."""
    if cache is None:
        return
    with contextlib.suppress(OSError):
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(_cache_file(cache, name), plain, mode=0o600)


def load(
    remote: Remote,
    master: MasterKey,
    cache: Path | None,
    *,
    problems: list[Problem] | None = None,
) -> RemoteIndex:
    """Every index the remote lists, read from the cache or fetched and opened (then cached).
    An index that does not open is IntegrityError, or, with `problems`, noted there and left
    out. Cached indexes the remote no longer lists are removed from the cache."""
    index = RemoteIndex()
    names = remote.list(INDEX_PREFIX)
    for name in names:
        plain = _cached(cache, name)
        if plain is None:
            try:
                sealed = remote.get(name)
                plain = open_meta(master, _ad(name), sealed, f"the remote's index {name}")
                packs = decode(plain, f"the remote's index {name}")
            except RemoteMissingError:
                continue  # superseded by a repair while we listed
            except IntegrityError as exc:
                if problems is None:
                    raise
                problems.append(Problem(name, f"does not open: {exc.message}"))
                continue
            _keep(cache, name, plain)
        else:
            packs = decode(plain, f"the cached index {name}")
        index.documents[name] = tuple(p.name for p in packs)
        for pack in packs:
            index.add(pack)
    if cache is not None and cache.is_dir():
        listed = {_cache_file(cache, n).name for n in names}
        for entry in os.scandir(cache):
            if entry.name not in listed and not entry.name.startswith("."):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    return index


def read_pack_entries(remote: Remote, master: MasterKey, name: str) -> IndexedPack:
    """A pack's own list of its blobs, by two ranged reads (its trailer, then its header);
    IntegrityError when either does not open, RemoteMissingError when the pack is gone."""
    tail = remote.get_range(name, -TRAILER, TRAILER)
    offset, length = open_trailer(master, name, tail)
    header = remote.get_range(name, offset, length)
    entries = open_header(master, name, header)
    size = pack_size(offset, length)
    for e in entries:
        if e.offset + e.length > offset:
            raise IntegrityError(f"the header of the remote's pack {name} points past its data")
    return IndexedPack(name, size, tuple(entries))


def adopt_unindexed(remote: Remote, master: MasterKey, index: RemoteIndex) -> list[IndexedPack]:
    """Lists `packs/` and takes in every pack no index names whose own header opens (a push
    cut before its index wrote them whole); returns them, for the next index to name. A pack
    whose header does not open is left out (a `remote check` reports it)."""
    index.listed_packs = set(remote.list(PACKS_PREFIX))
    adopted: list[IndexedPack] = []
    for name in index.unindexed():
        try:
            pack = read_pack_entries(remote, master, name)
        except (IntegrityError, RemoteMissingError):
            continue
        index.add(pack)
        adopted.append(pack)
    return adopted


def write_index(
    remote: Remote, master: MasterKey, packs: Iterable[IndexedPack], cache: Path | None
) -> str:
    """Writes one new index document naming `packs` (all durable already); returns its name.
    Written with create-only semantics under a random name, then cached here."""
    name = f"{INDEX_PREFIX}{random_hex(32)}"
    plain = encode(packs)
    plain += bytes(max(MIN_INDEX, padme(len(plain))) - len(plain))
    remote.put(name, seal_meta(master, _ad(name), plain))
    _keep(cache, name, plain)
    return name


def write_superseding(
    remote: Remote,
    master: MasterKey,
    index: RemoteIndex,
    packs: Iterable[IndexedPack],
    cache: Path | None,
) -> str:
    """Writes one index naming every pack `index` knows and `packs`, then (only then, the new
    one durable) removes the documents `index` was read from: how a push keeps `index/` short
    (COMPACT_AT) and how a repair drops what it mended. A document another machine writes
    meanwhile is not among them, so it stays."""
    merged = {p.name: p for p in index.packs.values()}
    merged.update((p.name, p) for p in packs)
    name = write_index(remote, master, merged.values(), cache)
    for old in index.documents:
        remote.delete(old)
    return name


def cache_folder(home: Path, repo_id: str) -> Path:
    """Where this machine keeps the opened indexes of the remote `repo_id`."""
    folder = home / "remotes" / "index" / repo_id
    for path in (home / "remotes", home / "remotes" / "index", folder):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
    return folder
