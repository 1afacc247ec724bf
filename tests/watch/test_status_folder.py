"""`till status` with a watcher running: the folder is described from what the watcher saw
change, so even a folder too large to walk on every status gets a count."""

from __future__ import annotations

from pathlib import Path

from tests.watch.conftest import WatchTill
from tillage.verbs.folder import WALK_MAX


def test_status_counts_a_large_folders_changes_from_what_the_watcher_saw(
    wtill: WatchTill, folder: Path
) -> None:
    for d in range(5):
        (folder / f"d{d}").mkdir()
        for i in range(WALK_MAX // 5 + 1):
            (folder / f"d{d}" / f"f{i}").write_bytes(b"")
    assert wtill.json("watch", "--debounce-ms", "60000")["watching"] is True
    head = wtill.json("status")["head"]
    assert head["files"] > WALK_MAX
    (folder / "d3" / "f7").write_text("changed")
    (folder / "d4" / "new").write_text("new")
    doc = wtill.json("status")["folder"]
    assert doc["checked"] is True and doc["how"] == "watcher"
    assert doc["differs"] == len(wtill.json("diff", "head")["changes"]) == 2
    # The same answer through the socket door (the watcher's own process) and at a terminal.
    assert wtill("--json", "status", process=True).doc["folder"] == doc
    assert "2 paths differ from the head" in wtill("status").stdout
