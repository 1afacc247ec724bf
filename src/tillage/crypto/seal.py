"""Sealing: objects and documents encrypted and authenticated below the sync transport.

XChaCha20-Poly1305 (libsodium through PyNaCl's bindings) with a random 24-byte nonce per seal,
so sealing is stateless and safe for any number of messages under one key. The associated
data binds each sealed blob to what it claims to be (an object's ID, a document's remote
name), so a blob moved to another name does not open. Layout of every sealed blob:

    1 version byte | 24-byte nonce | ciphertext with its 16-byte tag

A blob that does not open (wrong key, any byte changed, moved, truncated) is an IntegrityError
and nothing of it is returned.
"""

from __future__ import annotations

import functools
import os

from tillage.crypto.keys import RecoveryKey
from tillage.errors import IntegrityError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeAlias

    _Encrypt: TypeAlias = Callable[[bytes, bytes | None, bytes, bytes], bytes]

__all__ = [
    "OVERHEAD",
    "key_check",
    "open_document",
    "open_object",
    "seal_document",
    "seal_object",
    "verify_key_check",
]

VERSION = 1
_VERSION_BYTE = bytes([VERSION])
NONCE_BYTES = 24
TAG_BYTES = 16
OVERHEAD = 1 + NONCE_BYTES + TAG_BYTES  # sealed size = plaintext size + OVERHEAD

CONFIG_NAME = "config"  # the remote's key-check document
_CONFIG_KIND = "tillage-sync-remote"


@functools.cache
def _aead() -> tuple[_Encrypt, _Encrypt, type[Exception]]:
    """libsodium's XChaCha20-Poly1305, imported on first use (only sync commands seal)."""
    from nacl.bindings import (
        crypto_aead_xchacha20poly1305_ietf_decrypt,
        crypto_aead_xchacha20poly1305_ietf_encrypt,
    )
    from nacl.exceptions import CryptoError

    return (
        crypto_aead_xchacha20poly1305_ietf_encrypt,
        crypto_aead_xchacha20poly1305_ietf_decrypt,
        CryptoError,
    )


def _seal(subkey: bytes, ad: bytes, plaintext: bytes) -> bytes:
    encrypt, _decrypt, _error = _aead()
    nonce = os.urandom(NONCE_BYTES)
    return _VERSION_BYTE + nonce + encrypt(plaintext, _VERSION_BYTE + ad, nonce, subkey)


def _open(subkey: bytes, ad: bytes, data: bytes, what: str) -> bytes | None:
    """The plaintext, or None when `data` does not open (the caller raises with its words)."""
    _encrypt, decrypt, error = _aead()
    if len(data) < OVERHEAD:
        return None
    if data[0] != VERSION:
        raise IntegrityError(
            f"{what} was sealed in format version {data[0]}, which this tillage does not know",
            next_step="upgrade tillage on this machine to the version that wrote the remote",
            details={"version": data[0]},
        )
    try:
        return decrypt(
            bytes(data[1 + NONCE_BYTES :]), _VERSION_BYTE + ad, data[1 : 1 + NONCE_BYTES], subkey
        )
    except error:
        return None


def seal_object(key: RecoveryKey, object_id: bytes, record: bytes) -> bytes:
    """Returns `record` sealed for the remote, bound to `object_id` (its identity in the store):
    only the holder of `key` can read it, and it opens only as that object."""
    return _seal(key._object, object_id, record)


def open_object(key: RecoveryKey, object_id: bytes, data: bytes) -> bytes:
    """Returns the record sealed in `data` as `object_id`; IntegrityError when it was altered,
    truncated, sealed as another object or under another key."""
    record = _open(key._object, object_id, data, f"object {object_id.hex()}")
    if record is None:
        raise IntegrityError(
            f"the remote's copy of object {object_id.hex()} does not open: it was altered, "
            "damaged or sealed under another key; nothing of it was used",
            next_step=(
                "push again from a machine that holds this object, or check that the remote "
                "is the one this recovery key belongs to"
            ),
            details={"object": object_id.hex()},
        )
    return record


def _canonical(doc: Mapping[str, Any]) -> bytes:
    import json

    return json.dumps(
        doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def seal_document(key: RecoveryKey, name: str, doc: Mapping[str, Any]) -> bytes:
    """Returns `doc` (JSON values) as canonical JSON sealed for the remote name `name` (a ref's,
    a lease's): authenticated, so a head cannot be forged, truncated or swapped with another."""
    return _seal(key._document, name.encode("utf-8"), _canonical(doc))


def open_document(key: RecoveryKey, name: str, data: bytes) -> dict[str, Any]:
    """Returns the document sealed in `data` under `name`; IntegrityError when it does not
    open (altered, truncated, moved from another name, another key)."""
    plain = _open(key._document, name.encode("utf-8"), data, f"the remote's {name!r}")
    if plain is None:
        raise IntegrityError(
            f"the remote's {name!r} does not open: it was altered, truncated, moved from another "
            "name or sealed under another key; nothing of it was used",
            next_step="check the recovery key, then push again from a machine you trust",
            details={"name": name},
        )
    import json

    doc = json.loads(plain)
    if not isinstance(doc, dict):
        # Authentic but not a document: only a bug in the writer gets here.
        raise IntegrityError(
            f"the remote's {name!r} opens but holds no document",
            next_step="push again from a machine you trust",
            details={"name": name},
        )
    return doc


def key_check(key: RecoveryKey, extra: Mapping[str, Any] | None = None) -> bytes:
    """Returns the remote's `config` object: a document only `key` opens, written once when a
    remote is created so that a wrong key is told before anything else is read. `extra`
    (format facts the engine wants to keep there) is sealed with it."""
    doc: dict[str, Any] = dict(extra or {})
    doc["kind"] = _CONFIG_KIND
    return seal_document(key, CONFIG_NAME, doc)


def verify_key_check(key: RecoveryKey, data: bytes) -> dict[str, Any]:
    """Raises IntegrityError ("the recovery key does not open this remote") unless `key` opens
    the remote's `config`; returns what key_check sealed there (with its `extra`)."""
    try:
        doc = open_document(key, CONFIG_NAME, data)
    except IntegrityError as exc:
        if exc.details.get("version") is not None:
            raise
        raise IntegrityError(
            "the recovery key does not open this remote",
            next_step=(
                "give the recovery key `till remote add` wrote for this remote: --key-file "
                "PATH (or TILLAGE_RECOVERY_KEY_FILE)"
            ),
        ) from None
    if doc.get("kind") != _CONFIG_KIND:
        raise IntegrityError(
            "the remote's config opens but is not a tillage remote's",
            next_step="check that the URL names a tillage remote",
        )
    return doc
