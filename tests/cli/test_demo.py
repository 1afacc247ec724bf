"""The README's first command, `./scripts/demo`, runs end to end: it is what a new user runs
first, and it drives every door (the command line, the watcher, hooks, forks, merges, the MCP
server through the official SDK's client), so a change that breaks any of them for a user
breaks this. Run on a store of its own (XDG_DATA_HOME), never the machine's default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo.py"


def test_the_demo_runs_end_to_end_and_everything_comes_back(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path),
    }
    env.pop("TILLAGE_HOME", None)
    run = subprocess.run(
        [sys.executable, str(DEMO)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    assert "every file byte-exact, every committed row back: True" in out
    assert "the wrecked state is back: True" in out
    assert ".env is back byte-exact, NOTES.md kept: True" in out
    assert "landed False, check failed True" in out
    assert (tmp_path / "data" / "tillage").is_dir(), "the demo used the store it was given"
