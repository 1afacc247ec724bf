"""The Remote seam: opaque bytes under names, the only thing sync asks of a transport.

A remote is dumb storage (as restic's backends): put, get, exists, list, delete, and one
compare-and-swap for the few names that change (refs, leases). It never sees a key or a
plaintext name — the engine seals below it — so every transport (memory, a folder, SSH, S3)
is the same small surface, and one contract suite (tests/remote/test_contract.py) holds each
of them to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from blake3 import blake3

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Remote", "Versioned", "content_token", "slice_range"]


@dataclass(frozen=True)
class Versioned:
    """A name's content with its version `token`: what `write_if` compares. Opaque to the
    caller (an S3 ETag, a content hash); equal tokens mean the same version of the name."""

    data: bytes
    token: str


class Remote(Protocol):
    """Opaque-bytes storage under names (`names.check_name`). Every method may be called from
    several threads at once; a name is written whole or not at all. Failures are
    RemoteUnavailableError or RemoteProtocolError; an absent name is RemoteMissingError."""

    url: str  # as the user gave it (a folder made absolute), never holding a secret

    def exists(self, names: Sequence[str]) -> set[str]:
        """Returns which of `names` are present, in as few round trips as the transport
        allows (the engine asks 1,000 at a time)."""
        ...

    def put(self, name: str, data: bytes) -> None:
        """Stores `data` under `name`, replacing what was there: readers see the old or the
        new bytes, never a part."""
        ...

    def get(self, name: str) -> bytes:
        """Returns the bytes under `name`; RemoteMissingError when it is absent."""
        ...

    def get_range(self, name: str, offset: int, length: int) -> bytes:
        """Returns `length` bytes of `name` from `offset` (a negative offset counts from the
        end: -n is the last n bytes), fewer when the object ends sooner, none past its end;
        RemoteMissingError when it is absent. One request: how a pack's blob is read."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Returns every name that starts with `prefix` (a string prefix, not a folder), in
        sorted order."""
        ...

    def delete(self, name: str) -> None:
        """Removes `name`; an absent name is fine."""
        ...

    def read_versioned(self, name: str) -> Versioned | None:
        """Returns `name`'s bytes and version token; None when it is absent."""
        ...

    def write_if(self, name: str, data: bytes, expect: str | None) -> bool:
        """Compare-and-swap: writes `data` only if `name` is absent (`expect` None) or its
        current token is `expect`. True when written; False when another writer got there
        first (never an error for that)."""
        ...

    def close(self) -> None:
        """Releases the connection or helper process; calling it twice is fine."""
        ...


def content_token(data: bytes) -> str:
    """The version token of the memory and directory remotes (and the SSH far side's): the
    BLAKE3 of the content, so two processes reading one version agree without coordination."""
    return blake3(data).hexdigest()


def slice_range(data: bytes, offset: int, length: int) -> bytes:
    """The part of `data` a `get_range(offset, length)` answers (the in-memory transports'
    and the directory's rule, which every transport keeps)."""
    if length < 0:
        raise ValueError(f"a range of {length} bytes")
    start = max(0, len(data) + offset) if offset < 0 else offset
    return bytes(data[start : start + length])
