"""`till mcp` as a harness meets it: the real process on stdio, driven by the official Python
SDK's client (the TypeScript SDK's is driven from tests/agents/test_mcp_typescript.py)."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import Till


def server_params(till: Till, folder: Path) -> StdioServerParameters:
    """`python -m tillage --repo FOLDER mcp`, in FOLDER, with the test's store."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "tillage", "--repo", str(folder), "mcp"],
        env=till.env(),
        cwd=str(folder),
    )


@asynccontextmanager
async def mcp_client(till: Till, folder: Path, **options: Any) -> AsyncIterator[Client]:
    """A connected client of a fresh `till mcp` serving `folder` (options go to Client)."""
    async with Client(server_params(till, folder), **options) as client:
        yield client


def text(result: Any) -> str:
    """What the model reads of a tool result."""
    return "\n".join(c.text for c in result.content)


# Sleeps marked so /proc finds them (a command's children, which must not outlive a cancel).
# Tagged with this process's pid: tests in other workers (pytest -n) have sleeps of their own.
_TAG = f"{os.getpid() % 100000:05d}"
SLEEPS = (f"sleep 4711.{_TAG}", f"sleep 4712.{_TAG}")
PATIENCE_S = 20.0  # how long a test waits for something that must happen (never a timing)


def marked_processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, argv) of every live process running one of SLEEPS."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        if any(s in argv for s in SLEEPS):
            found.append((int(entry), int(fields[1]), argv.strip()))
    return found


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)


@pytest.fixture
def no_sleeper_left() -> Iterator[None]:
    """After the test, no marked sleep is left running (a failed test's are killed)."""
    yield
    leftover = marked_processes()
    for pid, _ppid, _argv in leftover:
        os.kill(pid, signal.SIGKILL)
