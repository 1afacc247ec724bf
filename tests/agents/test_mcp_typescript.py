"""`till mcp` against the official TypeScript MCP SDK client (`@modelcontextprotocol/sdk`, the
version pinned in tests/agents/ts_client/package-lock.json; `.ci/run` installs it with npm ci).
A node script (ts_client/client.mjs) drives the real process; this test judges what it saw."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents.mcp_process import marked_processes, no_sleeper_left, wait_for
from tests.agents.test_mcp_lifecycle import LONG, assert_sealed_with_note
from tests.conftest import Till
from tests.helpers import manifest

pytestmark = [pytest.mark.process, pytest.mark.usefixtures(no_sleeper_left.__name__)]

CLIENT_DIR = Path(__file__).parent / "ts_client"
SDK = CLIENT_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"


def node_client() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip(
            "node is not installed (apt-get install nodejs): the TypeScript SDK client needs it"
        )
    if not SDK.exists():
        pytest.skip(
            "the TypeScript MCP SDK is not installed: run `npm ci` in tests/agents/ts_client "
            "(.ci/run does, where the npm registry is reachable)"
        )
    return node


def test_the_typescript_sdk_client_meets_the_server_a_python_client_does(
    till: Till, attached: Path
) -> None:
    node = node_client()
    first = till.json("timeline")["snapshots"][0]["id"]
    (attached / "app.py").write_text("print('changed')\n")
    before = manifest(attached)
    run = subprocess.run(
        [node, str(CLIENT_DIR / "client.mjs"), sys.executable, str(attached), first, LONG],
        cwd=CLIENT_DIR,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    steps = report["steps"]

    assert report["server"]["name"] == "tillage"
    assert report["capabilities"]["tools"]["listChanged"] is True
    tools = {t["name"]: t for t in steps["tools"]}
    assert list(tools)[:4] == [
        "workspace_snapshots",
        "workspace_restore",
        "workspace_fork",
        "workspace_merge",
    ]
    assert tools["workspace_restore"]["annotations"]["destructiveHint"] is True
    assert tools["workspace_snapshots"]["annotations"]["readOnlyHint"] is True

    snapshots = steps["snapshots"]
    assert not snapshots["isError"]
    assert [s["id"] for s in snapshots["structured"]["snapshots"]] == [first]

    preview = steps["preview"]
    assert not preview["isError"] and preview["structured"]["applied"] is False
    assert "app.py" in preview["text"] and "confirm: true" in preview["text"]
    fork = steps["fork"]
    assert not fork["isError"], fork["text"]
    assert fork["structured"]["fork"]["exit_code"] == 0
    assert "said-so" in fork["structured"]["fork"]["output"]
    ts_fork = attached.parent / f"{attached.name}.forks" / "ts-fork"
    assert (ts_fork / "ts.txt").read_text() == "from-ts\n"
    assert manifest(attached) == before, "a preview and a fork change nothing in the folder"

    error = steps["error"]
    assert error["isError"]
    assert error["structured"]["error"]["name"] == "snapshot.not_found"
    assert "snapshot.not_found" in error["text"]

    assert steps["after_forget"] == 0 and steps["after_watch"] == len(tools)
    forgotten = steps["forgotten_call"]["structured"]["error"]
    assert (
        forgotten["name"] == "workspace.not_attached"
        and "no longer attached" in forgotten["message"]
    )
    assert report["changes"] == 2

    # close() with a command running: stopped (no orphan, even under the SDK's SIGKILL), sealed.
    wait_for(lambda: not marked_processes(), "the slow fork's command stopped")
    assert_sealed_with_note(till, attached.parent / f"{attached.name}.forks" / "ts-slow")
