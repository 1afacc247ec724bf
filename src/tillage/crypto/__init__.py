"""The only trust boundary: encryption below the sync transport.

`RecoveryKey` (the one secret), `seal_object`/`open_object` and `seal_document`/
`open_document` (XChaCha20-Poly1305, bound to what they claim to be), `name_of` (keyed names,
so plaintext IDs never leave the machine) and `key_check`/`verify_key_check` (a wrong key is
told first). Knows nothing of remotes or stores; libsodium is imported on the first seal.
"""

from __future__ import annotations

from tillage.crypto.errors import BadKeyError
from tillage.crypto.keys import RecoveryKey
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
    "RecoveryKey",
    "key_check",
    "name_of",
    "open_document",
    "open_object",
    "seal_document",
    "seal_object",
    "verify_key_check",
]
