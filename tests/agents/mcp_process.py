"""`till mcp` as a harness meets it: the real process on stdio, driven by the official Python
SDK's client (the TypeScript SDK's is driven from tests/agents/test_mcp_typescript.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

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
