"""The watcher's seals make the radar look: a collision between a fork and the watched
workspace opens a `conflict` event with nobody running `till radar`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import make_project
from tests.watch.conftest import WatchTill, wait_for


def _conflicts(wtill: WatchTill) -> list[dict[str, Any]]:
    run = wtill("--json", "events")
    docs = [json.loads(line) for line in run.stdout.splitlines() if line]
    return [d["detail"] for d in docs if d["kind"] == "conflict"]


def test_a_watch_seal_that_collides_with_a_fork_opens_a_conflict_event(
    wtill: WatchTill, folder: Path
) -> None:
    make_project(folder)
    wtill.json("watch", "--debounce-ms", "50")
    fork = Path(wtill.json("fork", "a")["fork"]["path"])
    (fork / "README.md").write_text("the fork's version\n")
    wtill.json("snap", cwd=fork)
    (folder / "README.md").write_text("the workspace's version\n")  # the watcher seals it
    opened = wait_for("a conflict event", lambda: _conflicts(wtill), timeout=30)
    assert [(c["path"], c["forks"], c["workspace"], c["state"]) for c in opened] == [
        ("README.md", ["a"], True, "opened")
    ]
    wtill.json("watch", "--stop")
