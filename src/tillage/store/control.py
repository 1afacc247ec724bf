"""Reading the store's small control files (store.json, remotes, intents, caches) so that damage
is an answer, never a crash: a folder in a file's place, bytes that are not UTF-8 or JSON, JSON
of another shape. `verify --repair` sets a damaged one aside (`<name>.damaged`) rather than
deleting it, so nothing it held is destroyed by the repair.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from tillage.store.errors import ControlFileDamagedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Reading a control file larger than this is damage: each is a few kilobytes at most.
CONTROL_LIMIT = 16 << 20
DAMAGED_SUFFIX = ".damaged"

# Errors that say the caller may not read the file (permissions): a read-only store, not damage.
_NOT_DAMAGE = (errno.EACCES, errno.EPERM)


def problem_of(path: Path, *, shape: type = dict) -> str | None:
    """Says what is wrong with the JSON control file at `path` (None: it is whole, or missing)."""
    try:
        read_json(path, shape=shape)
    except ControlFileDamagedError as exc:
        return str(exc.details["problem"])
    return None


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when it is missing. A folder (or anything but a file) in its place,
    or a read the disk fails, is ControlFileDamagedError; a permission error is left as it is."""
    try:
        with open(path, "rb") as f:
            data = f.read(CONTROL_LIMIT + 1)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ControlFileDamagedError.of(path, "a folder is where the file should be") from None
    except OSError as exc:
        if exc.errno in _NOT_DAMAGE:
            raise
        raise ControlFileDamagedError.of(path, f"it cannot be read ({exc.strerror})") from exc
    if len(data) > CONTROL_LIMIT:
        raise ControlFileDamagedError.of(path, f"it is larger than {CONTROL_LIMIT} bytes")
    return data


def read_json(path: Path, *, shape: type = dict) -> Any:
    """The JSON document in the control file at `path` (None when it is missing), which must be
    of type `shape` (an object unless told); anything else is ControlFileDamagedError."""
    data = read_bytes(path)
    if data is None:
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ControlFileDamagedError.of(path, "it is not UTF-8 text") from None
    except ValueError:
        what = "it is empty" if not data.strip() else "it is not JSON"
        raise ControlFileDamagedError.of(path, what) from None
    if not isinstance(doc, shape):
        expected = "an object" if shape is dict else f"a {shape.__name__}"
        raise ControlFileDamagedError.of(
            path, f"it holds {_json_kind(doc)} where {expected} belongs"
        )
    return doc


def read_text(path: Path) -> str | None:
    """A one-line text control file (remotes/machine-id), stripped; None when missing."""
    data = read_bytes(path)
    if data is None:
        return None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ControlFileDamagedError.of(path, "it is not UTF-8 text") from None


def _json_kind(doc: object) -> str:
    if doc is None:
        return "null"
    if isinstance(doc, bool):
        return "a boolean"
    if isinstance(doc, (int, float)):
        return "a number"
    if isinstance(doc, str):
        return "a string"
    if isinstance(doc, list):
        return "a list"
    return "an object"


def aside_name(path: Path) -> Path:
    """A free `<name>.damaged[-N]` beside `path`: where a damaged copy of it is kept."""
    for n in range(1, 1000):
        target = path.with_name(path.name + DAMAGED_SUFFIX + ("" if n == 1 else f"-{n}"))
        if not os.path.lexists(target):
            return target
    raise ControlFileDamagedError.of(path, "too many damaged copies are set aside beside it")


def set_aside(path: Path) -> Path:
    """Renames the damaged file (or folder) at `path` to aside_name(path) and returns where it
    went: a repair keeps what it cannot read, for a person to look at, never deletes it."""
    target = aside_name(path)
    os.rename(path, target)
    return target


def rewrite(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """atomic_write() for a control file a reader takes as missing when it is damaged (a
    cache, a memory): a folder in its place is set aside first, so the write can land."""
    from tillage.platform.fs import atomic_write

    if os.path.isdir(path) and not os.path.islink(path):
        set_aside(path)
    atomic_write(path, data, mode=mode)
