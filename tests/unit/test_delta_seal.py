"""A seal through a watcher's changed folders (a delta walk) lists only those folders, and gives
what a full walk gives; whenever the watcher cannot vouch for the interval (an unknown token,
another run's token, lost events), or the path index is damaged or old, the seal walks it all.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from tillage.core.changes import ChangeLog
from tillage.store import index as ix
from tillage.workspace import pathindex, watchstate
from tillage.workspace.attach import Workspace, attach
from tillage.workspace.capture import Capture, Walker
from tillage.workspace.pathindex import PathIndex
from tillage.workspace.policy import Policy
from tillage.workspace.seal import Sealed, SealOptions, scan_live, seal_result

FOLDERS = 12  # d00..d11, each with a sub/ folder: 1 + 12 * 2 folders in all
ALL_FOLDERS = 1 + FOLDERS * 2


def _tree(root: Path) -> None:
    for d in range(FOLDERS):
        sub = root / f"d{d:02d}" / "sub"
        sub.mkdir(parents=True)
        for f in range(5):
            (root / f"d{d:02d}" / f"f{f}.txt").write_text(f"file {d}.{f}\n" * (f + 1))
            (sub / f"g{f}.txt").write_text(f"deeper {d}.{f}\n")
    (root / "top.txt").write_text("top\n")


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    folder = tmp_path / "ws"
    folder.mkdir()
    _tree(folder)
    workspace = attach(tmp_path / "store", folder, None).workspace
    try:
        yield workspace
    finally:
        watchstate.register_local(workspace.id, None)
        workspace.store.close()


def _watch(ws: Workspace, epoch: str = "run1") -> ChangeLog:
    log = ChangeLog(epoch)
    watchstate.register_local(ws.id, log)
    return log


def _seal(ws: Workspace, *, skip_unchanged: bool = False) -> Sealed:
    return seal_result(ws, SealOptions(trigger="manual", skip_unchanged=skip_unchanged))


def _full(ws: Workspace) -> Capture:
    """A fresh full walk of the folder that stores nothing: the truth to compare with."""
    return Walker(ws.root, Policy.load(ws.root), PathIndex(), None, ws.store.tmp_dir, 0).run()


def _same_as_full(ws: Workspace, capture: Capture) -> None:
    full = _full(ws)
    assert capture.root == full.root
    assert (capture.files, capture.total_bytes) == (full.files, full.total_bytes)
    assert capture.notes == full.notes
    assert capture.rows.keys() == full.rows.keys()
    assert capture.dirs == full.dirs
    assert capture.folders.keys() == full.folders.keys()


def test_a_delta_seal_lists_only_the_changed_folders_and_equals_a_full_walk(
    ws: Workspace,
) -> None:
    log = _watch(ws)
    first = _seal(ws).capture
    assert first.listed == ALL_FOLDERS  # no token yet: a full walk, which gets one

    (ws.root / "d03" / "sub" / "g1.txt").write_text("changed\n")
    log.note("d03/sub")
    (ws.root / "d07" / "new.txt").write_text("new\n")
    log.note("d07")
    second = _seal(ws).capture

    # The folders noted without names are listed whole; the root and d03 above them are not
    # listed at all: only their subfolders on the way to a change are looked at again.
    assert second.listed == 2
    assert second.statted < first.statted / 3
    # The two changed files, and any file that was racily clean at the first seal (INV-8).
    assert 2 <= second.read_files <= second.statted
    _same_as_full(ws, second)


def test_nothing_noted_lists_nothing(ws: Workspace) -> None:
    _watch(ws)
    _seal(ws)
    again = _seal(ws).capture
    assert again.listed == 0
    _same_as_full(ws, again)


def test_a_scan_of_the_live_folder_may_use_the_delta_and_keeps_the_whole_manifest(
    ws: Workspace,
) -> None:
    log = _watch(ws)
    _seal(ws)
    (ws.root / "d05" / "f2.txt").write_text("edited\n")
    log.note("d05")

    live = scan_live(ws)

    assert live.listed == 1  # d05 (noted whole); the root above it is not listed
    full = Walker(
        ws.root, Policy([]), PathIndex(), None, ws.store.tmp_dir, 0, keep_manifest=True
    ).run()
    assert live.manifest == full.manifest
    assert live.root == full.root


def test_without_a_watcher_the_seal_walks_everything_and_keeps_no_token(ws: Workspace) -> None:
    capture = _seal(ws).capture
    assert capture.listed == ALL_FOLDERS
    assert pathindex.load(ws.store, ws.id).token is None

    _watch(ws)
    assert _seal(ws).capture.listed == ALL_FOLDERS  # the first token comes from a full walk
    assert pathindex.load(ws.store, ws.id).token is not None
    assert _seal(ws).capture.listed == 0  # a token and nothing noted: nothing listed


@pytest.mark.parametrize("why", ["another run", "lost events", "a token from the future"])
def test_a_watcher_that_cannot_vouch_means_a_full_walk(ws: Workspace, why: str) -> None:
    log = _watch(ws)
    _seal(ws)
    (ws.root / "d02" / "f0.txt").write_text("changed while nobody could vouch\n")
    if why == "another run":
        log = _watch(ws, epoch="run2")
    elif why == "lost events":
        log.lose()
    else:
        index = pathindex.load(ws.store, ws.id)
        index.token = "run1:999"
        pathindex.save(ws.store, ws.id, index)

    capture = _seal(ws).capture

    assert capture.listed == ALL_FOLDERS
    _same_as_full(ws, capture)
    assert _seal(ws).capture.listed == 0  # and the next seal has a token again


def test_a_changed_policy_means_a_full_walk(ws: Workspace) -> None:
    log = _watch(ws)
    _seal(ws)
    (ws.root / ".tillagepolicy").write_text("sub/\n")
    log.note("")

    capture = _seal(ws).capture

    assert capture.listed == 1 + FOLDERS  # every folder, but the excluded sub/ ones
    _same_as_full(ws, capture)


def test_folders_with_a_hard_link_are_always_visited(ws: Workspace) -> None:
    log = _watch(ws)
    os.link(ws.root / "d01" / "f0.txt", ws.root / "d09" / "linked.txt")
    _seal(ws)

    unchanged = _seal(ws).capture
    assert unchanged.listed == 2  # d01 and d09, though nothing was noted
    _same_as_full(ws, unchanged)

    # Removing one name changes the other's link count and first name: no event in d01.
    (ws.root / "d09" / "linked.txt").unlink()
    log.note("d09")
    _same_as_full(ws, _seal(ws).capture)


def test_a_new_hard_link_to_a_file_in_a_skipped_folder_gives_a_full_walk(
    ws: Workspace,
) -> None:
    log = _watch(ws)
    _seal(ws)
    # The first name (d00/f1.txt) is in a folder nothing was noted in.
    os.link(ws.root / "d00" / "f1.txt", ws.root / "d10" / "again.txt")
    log.note("d10")

    capture = _seal(ws).capture

    _same_as_full(ws, capture)
    assert capture.listed == ALL_FOLDERS
    assert _seal(ws).capture.listed == 2  # from now on d00 and d10 are always listed


def test_a_replaced_folder_is_walked_whole_even_if_not_noted(ws: Workspace) -> None:
    log = _watch(ws)
    _seal(ws)
    (ws.root / "d04").rename(ws.root / "old")
    (ws.root / "d06").rename(ws.root / "d04")  # d04 is now another folder, moved in
    (ws.root / "d04" / "sub" / "g0.txt").write_text("changed\n")
    log.note("")  # only the root's listing is noted, as a watcher would do for the renames

    _same_as_full(ws, _seal(ws).capture)


def test_a_folder_moved_away_and_back_is_walked_whole(ws: Workspace) -> None:
    """What changed in it meanwhile was noted under the path it had then."""
    log = _watch(ws)
    _seal(ws)
    (ws.root / "d04").rename(ws.root / "d05" / "d04")
    log.note("")
    log.note("d05")
    (ws.root / "d05" / "d04" / "sub" / "g0.txt").write_text("changed away\n")
    log.note("d05/d04/sub")
    (ws.root / "d05" / "d04").rename(ws.root / "d04")
    log.note("")
    log.note("d05")

    _same_as_full(ws, _seal(ws).capture)


def test_skip_unchanged_adds_no_snapshot_when_nothing_changed(ws: Workspace) -> None:
    log = _watch(ws)
    first = _seal(ws, skip_unchanged=True)
    assert first.added

    same = _seal(ws, skip_unchanged=True)
    assert not same.added
    assert same.row == first.row
    assert ws.store.snapshot_count(ws.id) == 1

    (ws.root / "top.txt").write_text("changed\n")
    log.note("")
    changed = _seal(ws, skip_unchanged=True)
    assert changed.added
    assert changed.row.parent == first.row.id
    assert ws.store.snapshot_count(ws.id) == 2

    assert _seal(ws).added  # without the option, a seal always adds one
    assert ws.store.snapshot_count(ws.id) == 3


def _put_raw_index(ws: Workspace, blob: bytes) -> None:
    with ix.write_txn(ws.store.conn):
        ws.store.conn.execute(
            "INSERT OR REPLACE INTO pathindex(workspace, data) VALUES (?, ?)", (ws.id, blob)
        )


@pytest.mark.parametrize("damage", ["garbage", "format 5", "wrong types"])
def test_a_damaged_or_old_path_index_means_a_full_walk(ws: Workspace, damage: str) -> None:
    log = _watch(ws)
    _seal(ws)
    token = pathindex.load(ws.store, ws.id).token
    if damage == "garbage":
        blob = b"\x28\xb5\x2f\xfd not really zstd"
    elif damage == "format 5":
        blob = zstandard.ZstdCompressor().compress(marshal.dumps((5, {}, {})))
    else:
        links = ["a list where a frozenset belongs"]
        fields = (pathindex.FORMAT, {}, {}, {}, [], links, token, b"")
        blob = zstandard.ZstdCompressor().compress(marshal.dumps(fields))
    _put_raw_index(ws, blob)
    assert pathindex.load(ws.store, ws.id) == PathIndex()
    (ws.root / "d08" / "f3.txt").write_text("changed\n")
    log.note("d08")

    capture = _seal(ws).capture

    assert capture.listed == ALL_FOLDERS
    assert capture.read_files == capture.files  # nothing known: every file read again
    _same_as_full(ws, capture)


def test_names_told_by_the_watcher_are_all_a_seal_looks_at_in_their_folder(
    ws: Workspace,
) -> None:
    """With the changed names told, a folder is not listed: its other entries, their path
    index rows and their fidelity notes (a FIFO here) are the ones the last seal stored."""
    os.mkfifo(ws.root / "d03" / "pipe")
    os.symlink("f0.txt", ws.root / "d03" / "link")
    log = _watch(ws)
    _seal(ws)
    (ws.root / "d03" / "f1.txt").write_text("changed\n")
    log.note("d03", "f1.txt")
    (ws.root / "d03" / "new.txt").write_text("new\n")
    log.note("d03", "new.txt")
    (ws.root / "d03" / "sub" / "g0.txt").unlink()
    log.note("d03/sub", "g0.txt")

    capture = _seal(ws).capture

    assert capture.listed == 0
    assert capture.statted == 5  # the three names, and d03 and d03/sub on the way to them
    assert any(n.path == "d03/pipe" for n in capture.notes)
    _same_as_full(ws, capture)


def test_a_told_name_that_is_a_sqlite_sidecar_lists_its_folder_whole(ws: Workspace) -> None:
    log = _watch(ws)
    _seal(ws)
    (ws.root / "d04" / "app.db-wal").write_bytes(b"not really a wal\n")
    log.note("d04", "app.db-wal")

    capture = _seal(ws).capture

    assert capture.listed == 1  # d04, whole: a sidecar folds into its database's entry
    _same_as_full(ws, capture)


def test_a_note_on_an_unchanged_folder_is_carried_once(ws: Workspace) -> None:
    """A folder the last seal could not read carries its note into a seal that does not list
    its parent, once (as a full walk would give it), not once per way of carrying it."""
    log = _watch(ws)
    _seal(ws)
    index = pathindex.load(ws.store, ws.id)
    index.notes.append(("d05/sub", "directory unreadable: Permission denied"))
    pathindex.save(ws.store, ws.id, index)
    (ws.root / "d05" / "f1.txt").write_text("changed\n")
    log.note("d05", "f1.txt")

    capture = _seal(ws).capture

    assert capture.listed == 0
    assert [n.path for n in capture.notes].count("d05/sub") == 1
