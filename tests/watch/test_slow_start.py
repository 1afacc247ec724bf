"""`till watch` waits for a daemon as long as it makes progress adding its first watches
(126,785 folders took 85 s at load 5, beyond a fixed wait), and gives up only on one that
makes none. The daemon's test knob TILLAGE_WATCH_SLOW_ADD_MS makes every watch take that long
(inert without TILLAGE_WATCH_DEBUG=1); the wait is shortened for the test instead of the
tree grown, so the daemon takes longer than the whole wait while each step takes a fraction
of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.watch.conftest import WatchTill, daemon_pids
from tillage.watch import daemon

WAIT = 2.0  # seconds without progress `till watch` accepts (20 in production)


def test_a_watcher_still_adding_watches_after_the_whole_wait_is_not_given_up(
    wtill: WatchTill, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(80):
        (folder / f"d{i:02}").mkdir()
    wtill.extra["TILLAGE_WATCH_SLOW_ADD_MS"] = "50"  # 81 folders: 4 s, twice the wait
    monkeypatch.setattr(daemon, "START_TIMEOUT", WAIT)
    doc = wtill.json("watch")
    assert doc["watching"] is True
    watcher = wtill.json("status")["watcher"]
    assert watcher["mode"] == "inotify" and watcher["watches"] == 81
    assert len(daemon_pids(wtill.home)) == 1


def test_a_watcher_that_makes_no_progress_is_reported_as_not_started(
    wtill: WatchTill, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (folder / "d").mkdir()
    wtill.extra["TILLAGE_WATCH_SLOW_ADD_MS"] = "600000"  # stuck after its first watch
    monkeypatch.setattr(daemon, "START_TIMEOUT", WAIT)
    run = wtill("--json", "watch")
    assert run.code == 1 and run.error["name"] == "unavailable"
    assert "did not start" in run.error["message"]
