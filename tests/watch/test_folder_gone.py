"""A watcher whose workspace folder, or store, is deleted or moved away stops, instead of
lingering as a daemon that watches nothing (or seals into a store made anew); `till status` in
the moved folder says it is not watching."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
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


def test_the_watcher_stops_when_its_store_is_deleted(wtill: WatchTill, folder: Path) -> None:
    """`rm -rf $TILLAGE_HOME` while watched: the daemon notices its store is gone and stops,
    rather than run on and seal into whatever store is made at that path next."""
    (folder / "a.txt").write_text("a\n")
    assert wtill.json("watch")["watching"] is True
    [pid] = daemon_pids(wtill.home)
    shutil.rmtree(wtill.home)
    wait_for("the watcher to stop", lambda: process_gone(pid))
    assert not wtill.home.exists()  # nothing of it written again


def _stopped_with_sigterm_pending(pid: int) -> bool:
    """Whether process `pid` (stopped by SIGSTOP) has been sent SIGTERM since."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("ShdPnd:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def test_watch_stop_leaves_no_watcher_of_the_folder_after_its_store_was_made_anew(
    wtill: WatchTill, folder: Path
) -> None:
    """A watcher that has not yet noticed its store is gone (held stopped here) holds no lock
    in the store made anew at the same path: `watch --stop` still stops it before it says
    stopped, and no watcher of the folder is left."""
    (folder / "a.txt").write_text("a\n")
    assert wtill.json("watch")["watching"] is True
    [stray] = daemon_pids(wtill.home)
    os.kill(stray, signal.SIGSTOP)
    try:
        shutil.rmtree(wtill.home)
        assert wtill.json("watch")["watching"] is True  # a new store, a new watcher
        new = [pid for pid in daemon_pids(wtill.home) if pid != stray]
        assert len(new) == 1

        def resume_once_told_to_stop() -> None:
            # The stray runs again only once it has been told to stop.
            with contextlib.suppress(AssertionError, OSError):
                wait_for("a SIGTERM", lambda: _stopped_with_sigterm_pending(stray), 60)
            with contextlib.suppress(ProcessLookupError):
                os.kill(stray, signal.SIGCONT)

        helper = threading.Thread(target=resume_once_told_to_stop)
        helper.start()
        stopped = wtill.json("watch", "--stop")
        helper.join()
        assert stopped["stopped"] is True
        assert daemon_pids(wtill.home) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stray, signal.SIGCONT)
