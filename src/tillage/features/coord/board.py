"""The blackboard on disk: one folder per family in the store, `coord/<family>/`, where the
family is the root of the fork tree (`family.root_of`, as claims are kept), so a value written
in a workspace is read in every fork of it, and in forks of forks, at once, and back.

Each key has two files, named by a hash of the key (a key is a name, never a path on disk):
`<h>.value`, its entry and bytes, replaced whole by one atomic write (readers take no lock and
see the old value or the new one, never a mix), and `<h>.history`, every write's entry, one
JSON line each, appended after the value is replaced. Writers of a family take turns under
`locks/coord-<family>.lock`. A crash between the replace and the append leaves the history one
entry short: the value's own entry says so, and the next write appends it first (a reader adds
it to what it shows); a crash mid-append leaves a torn last line, which readers skip and the
next write cuts.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import AbstractContextManager
from pathlib import Path

from tillage.errors import echo
from tillage.features.coord.errors import KeyNotFoundError
from tillage.features.coord.keys import (
    Entry,
    check_key,
    check_owner,
    check_size,
    digest_of,
    entry_line,
    parse_entry,
    stored,
    unpack,
)
from tillage.platform import clock
from tillage.platform.fs import atomic_write, fsync_dir, raise_if_disk_full, write_all
from tillage.platform.locks import file_lock
from tillage.store.store import Store
from tillage.workspace.attach import Workspace
from tillage.workspace.family import root_of

FOLDER = "coord"  # in the store; store/check.py sweeps writers' leftovers from its folders
TAIL_BYTES = 64 << 10  # an entry line is well under this: the last one is within it


def family_of(ws: Workspace) -> str:
    """The ID the blackboard is kept under: the root of the fork tree holding `ws`."""
    return root_of(ws.store, ws.id)


def _folder(store: Store, family: str) -> Path:
    return store.home / FOLDER / family


def _name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _lock(store: Store, family: str) -> AbstractContextManager[None]:
    """Writers of one family's blackboard take turns (a version is one more than the last)."""
    return file_lock(store.locks_dir / f"coord-{family}.lock", what="this family's blackboard")


def write(ws: Workspace, key: str, value: bytes, owner: str | None) -> Entry:
    """Writes `value` under `key` for the family of `ws`, sealed with its owner, and returns
    the entry recorded. Refused before anything is touched: a bad key, owner or size."""
    check_key(key)
    owner = check_owner(owner)
    check_size(len(value))
    store = ws.store
    family = family_of(ws)
    folder = _folder(store, family)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _lock(store, family):
            base = folder / _name(key)
            history = base.with_suffix(".history")
            current = _entry_of(base.with_suffix(".value"))
            last = _mend(history, current)
            known = [e.version for e in (current, last) if e is not None]
            entry = Entry(
                path=key,
                owner=owner,
                written_at_ns=clock.now_ns(),
                size=len(value),
                digest=digest_of(value),
                version=max(known, default=0) + 1,
                workspace_id=ws.id,
                workspace=str(ws.root),
            )
            atomic_write(base.with_suffix(".value"), stored(entry, value), mode=0o600)
            _append(history, entry_line(entry))
    except OSError as exc:
        raise_if_disk_full(exc)
        raise
    return entry


def read(ws: Workspace, key: str) -> tuple[Entry, bytes]:
    """The value under `key` and its entry (who wrote it, when, its digest), its bytes proven
    against the entry; KeyNotFoundError when nothing was ever written there."""
    check_key(key)
    path = _folder(ws.store, family_of(ws)) / f"{_name(key)}.value"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise _not_found(key) from None
    return unpack(data, key)


def history(ws: Workspace, key: str, limit: int | None = None) -> list[Entry]:
    """Every write of `key`, newest first (at most `limit`); KeyNotFoundError when none."""
    check_key(key)
    base = _folder(ws.store, family_of(ws)) / _name(key)
    entries = [e for e in _history(base.with_suffix(".history")) if e.path == key]
    current = _entry_of(base.with_suffix(".value"))
    if current is not None and (not entries or entries[-1].version < current.version):
        entries.append(current)  # its append was cut short by a crash
    if not entries:
        raise _not_found(key)
    entries.reverse()
    return entries if limit is None else entries[:limit]


def listing(ws: Workspace, prefix: str = "") -> list[Entry]:
    """The family's keys that start with `prefix`, each as last written, by key."""
    folder = _folder(ws.store, family_of(ws))
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".value")]
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        entry = _entry_of(folder / name)
        if entry is not None and entry.path.startswith(prefix):
            found.append(entry)
    return sorted(found, key=lambda e: e.path)


def _not_found(key: str) -> KeyNotFoundError:
    return KeyNotFoundError(f"nothing was ever written under {echo(key)} in this family")


def _entry_of(path: Path) -> Entry | None:
    """The entry at the head of a stored value's file (its bytes unread); None when there is
    no such file or its head is no entry."""
    try:
        with open(path, "rb") as f:
            return parse_entry(f.readline())
    except FileNotFoundError:
        return None


def _history(path: Path) -> list[Entry]:
    """The whole entries of a history file, oldest first (a torn last line is none)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")[:-1]  # what follows the last newline is torn, or nothing
    return [e for e in (parse_entry(line) for line in lines) if e is not None]


def _mend(path: Path, current: Entry | None) -> Entry | None:
    """Makes the history whole before a write appends to it: cuts a torn last line and
    appends the current value's entry when a crash kept it out. Returns the last entry."""
    last: Entry | None = None
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        fd = None
    if fd is not None:
        try:
            size = os.fstat(fd).st_size
            start = max(0, size - TAIL_BYTES)
            tail = os.pread(fd, size - start, start)
            cut = tail.rfind(b"\n") + 1
            if start + cut != size:
                os.ftruncate(fd, start + cut)  # a torn line: that write never finished
                os.fsync(fd)
            complete = tail[:cut].split(b"\n")[:-1]
            if complete:
                last = parse_entry(complete[-1])
        finally:
            os.close(fd)
    if current is not None and (last is None or last.version < current.version):
        _append(path, entry_line(current))
        last = current
    return last


def _append(path: Path, line: bytes) -> None:
    """Appends one whole line to a history file, durably."""
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        write_all(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
