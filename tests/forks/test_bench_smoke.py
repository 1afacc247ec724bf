"""bench/universes.py still runs end to end (a tiny workload, one repeat): every part measures
or says why it cannot, and the XFS loop file system is unmounted and the scratch dir removed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.process
def test_the_universes_benchmark_runs_at_a_tiny_scale(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_")}
    out = tmp_path / "results.json"
    script = str(REPO / "bench" / "universes.py")
    small = ["--scale", "0.02", "--repeat", "1", "--workdir", str(tmp_path / "work")]
    proc = subprocess.run(
        [sys.executable, script, *small, "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {row["measure"]: row for row in json.loads(out.read_text())["rows"]}
    for measure in (
        "whole `till fork` (s)",
        "fork's copy alone, copy_tree (s)",
        "`till radar`, 5 forks x 100 paths (s)",
        "`till merge NAME`, 100 files (s)",
    ):
        assert rows[measure]["value"] is not None, (measure, proc.stdout)
    assert rows["`till radar`, 5 forks x 100 paths (s)"]["note"].startswith("100 conflicting")
    xfs_possible = os.geteuid() == 0 and shutil.which("mkfs.xfs") is not None
    xfs = rows.get("XFS: `till fork` (s)") or rows["fork on XFS (loop)"]
    if xfs_possible:
        assert xfs["verdict"] != "NOT RUN", xfs
        assert xfs["note"] == "driver reflink"
    else:
        assert xfs["verdict"] == "NOT RUN" and xfs["note"], xfs  # says why, never silent
    assert "| measure |" in proc.stdout
    assert str(tmp_path) not in Path("/proc/mounts").read_text()
    assert os.listdir(tmp_path / "work") == []
