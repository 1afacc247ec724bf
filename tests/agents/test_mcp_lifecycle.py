"""`till mcp` over its life, on the real process: the tool list announced as the folder is
attached and forgotten, a cancelled call's command stopped (its whole process group) and
sealed, and signals that stop the server with stdin still open."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import pytest

from tests.agents.mcp_process import (
    PATIENCE_S,
    SLEEPS,
    marked_processes,
    mcp_client,
    no_sleeper_left,
    text,
    wait_for,
)
from tests.conftest import Till

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.process,
    pytest.mark.usefixtures(no_sleeper_left.__name__),
]

LONG = f"echo before > note.txt; {SLEEPS[0]} & {SLEEPS[1]}; wait"
CLIENT = {"name": "a-raw-client", "version": "0"}


def started(fork: Path) -> bool:
    """The command has written its note and both its sleeps run."""
    sleeping = [argv for _pid, _ppid, argv in marked_processes() if argv.startswith("sleep")]
    return len(sleeping) == 2 and (fork / "note.txt").exists()


def fork_folder(attached: Path, name: str) -> Path:
    return attached.parent / f"{attached.name}.forks" / name


def assert_sealed_with_note(till: Till, fork: Path) -> None:
    """The fork's newest snapshot holds what the command wrote before it was stopped."""
    newest = till.json("timeline", "-n", "1", cwd=fork)["snapshots"][0]
    run = till("cat", newest["id"], "note.txt", cwd=fork)
    assert run.code == 0 and run.stdout == "before\n", (newest, run.stdout, run.stderr)


# -- the tool list


async def test_the_tool_list_is_announced_when_the_folder_is_attached_and_forgotten(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    changes: list[float] = []

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changes.append(time.monotonic())

    async def announced(count: int) -> None:
        with anyio.fail_after(PATIENCE_S):
            while len(changes) < count:
                await anyio.sleep(0.05)

    async with mcp_client(till, folder, message_handler=on_message) as client:
        caps = client.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed is True
        assert (await client.list_tools()).tools == []

        till.json("watch", "--no-daemon")
        await announced(1)
        names = [t.name for t in (await client.list_tools()).tools]
        assert names[:2] == ["workspace_snapshots", "workspace_restore"]

        till.json("forget")
        await announced(2)
        assert (await client.list_tools()).tools == []

        called = await client.call_tool("workspace_snapshots", {})
        assert called.is_error
        error = called.structured_content["error"]  # type: ignore[index]
        assert error["name"] == "workspace.not_attached" and error["code"] == -32060
        assert "no longer attached" in error["message"] and "forgotten" in error["message"]
        assert "till watch" in error["next"] and error["details"]["was_attached"] is True
        assert "no longer attached" in text(called)
        assert len(changes) == 2, "one announcement per change, none while nothing changes"


async def test_a_folder_never_attached_is_answered_as_before(till: Till, folder: Path) -> None:
    async with mcp_client(till, folder) as client:
        called = await client.call_tool("workspace_snapshots", {})
    error = called.structured_content["error"]  # type: ignore[index]
    assert error["name"] == "workspace.not_attached" and "details" not in error


# -- cancel


@pytest.mark.parametrize("tool", ["workspace_fork", "workspace_run"])
async def test_a_cancelled_call_stops_the_commands_process_group_and_seals(
    till: Till, attached: Path, tool: str
) -> None:
    fork = fork_folder(attached, "slow")
    async with mcp_client(till, attached) as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool(tool, {"name": "slow", "command": LONG})

            scope = anyio.CancelScope()

            async def cancelled_call() -> None:
                with scope:
                    await call()

            group.start_soon(cancelled_call)
            with anyio.fail_after(PATIENCE_S):
                while not started(fork):
                    await anyio.sleep(0.05)
            scope.cancel()  # the client sends notifications/cancelled for the call
        await anyio.to_thread.run_sync(
            wait_for, lambda: not marked_processes(), "the command's children stopped"
        )
        # The server goes on serving, and the fork's seal was made before it answered more.
        listed = await client.call_tool("workspace_snapshots", {"limit": 1})
        assert not listed.is_error
    assert_sealed_with_note(till, fork)


# -- signals


@contextmanager
def server(till: Till, folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A raw `till mcp` process, initialized, its pipes closed after."""
    with subprocess.Popen(
        [sys.executable, "-m", "tillage", "--repo", str(folder), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=till.env(),
        cwd=folder,
    ) as proc:
        try:
            hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}
            send(proc, 1, "initialize", hello)
            answer = receive(proc)
            assert answer["id"] == 1 and "result" in answer, answer
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()


def send(proc: subprocess.Popen[bytes], ident: int, method: str, params: dict[str, Any]) -> None:
    assert proc.stdin is not None
    message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def receive(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    out: IO[bytes] | None = proc.stdout
    assert out is not None
    line = out.readline()
    assert line, "the server closed stdout"
    answer: dict[str, Any] = json.loads(line)
    return answer


def stopped(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(timeout=PATIENCE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("the server did not stop on the signal (stdin still open)") from None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server_with_stdin_still_open(
    till: Till, attached: Path, sig: signal.Signals
) -> None:
    with server(till, attached) as proc:
        proc.send_signal(sig)
        assert stopped(proc) == 0
        assert proc.stderr is not None
        assert f"stopped ({sig.name})" in proc.stderr.read().decode()


def test_a_signal_while_a_command_runs_stops_its_group_seals_and_answers(
    till: Till, attached: Path
) -> None:
    fork = fork_folder(attached, "slow")
    with server(till, attached) as proc:
        args = {"name": "slow", "command": LONG}
        send(proc, 2, "tools/call", {"name": "workspace_fork", "arguments": args})
        wait_for(lambda: started(fork), "the command started")
        proc.send_signal(signal.SIGTERM)
        answer = receive(proc)
        assert stopped(proc) == 0
    assert not marked_processes(), "no child of the command outlives the server"
    result = answer["result"]
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["name"] == "interrupted" and "SIGTERM" in error["message"]
    assert error["details"]["fork"]["name"] == "slow" and error["details"]["fork"]["head"]
    assert_sealed_with_note(till, fork)


def test_stdin_closing_stops_a_running_command_sealed_and_answers_every_call(
    till: Till, attached: Path
) -> None:
    fork = fork_folder(attached, "slow")
    with server(till, attached) as proc:
        args = {"name": "slow", "command": LONG}
        send(proc, 2, "tools/call", {"name": "workspace_fork", "arguments": args})
        wait_for(lambda: started(fork), "the command started")
        send(proc, 3, "tools/call", {"name": "workspace_snapshots", "arguments": {"limit": 1}})
        assert proc.stdin is not None
        proc.stdin.close()  # as a harness ends its session (then SIGTERM, then SIGKILL)
        answers = {a["id"]: a["result"] for a in (receive(proc), receive(proc))}
        assert stopped(proc) == 0
    assert not marked_processes(), "no child of the command outlives the session"
    assert answers[3]["isError"] is False, "a call without a command is answered in full"
    error = answers[2]["structuredContent"]["error"]
    assert error["name"] == "interrupted" and error["details"]["fork"]["head"]
    assert_sealed_with_note(till, fork)
