"""The remote's packs (format 2): many sealed blobs in one padded object, readable one by one.

A pack is `packs/<64 random hex>`, laid out as

    sealed blob | sealed blob | ... | sealed header (entries, then zero padding) | trailer

Each blob is a store record sealed on its own under the master key with AD = its object ID
(`seal_object`), so a ranged read of one blob opens alone. The header lists the pack's blobs
(ID, kind, offset, length) so an index can be rebuilt from the packs themselves; its zero
padding, sealed with it, brings the whole pack to a Padmé size (at most ~12% more, and never
under MIN_PACK), so neither a pack's size nor where its blobs end tells a file's size. The
trailer, the last TRAILER bytes, seals the header's offset and length (bound to the pack's
name), so only the key holder can even find where the data stops.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tillage.crypto import OVERHEAD, MasterKey, open_meta, seal_meta
from tillage.errors import IntegrityError
from tillage.platform.names import random_hex

__all__ = [
    "MIN_PACK",
    "TARGET",
    "TRAILER",
    "BlobEntry",
    "PackBuilder",
    "new_pack_name",
    "open_header",
    "open_trailer",
    "padme",
]

TARGET = 16 << 20  # a pack closes once it holds this much
MIN_PACK = 32 << 10  # the smallest pack: a small push's one pack says little of its size
_MAGIC = b"TPK2"
_COUNT = struct.Struct("<4sI")
ENTRY = struct.Struct("<32sBQI")  # object ID, kind, offset in the pack, sealed length
_TRAILER_PLAIN = struct.Struct("<QQ")  # header offset, header length
TRAILER = _TRAILER_PLAIN.size + OVERHEAD


@dataclass(frozen=True)
class BlobEntry:
    """Where one sealed blob lies in its pack."""

    id: bytes
    kind: int
    offset: int
    length: int


def padme(size: int) -> int:
    """Padmé (Nikitin et al., PETS 2019): `size` rounded up so that only its top
    O(log log size) bits vary; the overhead is at most ~12%, and a size reveals
    O(log log size) bits instead of O(log size)."""
    if size < 2:
        return size
    exponent = size.bit_length() - 1
    significant = exponent.bit_length()
    mask = (1 << (exponent - significant)) - 1
    return (size + mask) & ~mask


def new_pack_name() -> str:
    """A pack's name: random, so it says nothing of what the pack holds."""
    return f"packs/{random_hex(32)}"


def _header_ad(name: str) -> bytes:
    return b"pack header\0" + name.encode()


def _trailer_ad(name: str) -> bytes:
    return b"pack trailer\0" + name.encode()


class PackBuilder:
    """One pack being filled: sealed blobs added in order, then `finish` lays out the
    header, its padding and the trailer. Not thread-safe (one builder per kind of blob)."""

    def __init__(self) -> None:
        self.name = new_pack_name()
        self.parts: list[bytes] = []
        self.entries: list[BlobEntry] = []
        self.size = 0

    def add(self, object_id: bytes, kind: int, sealed: bytes) -> None:
        """Appends one sealed blob."""
        self.entries.append(BlobEntry(object_id, kind, self.size, len(sealed)))
        self.parts.append(sealed)
        self.size += len(sealed)

    @property
    def full(self) -> bool:
        return self.size >= TARGET

    def finish(self, master: MasterKey) -> bytes:
        """The whole pack's bytes (the builder is spent)."""
        table = [_COUNT.pack(_MAGIC, len(self.entries))]
        table.extend(ENTRY.pack(e.id, e.kind, e.offset, e.length) for e in self.entries)
        plain = b"".join(table)
        bare = self.size + len(plain) + OVERHEAD + TRAILER
        total = max(MIN_PACK, padme(bare))
        plain += bytes(total - bare)  # sealed with the header: indistinguishable from it
        header = seal_meta(master, _header_ad(self.name), plain)
        trailer = seal_meta(
            master, _trailer_ad(self.name), _TRAILER_PLAIN.pack(self.size, len(header))
        )
        self.parts += [header, trailer]
        data = b"".join(self.parts)
        self.parts = []
        assert len(data) == total
        return data


def open_trailer(master: MasterKey, name: str, tail: bytes) -> tuple[int, int]:
    """The header's (offset, length) from a pack's last TRAILER bytes; IntegrityError when
    they do not open (the pack was cut short, grown, altered or renamed)."""
    plain = open_meta(master, _trailer_ad(name), tail, f"the remote's pack {name}")
    if len(plain) != _TRAILER_PLAIN.size:
        raise IntegrityError(f"the remote's pack {name} has a trailer of another shape")
    offset, length = _TRAILER_PLAIN.unpack(plain)
    return offset, length


def pack_size(header_offset: int, header_length: int) -> int:
    """The size a pack must have, from its trailer."""
    return header_offset + header_length + TRAILER


def open_header(master: MasterKey, name: str, data: bytes) -> list[BlobEntry]:
    """The blobs a pack's sealed header lists; IntegrityError when it does not open or its
    entries do not fit inside the pack's data."""
    plain = open_meta(master, _header_ad(name), data, f"the header of the remote's pack {name}")
    try:
        magic, count = _COUNT.unpack_from(plain, 0)
        if magic != _MAGIC:
            raise ValueError("not a pack header")
        entries = [
            BlobEntry(*ENTRY.unpack_from(plain, _COUNT.size + i * ENTRY.size)) for i in range(count)
        ]
    except (struct.error, ValueError) as exc:
        raise IntegrityError(f"the header of the remote's pack {name} does not decode") from exc
    return entries
