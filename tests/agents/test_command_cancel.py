"""Cancelling a command a call runs (platform/commands.cancellable): its whole process group is
stopped, a child that ignores SIGTERM included, and a command asked for after the cancel never
starts. What the MCP server's cancel and signals stand on."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.agents.mcp_process import SLEEPS, marked_processes, no_sleeper_left, wait_for
from tillage.platform.commands import Cancelled, CancelToken, cancellable, run_command

pytestmark = [pytest.mark.process, pytest.mark.usefixtures(no_sleeper_left.__name__)]


def test_a_cancel_stops_the_group_even_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    stubborn = f"sh -c 'trap \"\" TERM; {SLEEPS[0]}' & {SLEEPS[1]}; wait"
    token = CancelToken()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            with cancellable(token):
                run_command((stubborn,), tmp_path)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_for(lambda: len(marked_processes()) >= 3, "the command and its children started")
    token.cancel("cancelled by the test")
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], Cancelled)
    assert raised[0].reason == "cancelled by the test"
    wait_for(lambda: not marked_processes(), "no process of the group left")
    token.close()


def test_a_command_asked_for_after_the_cancel_never_starts(tmp_path: Path) -> None:
    token = CancelToken()
    token.cancel("stopped")
    with cancellable(token), pytest.raises(Cancelled):
        run_command(("touch ran",), tmp_path)
    assert not (tmp_path / "ran").exists()
    token.close()
    token.cancel("after close")  # a late cancel of a finished call is harmless


def test_outside_a_cancellable_context_a_command_runs_as_before(tmp_path: Path) -> None:
    assert run_command(("echo hi",), tmp_path).output == "hi\n"


class _StoppedError(Exception):
    pass


def test_an_interruption_during_the_spawn_still_stops_the_command(tmp_path: Path) -> None:
    # SIGTERM while the command is being started (here: as on_start is told its pid, the last
    # moment before the wait) is held until its group is known, then stops it, not the caller
    # alone: the command must not outlive an interrupted `till run`.
    import os
    import signal

    def raise_stopped(_signum: int, _frame: object) -> None:
        raise _StoppedError

    def interrupt_me(_pgid: int) -> None:
        wait_for(lambda: len(marked_processes()) >= 1, "the command started")
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, raise_stopped)
    try:
        with pytest.raises(_StoppedError):
            run_command((f"{SLEEPS[0]} & wait",), tmp_path, on_start=interrupt_me)
    finally:
        signal.signal(signal.SIGTERM, previous)
    wait_for(lambda: not marked_processes(), "no process of the group left")
