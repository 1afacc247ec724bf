"""Fixtures for the agent doors: an attached folder, and the store's settings for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tillage.agent
from tests.conftest import Till


@pytest.fixture(autouse=True)
def fresh_presence() -> Iterator[None]:
    """Each test asks tillage afresh, never a neighbour's cached answer."""
    tillage.agent.forget()
    yield
    tillage.agent.forget()


@pytest.fixture
def attached(till: Till, folder: Path) -> Path:
    """A folder with two files, attached with no watcher, its first snapshot sealed."""
    (folder / "app.py").write_text("print('v1')\n")
    (folder / ".env").write_text("KEY=one\n")
    till.json("watch", "--no-daemon")
    return folder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
