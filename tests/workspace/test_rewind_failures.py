"""A rewind that cannot finish says so as a public error, names the way back, and never wedges."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.helpers import manifest


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission")
def test_a_folder_made_read_only_after_the_seal_is_rewound(till: Till, folder: Path) -> None:
    # Contract change (issue 6): a rewind lends write permission to the folders it writes into
    # and puts their modes back; tests/workspace/test_fidelity_restore.py tests it as another user
    # when the suite runs as root.
    (folder / "locked").mkdir()
    (folder / "locked" / "f.txt").write_text("v1")
    head = till.json("watch", "--no-daemon")["head"]
    (folder / "locked" / "f.txt").write_text("v2")
    (folder / "locked").chmod(0o500)
    try:
        till.json("rewind", head["id"], "--yes")
        assert (folder / "locked" / "f.txt").read_text() == "v1"
        assert (folder / "locked").stat().st_mode & 0o777 == 0o755
    finally:
        (folder / "locked").chmod(0o700)


def test_a_damaged_index_is_set_aside_and_rebuilt(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("v1")
    head = till.json("watch", "--no-daemon")["head"]
    index = till.home / "index.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    index.write_bytes(b"this is not a database" * 100)
    doc = till.json("timeline")
    assert [s["id"] for s in doc["snapshots"]] == [head["id"]]
    (folder / "a.txt").write_text("v2")
    till.json("rewind", head["id"], "--yes")
    assert (folder / "a.txt").read_text() == "v1"


def test_a_rewind_whose_objects_are_missing_leaves_the_folder_untouched(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("version one\n" * 100)
    head = till.json("watch", "--no-daemon")["head"]
    (folder / "a.txt").write_text("version two\n")
    for pack in (till.home / "packs").iterdir():
        pack.chmod(0o644)
        pack.unlink()
    (till.home / "index.sqlite").unlink()
    before = manifest(folder)
    run = till("--json", "rewind", head["id"], "--yes")
    assert run.code == 1
    assert run.error["code"] in (-32061, -32067)
    assert manifest(folder) == before


def test_status_during_a_rewind_in_another_process_answers_without_waiting(
    till: Till, folder: Path
) -> None:
    import fcntl
    import json
    import time

    (folder / "a.txt").write_text("v1")
    head = till.json("watch", "--no-daemon")["head"]
    workspace = till.json("status")["id"]
    # What a running rewind looks like from outside: its intent, and the workspace lock held.
    intent = till.home / "intents" / f"rewind-{workspace}.json"
    intent.write_text(json.dumps({"target": head["id"], "undo": head["id"], "scopes": None}))
    lock = os.open(till.home / "locks" / f"ws-{workspace}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = time.monotonic()
        status = till.json("status")
        assert time.monotonic() - started < 10
        assert status["head"]["id"] == head["id"]
        assert intent.exists(), "the running rewind's intent is its own business"
    finally:
        os.close(lock)
    intent.unlink()
