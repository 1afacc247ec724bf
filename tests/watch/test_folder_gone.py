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


def test_the_watcher_never_puts_a_removed_pointer_back_so_rm_rf_of_the_folder_works(
    wtill: WatchTill, folder: Path
) -> None:
    """`rm -rf` empties `.tillage/` before removing it: a watcher sealing the deletions in
    between must not write the pointer again, or the removal fails ("Directory not empty").
    The user's own next command in the folder still puts it back."""
    (folder / "a.txt").write_text("a\n")
    assert wtill.json("watch", "--debounce-ms", "50")["watching"] is True
    workspace_id = wtill.workspace_id
    before = wtill.settle()["seals"]
    control = folder / ".tillage"
    for name in (".gitignore", "workspace.json"):
        (control / name).unlink()
    (folder / "a.txt").unlink()  # what rm -rf removes next: the watcher seals it

    def sealed_again() -> bool:
        # Only the watcher is asked: a command in the folder would put the pointer back.
        doc = watchstate.call(wtill.home, workspace_id, "tillage.ping", {}, 10)
        return not doc["pending"] and doc["seals"] > before

    wait_for("the watcher to seal the deletion", sealed_again)
    assert list(control.iterdir()) == []
    control.rmdir()  # as rm -rf would, with the watcher still running
    assert not control.exists()
    assert wtill.json("status")["watching"] is True  # the user's command restores it
    assert (control / "workspace.json").is_file()
