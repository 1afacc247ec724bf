"""What a delta walk carries over from the last seal's path index: the rows, trees, summaries,
notes and links below the folders it did not open (capture.py's walk made the rest).

With an index a seal stored whole (`exact`), the carried tables are forks of the last index's
(shards.Table, shards.Dirs: sharing every shard they do not change) less the entries of the
folders the walk looked at again (and of those gone since), plus what the walk made, so a seal
in the watcher's daemon reads and copies the shards of what changed, not every file's row.
Otherwise one pass over the last index's rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Protocol

from tillage.core.models import FidelityNote
from tillage.core.paths import join
from tillage.workspace import pathindex
from tillage.workspace.pathindex import Folder, Row, dirs_table, table


class Result(Protocol):
    """What a walk made (capture.Capture): carried into, and its tables replaced."""

    rows: MutableMapping[str, Row]
    dirs: MutableMapping[str, bytes]
    folders: MutableMapping[str, Folder]
    notes: list[FidelityNote]
    links: set[str]
    walked: set[str]
    remade: set[str] | None
    told: dict[str, set[str]]
    kept: list[str]


def carry(prior: pathindex.PathIndex, result: Result, skipped: set[str]) -> None:
    """Adds to the walk's `result` what the `prior` index recorded below the folders it
    `skipped`; each folder's answer to "below a skipped one?" is remembered."""
    if not skipped and not result.kept:
        return
    below: dict[str, bool] = {"": False}

    def under(path: str) -> bool:
        chain = []
        while path not in below:
            if path in skipped:
                below[path] = True
                break
            chain.append(path)
            path = path.rpartition("/")[0]
        answer = below[path]
        for folder in chain:
            below[folder] = answer
        return answer

    if not _by_folder(prior, result):
        known = below.get
        for path, row in prior.files.items():  # a call per folder, not per file
            parent = path.rpartition("/")[0]
            if known(parent) or (known(parent) is None and under(parent)):
                result.rows[path] = row
        for path, tid in prior.dirs.items():
            if path not in skipped and under(path):
                result.dirs[path] = tid
                folder = prior.folders.get(path)
                if folder is not None:
                    result.folders[path] = folder
        _put_kept(prior, result)
    result.notes.extend(FidelityNote(p, r) for p, r in prior.notes if under(p))
    result.links.update(p for p in prior.links if under(p))


def _by_folder(prior: pathindex.PathIndex, result: Result) -> bool:
    """The carried tables as the last index less what the walk remade; False when the last
    index was not one a seal stored whole (a landing's rows may lie outside its folders)."""
    if not prior.exact or not prior.generation:
        return False
    rows, folders = table(prior.files).fork(), table(prior.folders).fork()
    dirs = dirs_table(prior.dirs).fork()
    remade = remade_folders(prior, result.walked, result.told, result.dirs)
    dropped = [path for folder in remade for path in pathindex.entries_in(prior, folder)]
    dropped.extend(join(folder, name) for folder, names in result.told.items() for name in names)
    for path in dropped:
        rows.pop(path, None)
        if dirs.pop(path, None) is not None:  # a file's path reads no folder's shard
            folders.pop(path, None)
    rows.update(result.rows)
    dirs.update(result.dirs)
    folders.update(result.folders)
    result.rows, result.dirs, result.folders = rows, dirs, folders
    result.remade = remade
    return True


def _put_kept(prior: pathindex.PathIndex, result: Result) -> None:
    """The kept entries of the folders told by name, as the last index recorded them."""
    for path in result.kept:
        row = prior.files.get(path)
        if row is not None:
            result.rows[path] = row
        tid = prior.dirs.get(path)
        if tid is not None:
            result.dirs[path] = tid
            folder = prior.folders.get(path)
            if folder is not None:
                result.folders[path] = folder


def remade_folders(
    prior: pathindex.PathIndex,
    walked: Iterable[str],
    told: Mapping[str, set[str]],
    dirs_now: Mapping[str, bytes],
) -> set[str]:
    """The folders whose entries a walk made anew: those it `walked` (listed whole), and every
    folder below one of them, or `told` by name, that the `prior` index held and the walk no
    longer found (gone since), with everything that was in it."""
    stack = list(walked)
    for folder, names in told.items():
        for name in names:
            path = join(folder, name)
            if path not in dirs_now and path in prior.dirs:
                stack.append(path)
    remade: set[str] = set()
    while stack:
        folder = stack.pop()
        if folder in remade:
            continue
        remade.add(folder)
        for path in dirs_table(prior.dirs).children(folder):
            if path not in dirs_now:
                stack.append(path)
    return remade
