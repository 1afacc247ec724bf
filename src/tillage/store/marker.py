"""`store.json`, the store's marker: it says a folder is a tillage store and which format its
bytes are in. Its whole content (`{"format": N}`) is derivable from the packs, whose header
names their format, so `verify --repair` writes it again when it is damaged.
"""

from __future__ import annotations

import json
from pathlib import Path

from tillage.core.format import FORMAT_VERSION
from tillage.platform.fs import atomic_write
from tillage.store import control
from tillage.store.errors import ControlFileDamagedError, StoreFormatError

MARKER = "store.json"
PACK_MAGIC_STEM = b"TILLPAK"  # packs.PACK_MAGIC is this and the format's digit


def marker_bytes() -> bytes:
    return json.dumps({"format": FORMAT_VERSION}).encode() + b"\n"


def check_format(home: Path) -> None:
    """Raises store.format_unsupported when the marker names another format, and
    store.control_damaged when it cannot be read or names none; a missing marker passes."""
    path = home / MARKER
    doc = control.read_json(path)
    if doc is None:
        return
    fmt = doc.get("format")
    if type(fmt) is not int:
        raise ControlFileDamagedError.of(path, "it names no storage format")
    if fmt != FORMAT_VERSION:
        raise StoreFormatError(f"store format {fmt} is not supported (this is {FORMAT_VERSION})")


def derived_format(home: Path) -> int | None:
    """The format the store's packs are written in (FORMAT_VERSION for a store with none);
    None when they disagree or name one this build cannot read."""
    found: set[bytes] = set()
    packs = home / "packs"
    names = sorted(p for p in packs.iterdir() if p.name.endswith(".pack")) if packs.is_dir() else []
    for pack in names:
        try:
            with open(pack, "rb") as f:
                head = f.read(len(PACK_MAGIC_STEM) + 1)
        except OSError:
            continue
        if len(head) == len(PACK_MAGIC_STEM) + 1 and head.startswith(PACK_MAGIC_STEM):
            found.add(head[len(PACK_MAGIC_STEM) :])
    if not found or found == {str(FORMAT_VERSION).encode()}:
        return FORMAT_VERSION
    return None


def repair_marker(home: Path) -> tuple[str, str] | None:
    """Writes a damaged marker again from what the packs say, setting the damaged one aside;
    returns (what was wrong, what was done), or None when the marker is whole. A store whose
    packs name another format keeps its marker: that is a StoreFormatError's to say."""
    path = home / MARKER
    try:
        check_format(home)
        return None
    except StoreFormatError:
        return None
    except ControlFileDamagedError as exc:
        problem = str(exc.details["problem"])
    if derived_format(home) != FORMAT_VERSION:
        raise ControlFileDamagedError.of(
            path,
            problem,
            next_step="its packs are not all in this tillage's format: restore store.json from "
            "a backup, or open the store with the tillage that wrote it",
        )
    moved = control.set_aside(path)
    atomic_write(path, marker_bytes())
    return (
        problem,
        f"written again from the packs' format ({FORMAT_VERSION}); the damaged one is {moved.name}",
    )
