"""Writers at once (INV-5): each owns its pack, publication is serialised, nothing is lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import Till
from tests.faults.harness import (
    STATE_A,
    Manifest,
    log_records,
    manifest,
    noise,
    verify_store,
    write_state,
)


def _start(till: Till, cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", *args],
        cwd=cwd,
        env=till.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (proc.returncode, out, err)
    doc = json.loads(out)
    assert isinstance(doc, dict)
    return doc


def test_two_snaps_of_one_workspace_at_once_both_land_in_the_timeline(
    till: Till, folder: Path
) -> None:
    write_state(folder, STATE_A)
    sealed = [till.json("watch", "--no-daemon")["head"]["id"]]
    for round_ in range(3):
        (folder / "big.bin").write_bytes(noise(round_ + 10, 600 * 1024))
        procs = [_start(till, folder, "snap", "-m", f"r{round_}-{n}") for n in range(2)]
        sealed += [_finish(p)["snapshot"]["id"] for p in procs]

    timeline = till.json("timeline", "-n", "100")["snapshots"]
    assert sorted(s["id"] for s in timeline) == sorted(sealed)
    # Each snapshot's parent is the one published just before it: a chain, no fork.
    assert [s["parent"] for s in timeline[:-1]] == [s["id"] for s in timeline[1:]]
    verify = verify_store(till)
    assert verify["ok"] is True and verify["damaged_snapshots"] == []
    logged = [r["body"]["id"] for r in log_records(till.home) if r["kind"] == "snapshot"]
    assert sorted(logged) == sorted(sealed)


def test_two_workspaces_sealing_into_one_store_at_once_lose_nothing(
    till: Till, user_home: Path
) -> None:
    folders = [user_home / "one", user_home / "two"]
    for n, ws in enumerate(folders):
        ws.mkdir()
        (ws / "a.txt").write_bytes(b"%d\n" % n)
    starts = [_start(till, ws, "watch", "--no-daemon") for ws in folders]
    firsts = [_finish(p)["head"]["id"] for p in starts]
    rounds: list[list[tuple[str, Manifest]]] = []
    for round_ in range(2):
        for n, ws in enumerate(folders):
            (ws / "big.bin").write_bytes(noise(100 * n + round_, 700 * 1024))
            (ws / f"r{round_}.txt").write_bytes(b"the same bytes in both folders\n")
        procs = [_start(till, ws, "snap") for ws in folders]
        rounds.append(
            [
                (_finish(p)["snapshot"]["id"], manifest(ws))
                for ws, p in zip(folders, procs, strict=True)
            ]
        )

    verify = verify_store(till)
    assert verify["ok"] is True and verify["damaged_snapshots"] == []
    log_records(till.home)
    for n, (ws, first) in enumerate(zip(folders, firsts, strict=True)):
        ids = [s["id"] for s in till.json("timeline", cwd=ws)["snapshots"]]
        assert ids == [r[n][0] for r in reversed(rounds)] + [first]
        snapshot, state = rounds[0][n]
        till.json("rewind", snapshot, "--yes", cwd=ws)
        assert manifest(ws) == state
