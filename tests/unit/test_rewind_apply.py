"""How a rewind applies: durable before its intent goes, progress from both of its stages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tillage import call
from tillage.core.progress import Progress, ProgressFn
from tillage.platform import folders
from tillage.workspace import rewind as rw
from tillage.workspace.attach import Workspace, find_workspace
from tillage.workspace.journal import applier
from tillage.workspace.journal.intents import intent_path


def _wrecked(tmp_path: Path) -> tuple[Path, Path, str]:
    home, folder = tmp_path / "store", tmp_path / "ws"
    (folder / "sub").mkdir(parents=True)
    for n in range(20):
        (folder / "sub" / f"f{n}.txt").write_bytes(b"v1 %d\n" % n * 100)
    (folder / "big.bin").write_bytes(bytes(range(256)) * 8192)  # 2 MiB: several chunks
    first = call("workspace.watch", home=home, folder=folder, no_daemon=True).head.id
    for n in range(20):
        (folder / "sub" / f"f{n}.txt").unlink()
    (folder / "big.bin").write_bytes(b"wrecked")
    return home, folder, first


def _rewind_to(ws: Workspace, snapshot: str, on_progress: ProgressFn | None = None) -> None:
    try:
        target = ws.store.snapshot(snapshot)
        assert target is not None
        rw.apply(ws, target, None, on_progress=on_progress)
    finally:
        ws.store.close()


def test_the_folder_is_made_durable_before_the_intent_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, folder, first = _wrecked(tmp_path)
    ws = find_workspace(home, folder)
    assert ws is not None
    seen: list[bool] = []
    real = folders.syncfs

    def syncfs(fd: int) -> None:
        seen.append(intent_path(ws).exists())
        real(fd)

    monkeypatch.setattr(applier, "syncfs", syncfs)
    _rewind_to(ws, first)
    assert seen == [True]
    assert (folder / "sub" / "f3.txt").read_bytes() == b"v1 3\n" * 100


def test_a_large_file_goes_to_the_disk_as_it_is_written_before_the_final_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk writes a large restored file while the rest is written, so the final sync
    has less to wait for; small files are left to that one sync."""
    home, folder, first = _wrecked(tmp_path)
    ws = find_workspace(home, folder)
    assert ws is not None
    events: list[object] = []
    real_datasync, real_syncfs = os.fdatasync, folders.syncfs

    def fdatasync(fd: int) -> None:
        events.append(os.fstat(fd).st_size)
        real_datasync(fd)

    def syncfs(fd: int) -> None:
        events.append("syncfs")
        real_syncfs(fd)

    monkeypatch.setattr(applier, "EARLY_SYNC_BYTES", 1 << 20)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(applier, "syncfs", syncfs)
    _rewind_to(ws, first)
    assert events == [2 * 1024 * 1024, "syncfs"]
    assert (folder / "big.bin").read_bytes() == bytes(range(256)) * 8192


def test_a_rewind_reports_progress_while_staging_and_applying(tmp_path: Path) -> None:
    home, folder, first = _wrecked(tmp_path)
    ws = find_workspace(home, folder)
    assert ws is not None
    reports: list[Progress] = []
    _rewind_to(ws, first, reports.append)
    for stage in ("staging", "applying"):
        last = [p for p in reports if p.stage == stage][-1]
        assert last.files_done == last.files_total == 21
        assert last.bytes_done == last.bytes_total == 10 * 500 + 10 * 600 + 2 * 1024 * 1024


def test_folders_a_rewind_makes_are_spread_away_from_freshly_freed_inodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    home, folder, first = _wrecked(tmp_path)
    shutil.rmtree(folder / "sub")  # the wipe: `sub` must be made again
    marked: list[int] = []
    real = folders.spread_new_folders

    def spread(fd: int) -> object:
        marked.append(os.fstat(fd).st_ino)
        return real(fd)

    monkeypatch.setattr(applier, "spread_new_folders", spread)
    ws = find_workspace(home, folder)
    assert ws is not None
    _rewind_to(ws, first)
    assert marked == [os.stat(folder).st_ino], "the folder that gets new folders is marked"
    assert (folder / "sub" / "f3.txt").read_bytes() == b"v1 3\n" * 100


def test_small_files_of_later_folders_are_written_while_a_large_file_is_still_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's thread does not wait for the pool's large file at each run of folders: here
    the large file's write waits until a file of the last folder is written, which it could
    never see if the plan's thread waited for the pool first."""
    import threading

    home, folder = tmp_path / "store", tmp_path / "ws"
    names = [f"d{n:02d}" for n in range(12)]
    for name in names:
        (folder / name).mkdir(parents=True)
        (folder / name / "small.txt").write_bytes(name.encode() * 50)
    big = bytes(range(256)) * 8192
    # 2 MiB: written in the pool (and not the plan's first action, which runs on its own)
    (folder / names[0] / "zbig.bin").write_bytes(big)
    first = call("workspace.watch", home=home, folder=folder, no_daemon=True).head.id
    for name in names:
        for child in (folder / name).iterdir():
            child.write_bytes(b"wrecked")
    last_written = threading.Event()
    waited: list[bool] = []
    real = applier.Applier._put_group

    def put_group(self: applier.Applier, group: list[tuple[applier.Action, int, str]]) -> object:
        paths = [action.path for action, _fd, _name in group]
        if f"{names[0]}/zbig.bin" in paths:
            waited.append(last_written.wait(20))
        outcome = real(self, group)
        if f"{names[-1]}/small.txt" in paths:
            last_written.set()
        return outcome

    monkeypatch.setattr(applier, "DIR_FD_BUDGET", 4)  # runs of two folders: six of them
    monkeypatch.setattr(applier.Applier, "_put_group", put_group)
    ws = find_workspace(home, folder)
    assert ws is not None
    _rewind_to(ws, first)
    assert waited == [True]
    assert (folder / names[0] / "zbig.bin").read_bytes() == big
    for name in names:
        assert (folder / name / "small.txt").read_bytes() == name.encode() * 50
