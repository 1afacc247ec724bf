"""The blackboard's rules as values: what a key and an owner may be, and a written value's
record (its entry) as bytes. Pure: nothing here touches a disk.

A stored value is one file: its entry as one JSON line, then the value's bytes. One atomic
replace writes both, so a reader never sees a value with another write's owner, and the
entry's size and BLAKE3 digest prove the bytes whole when they are read back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from blake3 import blake3

from tillage.errors import echo
from tillage.features.coord.errors import (
    BadOwnerError,
    InvalidKeyError,
    ValueDamagedError,
    ValueTooBigError,
)

MAX_KEY = 200  # characters
MAX_VALUE = 1 << 20  # bytes: a blackboard holds notes and pointers, not files
MAX_OWNER = 200
FORMAT = 1  # of an entry; a reader refuses a newer one instead of guessing at it

_SEGMENT = re.compile(r"[A-Za-z0-9._:-]+")


@dataclass(frozen=True)
class Entry:
    """One write of a key: who wrote it (`owner`, and the workspace it was written in), when
    (`written_at_ns`), its `size` and `digest` (BLAKE3, 64 hex), and its `version` (1 for a
    key's first write, one more for each after)."""

    path: str
    owner: str
    written_at_ns: int
    size: int
    digest: str
    version: int
    workspace_id: str
    workspace: str


def check_key(key: str) -> str:
    """Returns the key as given, or raises InvalidKeyError saying what is wrong with it."""
    problem = _key_problem(key)
    if problem is not None:
        raise InvalidKeyError(f"{echo(key)} is not a blackboard key: {problem}")
    return key


def _key_problem(key: str) -> str | None:
    if not key:
        return "it is empty"
    if len(key) > MAX_KEY:
        return f"it is {len(key)} characters long (at most {MAX_KEY})"
    if key.startswith("/"):
        return "it starts with '/' (a key is not an absolute path)"
    for segment in key.split("/"):
        if not segment:
            return "it has an empty segment ('//' or a '/' at the end)"
        if segment in (".", ".."):
            return f"it has a {segment!r} segment (a key is a name, not a path to walk)"
        if not _SEGMENT.fullmatch(segment):
            return "it has a character other than a-z, A-Z, 0-9, '.', '_', '-', ':' and '/'"
    return None


def check_owner(owner: str | None) -> str:
    """Returns the owner, or raises BadOwnerError for a missing, empty, over-long or
    control-character name."""
    if owner is None or not owner.strip():
        raise BadOwnerError("a write needs an owner: pass --owner NAME, or set TILLAGE_AGENT")
    if len(owner) > MAX_OWNER or any(ord(ch) < 32 or ord(ch) == 127 for ch in owner):
        raise BadOwnerError(
            f"the owner {echo(owner)} is not a short printable name (at most {MAX_OWNER})"
        )
    return owner


def check_size(size: int, *, more: bool = False) -> None:
    """Raises ValueTooBigError for a value over MAX_VALUE (`more`: at least `size` bytes, the
    rest unread)."""
    if size > MAX_VALUE:
        told = f"more than {MAX_VALUE} bytes" if more else f"{size} bytes"
        raise ValueTooBigError(
            f"the value is {told}: a blackboard value is at most {MAX_VALUE} bytes (1 MiB)",
            details={"limit": MAX_VALUE, "size": None if more else size},
        )


def digest_of(value: bytes) -> str:
    """The value's BLAKE3, as 64 hex characters (what `b3sum` prints)."""
    return blake3(value).hexdigest()


def entry_line(entry: Entry) -> bytes:
    """The entry as one JSON line, newline included."""
    body = {"format": FORMAT, **entry.__dict__}
    return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


def parse_entry(line: bytes) -> Entry | None:
    """The entry a line holds, or None when it is not one (a torn or foreign line)."""
    try:
        body = json.loads(line)
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            return None
        return Entry(
            path=str(body["path"]),
            owner=str(body["owner"]),
            written_at_ns=int(body["written_at_ns"]),
            size=int(body["size"]),
            digest=str(body["digest"]),
            version=int(body["version"]),
            workspace_id=str(body["workspace_id"]),
            workspace=str(body["workspace"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def stored(entry: Entry, value: bytes) -> bytes:
    """A stored value's file: its entry, then its bytes."""
    return entry_line(entry) + value


def unpack(data: bytes, key: str) -> tuple[Entry, bytes]:
    """The entry and the value a stored file holds, proven: ValueDamagedError when the entry
    does not parse, names another key, or its size or digest does not match the bytes."""
    head, newline, value = data.partition(b"\n")
    entry = parse_entry(head) if newline else None
    if entry is None or entry.path != key:
        raise ValueDamagedError(f"the stored value of {echo(key)} has no readable record")
    if len(value) != entry.size or digest_of(value) != entry.digest:
        raise ValueDamagedError(
            f"the stored value of {echo(key)} does not match its record "
            f"({len(value)} bytes, recorded {entry.size}): it was changed outside tillage"
        )
    return entry, value
