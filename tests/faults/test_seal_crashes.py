"""A seal killed or failing at every durable step (INV-2, INV-5): nothing published is damaged."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.faults.harness import (
    PUBLISHED_AT,
    SEAL_FAILPOINTS,
    STATE_A,
    STATE_B,
    STATE_C,
    Manifest,
    assert_crashed,
    crash,
    log_records,
    logged_snapshots,
    manifest,
    noise,
    rewind,
    verify_store,
    write_state,
)


@pytest.mark.parametrize("failpoint", SEAL_FAILPOINTS)
def test_a_seal_that_crashes_at_any_durable_step_leaves_a_store_that_verifies_and_seals_again(
    till: Till, folder: Path, failpoint: str
) -> None:
    """Crashes twice at the same step, first failing in-process ('raise'), then SIGKILLed."""
    write_state(folder, STATE_A)
    head = till.json("watch", "--no-daemon")["head"]["id"]
    published = failpoint in PUBLISHED_AT
    expected = [head]
    crashed: list[tuple[str, Manifest]] = []
    for action, state in (("raise", STATE_B), ("kill", STATE_C)):
        write_state(folder, state)
        at_crash = manifest(folder)
        proc = crash(till, failpoint, action, "--json", "snap", "-m", action)
        assert_crashed(proc, failpoint, action)

        status: dict[str, Any] = till.json("status")
        verify = verify_store(till)
        assert verify["ok"] is True, (action, verify)
        assert verify["damaged_snapshots"] == []
        if published:
            assert status["head"]["label"] == action and status["head"]["parent"] == head
            head = status["head"]["id"]
            expected.append(head)
            crashed.append((head, at_crash))
        assert status["head"]["id"] == head, action
        assert status["snapshots"] == len(expected)
        assert logged_snapshots(till.home) == expected

    write_state(folder, {"after.txt": noise(9, 5000), "sub/x": b"x\n"})
    state = manifest(folder)
    after = till.json("snap")["snapshot"]
    assert after["parent"] == head
    write_state(folder, STATE_A)
    rewind(till, after["id"])
    assert manifest(folder) == state
    for snapshot, at_crash in crashed:
        rewind(till, snapshot)
        assert manifest(folder) == at_crash
    log_records(till.home)


# Runs the command line with the live-database imaging step SIGKILLing the process once its
# private copy of the database is made (argv: till-args...).
KILLED_WHILE_IMAGING = (
    "import os, signal, sys\n"
    "from tillage.workspace import sqlite_image\n"
    "made = sqlite_image._backup_to_temp\n"
    "def made_then_killed(*args):\n"
    "    made(*args)\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "sqlite_image._backup_to_temp = made_then_killed\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_a_seal_killed_while_it_images_a_live_database_leaves_no_copy_of_it(
    till: Till, folder: Path
) -> None:
    db = folder / "live.db"
    writer = sqlite3.connect(db)
    try:
        writer.execute("PRAGMA journal_mode=wal")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("CREATE TABLE t(x)")
        writer.execute("INSERT INTO t VALUES (1)")
        writer.commit()
        till.json("watch", "--no-daemon")
        writer.execute("INSERT INTO t VALUES (2)")
        writer.commit()  # held open: the row is a frame in the -wal
        proc = subprocess.run(
            [sys.executable, "-c", KILLED_WHILE_IMAGING, "--json", "snap"],
            cwd=folder,
            env=till.env(),
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == -9, proc.stderr
    finally:
        writer.close()

    assert verify_store(till, "--repair")["ok"] is True

    tmp = till.home / "tmp"
    assert not tmp.is_dir() or sorted(p.name for p in tmp.iterdir()) == []
