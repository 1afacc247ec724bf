"""The only trust boundary: encryption below the sync transport.

`RecoveryKey` (the one secret), `seal_object`/`open_object` and `seal_document`/
`open_document` (XChaCha20-Poly1305, bound to what they claim to be), `name_of` (keyed names,
so plaintext IDs never leave the machine) and `key_check`/`verify_key_check` (a wrong key is
told first); `MasterKey` and its key files (format 2: data sealed under a random master key
each recovery key unlocks), `seal_meta`/`open_meta` for pack headers and indexes. Knows
nothing of remotes or stores; libsodium is imported on the first seal.
"""

from __future__ import annotations

from tillage.crypto.errors import BadKeyError
from tillage.crypto.keys import RecoveryKey
from tillage.crypto.master import (
    MasterKey,
    key_file_name,
    open_key_file,
    open_meta,
    seal_key_file,
    seal_meta,
)
from tillage.crypto.names import name_of
from tillage.crypto.seal import (
    OVERHEAD,
    key_check,
    open_document,
    open_object,
    seal_document,
    seal_object,
    verify_key_check,
)

__all__ = [
    "OVERHEAD",
    "BadKeyError",
    "MasterKey",
    "RecoveryKey",
    "key_check",
    "key_file_name",
    "name_of",
    "open_document",
    "open_key_file",
    "open_meta",
    "open_object",
    "seal_document",
    "seal_key_file",
    "seal_meta",
    "seal_object",
    "verify_key_check",
]
