"""Disposable folders a command makes beside a workspace (a merge check's copy of the folder,
`.env` included): registered in the store before they exist, held by a lock while their
process lives, and removed by whichever command comes next when that process was killed
(recovery.open_workspace and `verify` sweep them), so a killed merge never leaves a copy of
the workspace lying around."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from tillage.platform.fs import atomic_write
from tillage.platform.locks import file_lock, is_held
from tillage.platform.names import random_hex
from tillage.store.store import Store

SCRATCH_PREFIX = "scratch-"


def _record(store: Store, token: str) -> Path:
    return store.intents_dir / f"{SCRATCH_PREFIX}{token}.json"


def _lock(store: Store, token: str) -> Path:
    return store.locks_dir / f"{SCRATCH_PREFIX}{token}.lock"


@contextlib.contextmanager
def scratch_folder(store: Store, parent: Path, prefix: str) -> Iterator[Path]:
    """A new, empty folder `parent/<prefix><token>` (mode 0700), removed on the way out
    whatever happens, and by the next command if this process is killed first."""
    token = random_hex(8)
    path = parent / f"{prefix}{token}"
    with file_lock(_lock(store, token), timeout=1.0, what="a scratch folder"):
        atomic_write(_record(store, token), json.dumps({"scratch": str(path)}).encode())
        try:
            path.mkdir(0o700)
            yield path
        finally:
            _remove(path)
            _record(store, token).unlink(missing_ok=True)
    _lock(store, token).unlink(missing_ok=True)


def sweep_scratch(store: Store) -> int:
    """Removes the scratch folders whose process is gone (its lock is free); returns how many
    records it cleared. Cheap when there are none: one listing of the intents folder."""
    try:
        names = os.listdir(store.intents_dir)
    except FileNotFoundError:
        return 0
    cleared = 0
    for name in names:
        if not (name.startswith(SCRATCH_PREFIX) and name.endswith(".json")):
            continue
        token = name[len(SCRATCH_PREFIX) : -len(".json")]
        if is_held(_lock(store, token)):
            continue
        # A record that does not read (a folder in its place, another shape) is left for
        # `verify`, which reports it (store/controls.py).
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            path = Path(json.loads((store.intents_dir / name).read_bytes())["scratch"])
            if path.name.endswith(token):  # only ever the folder this record made
                _remove(path)
            (store.intents_dir / name).unlink(missing_ok=True)
            _lock(store, token).unlink(missing_ok=True)
            cleared += 1
    return cleared


def _remove(path: Path) -> None:
    from tillage.platform.folders import remove_folder  # only when there is something to remove

    remove_folder(path)


# A seal's private copy of a live SQLite database (workspace/sqlite_image.py), named with its
# maker's process ID.
IMAGE_PREFIX = ".sqlite-image-"


def image_maker(name: str) -> int | None:
    """The process ID a temporary image's name carries (None: not an image's name)."""
    if not (name.startswith(IMAGE_PREFIX) and name.endswith(".db")):
        return None
    pid, _, _rest = name[len(IMAGE_PREFIX) :].partition("-")
    return int(pid) if pid.isdigit() else None


def remove_orphan_images(tmp_dir: Path) -> None:
    """Removes the copies of live databases (a whole database each) whose maker is gone: a
    seal killed while it imaged a WAL database left one in the store's tmp/."""
    try:
        names = os.listdir(tmp_dir)
    except FileNotFoundError:
        return
    for name in names:
        pid = image_maker(name)
        if pid is None or _alive(pid):
            continue
        with contextlib.suppress(OSError):
            os.unlink(tmp_dir / name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
