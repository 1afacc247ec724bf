"""Projection's decisions as values: routing a path to its mount, naming a durable entry, and
the three-way verdict on one path. Pure: strings and hashes in, a verdict out.

The verdict needs three values, not two. Comparing the collection with the place cannot tell
"I changed this" from "somebody else changed this"; `base`, what this projection last
committed there, is what makes the question answerable (see tillage.projection).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

# Every outcome a flush or a put can report for a path.
KINDS = (
    "unchanged",
    "created",
    "written",
    "converged",
    "deleted",
    "orphan",
    "conflict",
    "readonly",
    "contested",
)


def hash_content(text: str) -> str:
    """The hex SHA-256 of `text` as UTF-8 (a lone surrogate, from bytes that were not UTF-8,
    hashes as the byte it stands for): what the projection compares with."""
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def claim_key(collection_id: str, key: str) -> str:
    """The key one durable entry is claimed under: length-framed, so no two different
    (collection, key) pairs give the same string, whatever characters either holds."""
    return f"{len(collection_id)}:{collection_id}{len(key)}:{key}"


def is_metadata(key: str) -> bool:
    """A collection's own metadata (a key starting with `_`): never hydrated or flushed."""
    return key.startswith("_")


def shows_as_itself(key: str) -> bool:
    """Whether a place can hold entry `key` under the same spelling: a key that is not a
    normalized path (`a//b`, `/x`, `x/`, `./x`, "") would come back from the place as another
    key, so a round trip with no edits would rename or delete it. Such entries stay where they
    are: never hydrated, never flushed."""
    try:
        return normalize(key) == key
    except BadPathError:
        return False


class BadPathError(ValueError):
    """A place path that is not one: absolute, `..`, empty, or with a NUL."""


def normalize(path: str) -> str:
    """A place path as the projection spells it: `/`-separated, no `.` segments, no leading or
    trailing slash (`./a//b/` is `a/b`); BadPathError for one that could leave the place."""
    if not path or "\0" in path:
        raise BadPathError(f"not a path: {path!r}")
    if path.startswith("/"):
        raise BadPathError(f"absolute paths are refused: {path!r}")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BadPathError(f"'..' is refused: {path!r}")
    if not parts:
        raise BadPathError(f"not a path: {path!r}")
    return "/".join(parts)


def normalize_prefix(prefix: str) -> str:
    """A mount prefix: a normalized path, or "" for the whole place."""
    stripped = prefix.strip("/")
    return "" if stripped in ("", ".") else normalize(stripped)


def join(prefix: str, key: str) -> str:
    """The place path of entry `key` under `prefix`."""
    return f"{prefix}/{key}" if prefix else key


def route(path: str, prefixes: Sequence[str]) -> tuple[int, str] | None:
    """The mount a place path belongs to, as (index into `prefixes`, key): the longest prefix
    that holds it on a `/` boundary (`artifacts-old/x` is not under `artifacts`). None when no
    mount holds it, or when it is exactly a mount's root (a file where a folder belongs)."""
    if path in prefixes:
        return None
    best: tuple[int, str] | None = None
    best_len = -1
    for i, prefix in enumerate(prefixes):
        if prefix == "":
            held, key = True, path
        else:
            held = path.startswith(prefix + "/")
            key = path[len(prefix) + 1 :]
        if held and len(prefix) > best_len:
            best, best_len = (i, key), len(prefix)
    return best


@dataclass(frozen=True)
class Verdict:
    """What to do with one path: the outcome `kind`, and whether to write the place's content
    to the collection, delete the entry, and where the baseline goes (`base_after`: the hash
    now committed, None to forget the path)."""

    kind: str
    write: bool = False
    delete: bool = False
    base_after: str | None = None


def decide(base: str | None, theirs: str | None, ours: str | None) -> Verdict:
    """The verdict for a path of a writable mount whose place content changed since this
    projection last committed it (`ours != base`), with the collection's content now
    (`theirs`), all as hashes (None: absent).

    - The collection already holds ours: converged (nothing written; the base advances).
    - Ours deleted: a path we own whose entry nobody changed is deleted; one already gone
      converges; anything else is a conflict.
    - Ours new or edited: written over what we last committed, created where nothing was and
      we own nothing; anything else (someone changed or removed the entry since) is a conflict.
    A conflict writes nothing and keeps the base, so the next flush asks again.
    """
    if theirs == ours:
        return Verdict("converged", base_after=ours)
    if ours is None:
        if base is not None and theirs == base:
            return Verdict("deleted", delete=True, base_after=None)
        return Verdict("conflict", base_after=base)
    if base is None:
        if theirs is None:
            return Verdict("created", write=True, base_after=ours)
        return Verdict("conflict", base_after=None)
    if theirs == base:
        return Verdict("written", write=True, base_after=ours)
    return Verdict("conflict", base_after=base)
