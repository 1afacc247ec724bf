"""A seal of many small files closes packs on the way (store/writer.py: past a record count,
as past a size): killed or failing at that step, it leaves a store that verifies, no
snapshot, and the next seal stores everything (INV-2, INV-3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.faults.harness import (
    Manifest,
    assert_crashed,
    logged_snapshots,
    manifest,
    packs,
    rewind,
    verify_store,
    write_state,
)

ROTATION_FAILPOINTS = ("objects.after_rotate_fsync", "pack.after_fsync")

# Runs the command line with packs closed every 4 records, crashing at the second pass of the
# failpoint argv[1] ('raise' or 'kill', argv[2]): one pack closed and indexed, one synced.
ROTATING_CRASH_SCRIPT = (
    "import os, signal, sys\n"
    "from tillage.platform import failpoints\n"
    "from tillage.store.store import ObjectWriter\n"
    "ObjectWriter.PACK_RECORDS = 4\n"
    "passes = []\n"
    "def at():\n"
    "    passes.append(1)\n"
    "    if len(passes) == 2:\n"
    "        if sys.argv[2] == 'kill':\n"
    "            os.kill(os.getpid(), signal.SIGKILL)\n"
    "        raise failpoints.FailpointCrashError(sys.argv[1])\n"
    "failpoints.arm(sys.argv[1], at)\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[3:]))\n"
)


def _small_files(tag: str) -> dict[str, Any]:
    return {f"src/m{i // 10}/f{i}.txt": f"{tag} file {i}\n".encode() for i in range(40)}


@pytest.mark.parametrize("failpoint", ROTATION_FAILPOINTS)
@pytest.mark.parametrize("action", ["raise", "kill"])
def test_a_seal_that_crashes_closing_a_pack_leaves_a_store_that_verifies_and_seals_again(
    till: Till, folder: Path, failpoint: str, action: str
) -> None:
    write_state(folder, {"README.md": b"hello\n"})
    head = till.json("watch", "--no-daemon")["head"]["id"]
    write_state(folder, _small_files("crashed"))
    proc = subprocess.run(
        [sys.executable, "-c", ROTATING_CRASH_SCRIPT, failpoint, action, "--json", "snap"],
        cwd=till.cwd,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_crashed(proc, failpoint, action)
    assert len(packs(till.home)) >= 2, "the crashed seal had closed a pack"

    status: dict[str, Any] = till.json("status")
    assert status["head"]["id"] == head
    verify = verify_store(till)
    assert verify["ok"] is True, verify
    assert logged_snapshots(till.home) == [head]

    state: Manifest = manifest(folder)
    after = till.json("snap")["snapshot"]
    assert after["parent"] == head
    write_state(folder, {"README.md": b"elsewhere\n"})
    rewind(till, after["id"])
    assert manifest(folder) == state
    assert verify_store(till)["ok"] is True
