"""bench/agents.py still runs end to end (a tiny workload, one repeat, a few calls): it measures
every row of its table through a real `till mcp` and real `till` processes, says PASS or MISS
for each target (timings are never asserted here), and leaves no watcher, server or scratch dir
behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _processes_naming(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (a leaked watcher names its root)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in argv:
                found.append(argv)
    return found


@pytest.mark.process
def test_the_agents_benchmark_runs_at_a_tiny_scale(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_")}
    out = tmp_path / "results.json"
    work = tmp_path / "work"
    small = ["--scale", "0.02", "--repeat", "1", "--calls", "3", "--snaps", "1", "--cold", "1"]
    small += ["--initialize", "2"]
    where = ["--workdir", str(work), "--out", str(out), "--hook-rounds", "1"]
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "agents.py"), *small, *where],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {row["measure"]: row for row in json.loads(out.read_text())["rows"]}
    for measure in (
        "`workspace_snapshots` round trip, watcher running (ms)",
        "`workspace_snapshots` round trip, no watcher (ms)",
        "`workspace_snap` after 10 changed files, watcher running (ms)",
        "`workspace_snap` after 10 changed files, no watcher (ms)",
    ):
        row = rows[measure]
        assert row["value"] > 0 and row["baseline_value"] > 0, (measure, proc.stdout)
        assert row["verdict"] in ("PASS", "MISS"), row
    cold = rows["`till mcp` cold start to first `tools/list` (ms)"]
    assert cold["value"] > 0 and cold["verdict"] in ("PASS", "MISS"), cold
    initialize = rows["`till mcp` spawn to its `initialize` answer (ms)"]
    assert initialize["value"] > 0 and initialize["verdict"] in ("PASS", "MISS"), initialize
    memory = rows["`till mcp` resident memory after the calls (MiB)"]
    assert memory["value"] > 0 and memory["baseline_value"] > 0, memory  # the watcher's beside
    assert rows["`python -c pass` (ms)"]["value"] > 0
    assert "| measure | tillage | baseline |" in proc.stdout
    assert "| `workspace_snapshots` round trip, watcher running (ms) |" in proc.stdout
    assert "Machine:" in proc.stdout and "Command: `python bench/agents.py" in proc.stdout
    assert os.listdir(work) == []
    assert _processes_naming(str(work)) == []


@pytest.mark.process
def test_the_hook_latency_part_runs_at_a_tiny_scale(tmp_path: Path) -> None:
    """bench/hook_latency.py: every event of the installed hooks, run as Claude Code runs them,
    in all three modes (the watcher running, none, stopped by SIGSTOP); the watcher continued
    afterwards seals nothing late, and nothing is left behind."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_")}
    out = tmp_path / "results.json"
    work = tmp_path / "work"
    args = ["--scale", "0.02", "--hooks-only", "--hook-rounds", "2", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "agents.py"), *args, "--workdir", str(work)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    rows = {row["measure"]: row for row in results["rows"]}
    for mode in ("watcher running", "no watcher", "watcher SIGSTOPped"):
        for event in ("UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"):
            row = rows[f"`{event}` hook, {mode} (ms)"]
            assert row["value"] > 0 and "p95" in row["note"], row
            assert len(results["hooks"][_mode_key(mode)][event]["samples"]) == 2
    for event in ("UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"):
        assert rows[f"`{event}` hook, watcher running (ms)"]["verdict"] in ("PASS", "MISS")
    worst = rows["slowest hook, watcher SIGSTOPped (ms)"]
    assert worst["verdict"] in ("PASS", "MISS") and "sealed none late" in worst["note"]
    assert results["hooks"]["hung_sessions"]["sessions"] == 2
    assert "| `Stop` hook, watcher SIGSTOPped (ms) |" in proc.stdout
    assert os.listdir(work) == []
    assert _processes_naming(str(work)) == []


def _mode_key(label: str) -> str:
    return {"watcher running": "watch", "no watcher": "alone", "watcher SIGSTOPped": "hung"}[label]
