"""The master key of a format-2 remote, and the key files that hold it under recovery keys.

A remote's data is sealed under one random 32-byte `MasterKey`; each recovery key a person
holds opens a key file `keys/<keyed name of that recovery key>` that seals the master key
(restic's key files). Rotating a recovery key is then one new key file and one removed: no
data is sealed again. The master key derives its subkeys under format 2's own contexts, so
nothing sealed under a recovery key (a format-1 remote) ever opens as format-2 data, and a
fourth subkey (`_meta`) seals what only the engine reads: pack headers and trailers, indexes.
"""

from __future__ import annotations

import os

from blake3 import blake3

from tillage.crypto.keys import KEY_BYTES, RecoveryKey, _derive
from tillage.crypto.seal import _open, _seal
from tillage.errors import IntegrityError

__all__ = [
    "MasterKey",
    "key_file_name",
    "open_key_file",
    "open_meta",
    "seal_key_file",
    "seal_meta",
]

_KEY_FILE_NAME_CONTEXT = "tillage 2026 sync v2 key file name"
_KEY_FILE_CONTEXT = "tillage 2026 sync v2 key file sealing key"
_META_CONTEXT = "tillage 2026 sync v2 pack header and index sealing key"
_KEY_FILE_MAGIC = b"tillage-master-key-2\0"


class MasterKey(RecoveryKey):
    """The secret every format-2 remote's data is sealed under; never shown to a person (only
    key files carry it, each sealed under a recovery key). Shares RecoveryKey's guarded shape
    (no repr of its bytes, no pickling, constant-time equality) and its subkey interface, so
    refs and leases seal under it with the same calls; equal to no RecoveryKey."""

    __slots__ = ("_meta",)

    _CONTEXTS = (
        "tillage 2026 sync v2 object sealing key",
        "tillage 2026 sync v2 remote name key",
        "tillage 2026 sync v2 document sealing key",
        "tillage 2026 sync v2 master key fingerprint",
    )
    _meta: bytes

    def __init__(self, material: bytes) -> None:
        super().__init__(material)
        object.__setattr__(self, "_meta", _derive(_META_CONTEXT, material))

    @classmethod
    def generate(cls) -> MasterKey:
        """Returns a new master key from the operating system's cryptographic randomness."""
        return cls(os.urandom(KEY_BYTES))


def key_file_name(recovery: RecoveryKey) -> str:
    """The remote name of the key file `recovery` opens: `keys/<64 hex>`, a keyed hash, so
    the name says nothing of the key and a wrong key finds no file."""
    subkey = _derive(_KEY_FILE_NAME_CONTEXT, recovery._material)
    return "keys/" + blake3(b"key file", key=subkey).hexdigest()


def seal_key_file(recovery: RecoveryKey, master: MasterKey) -> bytes:
    """The key file that gives `master` to whoever holds `recovery` (bound to its name)."""
    subkey = _derive(_KEY_FILE_CONTEXT, recovery._material)
    ad = key_file_name(recovery).encode()
    return _seal(subkey, ad, _KEY_FILE_MAGIC + master._material)


def open_key_file(recovery: RecoveryKey, data: bytes) -> MasterKey:
    """The master key sealed in a key file; IntegrityError when it does not open under
    `recovery` (altered, truncated, another key's file moved to this name)."""
    subkey = _derive(_KEY_FILE_CONTEXT, recovery._material)
    name = key_file_name(recovery)
    plain = _open(subkey, name.encode(), data, f"the remote's key file {name}")
    if plain is None or not plain.startswith(_KEY_FILE_MAGIC):
        raise IntegrityError(
            "the remote's key file for this recovery key does not open: it was altered, "
            "damaged or swapped for another; nothing was read",
            next_step="check that the remote is the one this recovery key belongs to",
            details={"name": name},
        )
    material = plain[len(_KEY_FILE_MAGIC) :]
    if len(material) != KEY_BYTES:
        raise IntegrityError("the remote's key file holds no master key", details={"name": name})
    return MasterKey(material)


def seal_meta(master: MasterKey, ad: bytes, data: bytes) -> bytes:
    """`data` sealed under the master key's meta subkey, bound to `ad` (a pack's header or
    trailer, an index document: each names where it lives)."""
    return _seal(master._meta, ad, data)


def open_meta(master: MasterKey, ad: bytes, data: bytes, what: str) -> bytes:
    """What seal_meta sealed as `ad`; IntegrityError naming `what` when it does not open."""
    plain = _open(master._meta, ad, data, what)
    if plain is None:
        raise IntegrityError(
            f"{what} does not open: it was altered, damaged, cut short or sealed under another "
            "key; nothing of it was used",
            next_step="run `till remote check`, then `till remote repair` from a machine that "
            "holds the data",
            details={"what": what},
        )
    return plain
