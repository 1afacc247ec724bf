"""run_command (the one way verbs run a user's command), and `till run` / `till exec`."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tillage.errors import InvalidArgumentError
from tillage.workspace.commands import run_command


def test_one_word_runs_through_the_shell_and_several_are_argv(tmp_path: Path) -> None:
    shell = run_command(("echo $((40 + 2)) > out; cat out",), tmp_path)
    assert (shell.exit_code, shell.output) == (0, "42\n")
    argv = run_command(("echo", "$((40 + 2))", "a;b"), tmp_path)
    assert (argv.exit_code, argv.output) == (0, "$((40 + 2)) a;b\n")


def test_exit_statuses_read_like_a_shell(tmp_path: Path) -> None:
    assert run_command(("exit 7",), tmp_path).exit_code == 7
    killed = run_command(("kill -TERM $$",), tmp_path)
    assert killed.exit_code == 128 + signal.SIGTERM
    missing = run_command(("no-such-command-xyz", "arg"), tmp_path)
    assert missing.exit_code == 127
    assert "no-such-command-xyz" in missing.output
    assert run_command(("no-such-command-xyz",), tmp_path).exit_code == 127
    script = tmp_path / "not-exec"
    script.write_text("#!/bin/sh\n")
    assert run_command((str(script), "x"), tmp_path).exit_code == 126


def test_stdout_and_stderr_are_captured_together_and_passed_on_live(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    try:
        out = run_command(("echo out; echo err >&2",), tmp_path, output_fd=write_fd)
        os.close(write_fd)
        live = os.read(read_fd, 1000)
    finally:
        os.close(read_fd)
    assert out.output == "out\nerr\n"
    assert live == b"out\nerr\n"


def test_output_is_capped_keeping_the_tail_with_a_marker(tmp_path: Path) -> None:
    out = run_command(("seq 1 20000",), tmp_path, cap=100)
    total = sum(len(f"{i}\n") for i in range(1, 20001))
    assert out.output.startswith(f"[... {total - 100} bytes cut]\n")
    assert out.output.endswith("19999\n20000\n")
    assert len(out.output.split("\n", 1)[1]) == 100


def test_stdin_is_dev_null_cwd_and_env_are_the_callers(tmp_path: Path) -> None:
    out = run_command(("cat; pwd; echo $TILLAGE_FORK",), tmp_path, env={"TILLAGE_FORK": "blue"})
    assert out.output == f"{tmp_path}\nblue\n"


def test_an_empty_command_is_an_invalid_argument(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        run_command((), tmp_path)


def test_a_background_child_holding_the_pipe_does_not_keep_the_caller_waiting(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    out = run_command(("sleep 30 & echo started",), tmp_path)
    assert out.exit_code == 0
    assert out.output == "started\n"
    assert time.monotonic() - started < 20
