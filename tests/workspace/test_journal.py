"""The journal (workspace/journal/): one landing for rewinds and merges, finished from its intent
alone, and a lookup that finishes nothing (recovery.open_workspace does)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tillage.features.merge.merge import merge_snapshot
from tillage.platform import failpoints
from tillage.platform.failpoints import FailpointCrashError
from tillage.store.events import EVENT_RECORD, LogFollower
from tillage.workspace.attach import Workspace, attach, find_workspace
from tillage.workspace.journal.intents import intent_path
from tillage.workspace.recovery import open_workspace, recover_if_interrupted
from tillage.workspace.rewind import apply
from tillage.workspace.seal import SealOptions, seal
from tillage.workspace.trees import flatten, read_file_bytes


def _diverged(tmp_path: Path) -> tuple[Workspace, str, str]:
    """A workspace whose history forked: `theirs` edited x.txt's last line, the folder (ours)
    its first. Returns the workspace, theirs and the base."""
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "x.txt").write_text("one\ntwo\nthree\n")
    (folder / "keep.txt").write_text("keep\n")
    ws = attach(tmp_path / "store", folder, None).workspace
    base = seal(ws, SealOptions(trigger="manual"))
    (folder / "x.txt").write_text("one\ntwo\nTHREE\n")
    theirs = seal(ws, SealOptions(trigger="manual"))
    apply(ws, base, None)
    (folder / "x.txt").write_text("ONE\ntwo\nthree\n")
    return ws, theirs.id, base.id


def _merged_events(ws: Workspace) -> list[dict[str, object]]:
    return [
        r.body
        for r in LogFollower(ws.store.log, 0).records()
        if r.kind == EVENT_RECORD and r.body.get("kind") == "merged"
    ]


def test_a_merge_intent_left_by_an_earlier_build_is_finished(tmp_path: Path) -> None:
    ws, theirs, base = _diverged(tmp_path)
    with failpoints.armed("rewind.after_intent"), pytest.raises(FailpointCrashError):
        merge_snapshot(ws, theirs, base)
    assert (ws.root / "x.txt").read_text() == "ONE\ntwo\nthree\n"  # killed before a write
    # The intent as the build before the journal wrote it: no `seal`, no `kind` in `tell`.
    intent = json.loads(intent_path(ws).read_bytes())
    del intent["seal"]
    del intent["tell"]["kind"]
    intent_path(ws).write_text(json.dumps(intent))

    assert recover_if_interrupted(ws)
    assert not intent_path(ws).exists()
    assert (ws.root / "x.txt").read_text() == "ONE\ntwo\nTHREE\n"
    head = ws.store.head(ws.id)
    assert head is not None and head.trigger == "merge" and head.label == intent["label"]
    told = _merged_events(ws)
    assert [e["detail"]["result"] for e in told] == [head.id]  # type: ignore[index]


def test_a_file_written_while_a_merge_lands_is_kept_in_a_rescue_snapshot(tmp_path: Path) -> None:
    ws, theirs, base = _diverged(tmp_path)

    def concurrent_writer() -> None:  # between the intent and the first write
        (ws.root / "x.txt").write_text("written during the merge\n")

    with failpoints.armed("rewind.after_intent", concurrent_writer):
        outcome = merge_snapshot(ws, theirs, base)
    assert outcome.landed
    assert not intent_path(ws).exists()
    rescues = [
        s for s in ws.store.snapshots(ws.id, limit=10) if (s.label or "").startswith("rescued")
    ]
    assert [s.label.split(" (")[0] for s in rescues] == ["rescued during merge"]
    kept = flatten(ws.store, bytes.fromhex(rescues[0].tree))["x.txt"]
    assert read_file_bytes(ws.store, kept) == b"written during the merge\n"


def test_a_lookup_finishes_nothing_and_opening_finishes_the_landing(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("first\n")
    ws = attach(tmp_path / "store", folder, None).workspace
    first = seal(ws, SealOptions(trigger="manual"))
    (folder / "a.txt").write_text("second\n")
    with failpoints.armed("rewind.after_intent"), pytest.raises(FailpointCrashError):
        apply(ws, first, None)
    ws.store.close()

    found = find_workspace(tmp_path / "store", folder)
    assert found is not None
    try:
        assert intent_path(found).exists()  # a question only looked
        assert (folder / "a.txt").read_text() == "second\n"
    finally:
        found.store.close()

    opened = open_workspace(tmp_path / "store", folder)
    try:
        assert not intent_path(opened).exists()
        assert (folder / "a.txt").read_text() == "first\n"
    finally:
        opened.store.close()


def test_a_torn_intent_is_dropped_and_the_folder_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text("as it is\n")
    ws = attach(tmp_path / "store", folder, None).workspace
    seal(ws, SealOptions(trigger="manual"))
    intent_path(ws).parent.mkdir(parents=True, exist_ok=True)
    intent_path(ws).write_text('{"op": "rewind", "tar')
    assert not recover_if_interrupted(ws)
    assert not intent_path(ws).exists()
    assert (folder / "a.txt").read_text() == "as it is\n"
