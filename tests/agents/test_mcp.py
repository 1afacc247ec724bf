"""`till mcp`: the tools over MCP, as a real stdio subprocess driven by the official Python SDK's
client, as a harness launches it. Signals, cancel and list changes: test_mcp_lifecycle.py; the
TypeScript SDK's client: test_mcp_typescript.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.agents.mcp_process import mcp_client, text
from tests.conftest import Till
from tests.helpers import manifest

pytestmark = [pytest.mark.anyio, pytest.mark.process]  # a real `till mcp` process


@asynccontextmanager
async def in_process(till: Till, folder: Path) -> AsyncIterator[Client]:
    """The server as a harness runs it (the server has no in-process form: it is a process)."""
    async with mcp_client(till, folder) as client:
        yield client


subprocess_ = in_process


async def test_a_real_subprocess_serves_the_tools_a_harness_expects(
    till: Till, attached: Path
) -> None:
    async with subprocess_(till, attached) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert list(tools)[:4] == [
            "workspace_snapshots",
            "workspace_restore",
            "workspace_fork",
            "workspace_merge",
        ]
        assert {"workspace_diff", "workspace_snap"} <= set(tools)
        restore = tools["workspace_restore"]
        assert restore.annotations is not None
        assert restore.annotations.destructive_hint is True
        assert restore.annotations.read_only_hint is False
        assert tools["workspace_snapshots"].annotations.read_only_hint is True  # type: ignore[union-attr]
        assert tools["workspace_snapshots"].input_schema["properties"]["limit"]["maximum"] == 100

        listed = await client.call_tool("workspace_snapshots", {})
        assert not listed.is_error
        snaps = listed.structured_content["snapshots"]  # type: ignore[index]
        assert len(snaps) == 1 and len(snaps[0]["id"]) == 64
        assert snaps[0]["id"] in text(listed) and "short" not in snaps[0]


async def test_a_restore_previews_until_confirmed_and_says_how_to_undo(
    till: Till, attached: Path
) -> None:
    first = till.json("timeline")["snapshots"][0]["id"]
    (attached / "app.py").write_text("print('broken')\n")
    (attached / ".env").unlink()
    before = manifest(attached)
    async with in_process(till, attached) as client:
        preview = await client.call_tool("workspace_restore", {"snapshot": first})
        assert not preview.is_error
        assert manifest(attached) == before, "a preview changes nothing"
        said = text(preview)
        assert "nothing was changed" in said.lower() and "confirm: true" in said
        assert "app.py" in said and ".env" in said
        assert preview.structured_content["applied"] is False  # type: ignore[index]

        refused = await client.call_tool("workspace_restore", {"snapshot": first, "confirm": 1})
        assert refused.is_error and manifest(attached) == before

        applied = await client.call_tool("workspace_restore", {"snapshot": first, "confirm": True})
        assert not applied.is_error
        assert (attached / "app.py").read_text() == "print('v1')\n"
        assert (attached / ".env").read_text() == "KEY=one\n"
        doc = applied.structured_content
        assert doc["applied"] is True and len(doc["undo"]) == 64  # type: ignore[index]
        said = text(applied)
        assert doc["undo"] in said and "sealed" in said and "undo" in said.lower()  # type: ignore[index]

        again = await client.call_tool("workspace_restore", {"snapshot": first, "confirm": True})
        assert not again.is_error
        assert "Nothing to restore" in text(again)
        assert again.structured_content["applied"] is False  # type: ignore[index]

        undo = await client.call_tool(
            "workspace_restore",
            {"snapshot": doc["undo"], "confirm": True},  # type: ignore[index]
        )
        assert not undo.is_error
        assert (attached / "app.py").read_text() == "print('broken')\n"
        assert not (attached / ".env").exists()


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside", "a/../../b"])
async def test_a_restore_refuses_paths_that_leave_the_workspace(
    till: Till, attached: Path, path: str
) -> None:
    first = till.json("timeline")["snapshots"][0]["id"]
    (attached / "app.py").write_text("changed\n")
    async with in_process(till, attached) as client:
        for confirm in (False, True):
            result = await client.call_tool(
                "workspace_restore", {"snapshot": first, "paths": [path], "confirm": confirm}
            )
            assert result.is_error
            error = result.structured_content["error"]  # type: ignore[index]
            assert error["name"] == "invalid_argument" and error["code"] == -32066
    assert (attached / "app.py").read_text() == "changed\n"


async def test_failures_are_tool_results_with_code_name_and_next(
    till: Till, attached: Path
) -> None:
    async with in_process(till, attached) as client:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("workspace_restore", {"snapshot": "abcdef"}, "snapshot.not_found"),
            ("workspace_restore", {"snapshot": "not-hex!"}, "snapshot.bad_id"),
            ("workspace_restore", {}, "invalid_argument"),
            ("workspace_snapshots", {"limit": 101}, "invalid_argument"),
            ("workspace_snapshots", {"limit": "ten"}, "invalid_argument"),
            ("workspace_snapshots", {"colour": "red"}, "invalid_argument"),
            ("workspace_merge", {"fork": "no-such-fork"}, "fork.not_found"),
            ("workspace_nonexistent", {}, "not_found"),
        ]
        for name, args, expected in cases:
            result = await client.call_tool(name, args)
            assert result.is_error, (name, args)
            error = result.structured_content["error"]  # type: ignore[index]
            assert error["name"] == expected, (name, args, error)
            assert isinstance(error["code"], int) and error["next"]
            said = text(result)
            assert expected in said and "Traceback" not in said


async def test_an_unattached_folder_is_offered_no_tools_until_it_is_attached(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    async with subprocess_(till, folder) as client:
        assert (await client.list_tools()).tools == []
        called = await client.call_tool("workspace_snapshots", {})
        assert called.is_error
        assert called.structured_content["error"]["name"] == "workspace.not_attached"  # type: ignore[index]
        till.json("watch", "--no-daemon")
        names = [t.name for t in (await client.list_tools()).tools]
        assert names[:2] == ["workspace_snapshots", "workspace_restore"]


async def test_a_forked_commands_output_never_reaches_the_protocol_stream(
    till: Till, attached: Path
) -> None:
    async with subprocess_(till, attached) as client:
        ran = await client.call_tool(
            "workspace_fork",
            {"name": "try-it", "command": "echo out-line; echo err-line >&2; exit 3"},
        )
        assert not ran.is_error, text(ran)
        fork = ran.structured_content["fork"]  # type: ignore[index]
        assert fork["exit_code"] == 3
        assert "out-line" in fork["output"] and "err-line" in fork["output"]
        assert "status 3" in text(ran)
        # The stream still works after it: the output did not corrupt the JSON-RPC framing.
        listed = await client.call_tool("workspace_snapshots", {"limit": 1})
        assert not listed.is_error


async def test_snap_diff_and_merge_through_mcp(till: Till, attached: Path) -> None:
    async with in_process(till, attached) as client:
        forked = await client.call_tool(
            "workspace_fork", {"name": "fix", "command": "echo fixed > app.py"}
        )
        assert not forked.is_error
        diff = await client.call_tool("workspace_diff", {"target": "fix"})
        assert not diff.is_error and "app.py" in text(diff)
        preview = await client.call_tool(
            "workspace_merge", {"fork": "fix", "check": "true", "preview": True}
        )
        assert not preview.is_error and "app.py" in text(preview)
        assert (attached / "app.py").read_text() == "print('v1')\n"
        failed = await client.call_tool("workspace_merge", {"fork": "fix", "check": "exit 1"})
        assert not failed.is_error
        assert failed.structured_content["landed"] is False  # type: ignore[index]
        assert "Nothing landed" in text(failed)
        assert (attached / "app.py").read_text() == "print('v1')\n"
        landed = await client.call_tool("workspace_merge", {"fork": "fix", "check": "true"})
        assert landed.structured_content["landed"] is True  # type: ignore[index]
        assert (attached / "app.py").read_text() == "fixed\n"
        (attached / "new.txt").write_text("n\n")
        snap = await client.call_tool("workspace_snap", {"label": "after merge"})
        assert not snap.is_error
        sealed = snap.structured_content["snapshot"]  # type: ignore[index]
        assert sealed["label"] == "after merge" and sealed["id"] in text(snap)


async def test_tool_output_for_a_model_is_capped_and_says_what_it_left_out(
    till: Till, attached: Path
) -> None:
    first = till.json("timeline")["snapshots"][0]["id"]
    for i in range(400):
        (attached / f"generated_file_number_{i:04}.txt").write_text("x\n")
    async with in_process(till, attached) as client:
        diff = await client.call_tool("workspace_diff", {"target": first})
        said = text(diff)
        assert len(said.encode()) <= 4200
        assert "more not shown" in said
        shown = diff.structured_content  # what Claude Code hands the model: cut alike
        assert len(json.dumps(shown).encode()) <= 4200
        assert len(shown["changes"]) + shown["left_out"]["changes"] == 400  # type: ignore[index]


async def test_a_long_command_in_a_fork_holds_up_no_other_call(till: Till, attached: Path) -> None:
    import anyio

    async with in_process(till, attached) as client:
        finished: dict[str, float] = {}

        async def slow() -> None:
            await client.call_tool("workspace_fork", {"name": "slow", "command": "sleep 3"})
            finished["fork"] = anyio.current_time()

        async def quick() -> None:
            await anyio.sleep(0.5)  # the fork is running by now
            listed = await client.call_tool("workspace_snapshots", {"limit": 1})
            assert not listed.is_error
            finished["snapshots"] = anyio.current_time()

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            group.start_soon(quick)
        assert finished["snapshots"] < finished["fork"]


async def test_a_fork_without_a_name_gets_the_first_free_one(till: Till, attached: Path) -> None:
    (attached.parent / "project.forks" / "fork-1").mkdir(parents=True)  # occupied: skipped
    async with in_process(till, attached) as client:
        first = await client.call_tool("workspace_fork", {"command": "true"})
        second = await client.call_tool("workspace_fork", {})
    names = [r.structured_content["fork"]["name"] for r in (first, second)]  # type: ignore[index]
    assert names == ["fork-2", "fork-3"]
    assert [f["name"] for f in till.json("forks")["forks"]] == ["fork-2", "fork-3"]
