"""`till watch` starts the watcher before it seals, so the seal it makes is taken under the
watcher's first token and the next seal (a snap, a hook) walks only what changed."""

from __future__ import annotations

from pathlib import Path

from tests.watch.conftest import WatchTill
from tillage.workspace import pathindex
from tillage.workspace.attach import require_workspace


def _index_token(t: WatchTill, folder: Path) -> str | None:
    ws = require_workspace(t.home, folder, None)
    try:
        return pathindex.load(ws.store, ws.id).token
    finally:
        ws.store.close()


def test_the_seal_of_till_watch_is_one_the_watcher_can_vouch_for(
    wtill: WatchTill, folder: Path
) -> None:
    for n in range(3):
        (folder / f"d{n}").mkdir()
        (folder / f"d{n}" / "f.txt").write_text(f"{n}\n")
    assert wtill.json("watch", "--debounce-ms", "600000")["watching"] is True
    token = _index_token(wtill, folder)
    assert token is not None
    assert wtill.rpc("tillage.changes_since", {"token": token})["dirs"] == []

    (folder / "d1" / "f.txt").write_text("changed\n")
    answer = wtill.rpc("tillage.changes_since", {"token": token})
    assert answer["dirs"] == ["d1"]  # the next seal lists d1 and the root, nothing else
    snap = wtill.json("snap")["snapshot"]
    assert wtill.json("diff", snap["id"])["changes"] == []
