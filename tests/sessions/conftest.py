"""Fixtures of the session tests: an attached small project, and helpers that run `till` and
read a session through it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till


@pytest.fixture
def project(till: Till, folder: Path) -> Path:
    """An attached folder with a few files of known sizes."""
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("print('hi')\n")  # 12 bytes
    (folder / "README.md").write_text("# demo\n")  # 7 bytes
    till.json("watch", "--no-daemon")
    return folder


def commit_of(till: Till, *args: str, cwd: Path | None = None) -> dict[str, Any]:
    """Runs `till --json session ...` and returns its `commit`."""
    commit: dict[str, Any] = till.json("session", *args, cwd=cwd)["commit"]
    return commit


def log_of(till: Till, session: str, cwd: Path | None = None) -> list[dict[str, Any]]:
    commits: list[dict[str, Any]] = till.json("session", "log", session, cwd=cwd)["commits"]
    return commits


def snapshot_count(till: Till) -> int:
    """How many snapshots the workspace's timeline holds (`till status`)."""
    count: int = till.json("status")["snapshots"]
    return count
