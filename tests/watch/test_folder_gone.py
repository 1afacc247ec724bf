"""A watcher whose workspace folder is deleted or moved away stops, instead of lingering as a
daemon that watches nothing; `till status` in the moved folder says it is not watching."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.watch.conftest import WatchTill, daemon_pids, process_gone, wait_for
from tillage.workspace import watchstate


@pytest.mark.parametrize("how", ["deleted", "moved"])
def test_the_watcher_stops_when_its_folder_is_gone(
    wtill: WatchTill, folder: Path, tmp_path: Path, how: str
) -> None:
    (folder / "a.txt").write_text("a\n")
    assert wtill.json("watch")["watching"] is True
    [pid] = daemon_pids(wtill.home)
    workspace_id = wtill.workspace_id
    if how == "deleted":
        shutil.rmtree(folder)
    else:
        folder.rename(tmp_path / "moved")
    wait_for("the watcher to stop", lambda: process_gone(pid))
    assert not watchstate.is_watching(wtill.home, workspace_id)
    if how == "moved":
        wtill.cwd = tmp_path / "moved"
        status = wtill.json("status")
        assert status["watching"] is False
        assert status["workspace"] == str(tmp_path / "moved")
