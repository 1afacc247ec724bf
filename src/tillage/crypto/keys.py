"""The recovery key and the subkeys derived from it: the one secret sync depends on.

A `RecoveryKey` is 32 random bytes. Everything sync seals or names is keyed by a subkey derived
with BLAKE3's key-derivation mode under a context of its own, so a subkey never serves two
purposes and none of them reveals the recovery key. The key never appears in a repr, a str or
an error message: only a short one-way fingerprint does.
"""

from __future__ import annotations

import os

from blake3 import blake3

from tillage.crypto.errors import BadKeyError

__all__ = ["KEY_BYTES", "RecoveryKey"]

KEY_BYTES = 32
_HEX = frozenset("0123456789abcdef")

# BLAKE3 derive_key contexts: hard-coded, globally unique, never reused for another purpose.
_OBJECT_CONTEXT = "tillage 2025 sync v1 object sealing key"
_NAME_CONTEXT = "tillage 2025 sync v1 remote name key"
_DOCUMENT_CONTEXT = "tillage 2025 sync v1 document sealing key"
_FINGERPRINT_CONTEXT = "tillage 2025 sync v1 key fingerprint"


def _derive(context: str, material: bytes) -> bytes:
    return blake3(material, derive_key_context=context).digest()


class RecoveryKey:
    """The 32-byte secret that opens a remote. Immutable; compares in constant time.

    Only `hex()` shows it (for the one moment `till remote add` prints it to the person);
    repr and str show the fingerprint, and pickling is refused so it cannot leak through a
    cache or a queue by accident.
    """

    __slots__ = ("_document", "_fingerprint", "_material", "_name", "_object")

    # The derive_key contexts of this kind of key (a MasterKey has its own, format 2's).
    _CONTEXTS = (_OBJECT_CONTEXT, _NAME_CONTEXT, _DOCUMENT_CONTEXT, _FINGERPRINT_CONTEXT)

    # The subkeys are read by the sibling modules (seal, names) only; nothing public hands
    # out key bytes but hex().

    _material: bytes
    _object: bytes
    _name: bytes
    _document: bytes
    _fingerprint: str

    def __init__(self, material: bytes) -> None:
        if not isinstance(material, bytes) or len(material) != KEY_BYTES:
            raise BadKeyError(f"a recovery key is {KEY_BYTES} bytes")
        objects, names, documents, fingerprint = self._CONTEXTS
        object.__setattr__(self, "_material", material)
        object.__setattr__(self, "_object", _derive(objects, material))
        object.__setattr__(self, "_name", _derive(names, material))
        object.__setattr__(self, "_document", _derive(documents, material))
        object.__setattr__(self, "_fingerprint", _derive(fingerprint, material)[:4].hex())

    @classmethod
    def generate(cls) -> RecoveryKey:
        """Returns a new key from the operating system's cryptographic randomness."""
        return cls(os.urandom(KEY_BYTES))

    @classmethod
    def from_hex(cls, text: str) -> RecoveryKey:
        """Parses the 64 hex characters a person was shown (surrounding blanks and upper case
        forgiven: it came through a terminal or an environment variable). BadKeyError
        otherwise, saying what is wrong without repeating any of it."""
        if not isinstance(text, str):
            raise BadKeyError("a recovery key is given as text")
        clean = text.strip().lower()
        if len(clean) != 2 * KEY_BYTES:
            raise BadKeyError(
                f"a recovery key is {2 * KEY_BYTES} hex characters; this one has {len(clean)}"
            )
        if not _HEX.issuperset(clean):
            raise BadKeyError("a recovery key holds only hex characters (0-9, a-f)")
        return cls(bytes.fromhex(clean))

    def hex(self) -> str:
        """The key as 64 hex characters: for the person who must keep it, nowhere else."""
        return self._material.hex()

    @property
    def fingerprint(self) -> str:
        """8 hex characters that tell keys apart without revealing anything of them."""
        return self._fingerprint

    def __repr__(self) -> str:
        return f"{type(self).__name__}(fingerprint={self._fingerprint})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecoveryKey) or type(other) is not type(self):
            return NotImplemented
        import hmac

        return hmac.compare_digest(self._material, other._material)

    def __hash__(self) -> int:
        return hash(self._fingerprint)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a recovery key is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("a recovery key is immutable")

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("a recovery key is not pickled; keep its hex() where the person put it")

    def __copy__(self) -> RecoveryKey:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> RecoveryKey:
        return self
