"""run_command (the one way verbs run a user's command), and `till run` / `till exec`."""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tillage.errors import InvalidArgumentError
from tillage.platform.commands import run_command
from tillage.platform.launch import Launch


def test_one_word_runs_through_the_shell_and_several_are_argv(tmp_path: Path) -> None:
    shell = run_command(("echo $((40 + 2)) > out; cat out",), tmp_path)
    assert (shell.exit_code, shell.output) == (0, "42\n")
    argv = run_command(("echo", "$((40 + 2))", "a;b"), tmp_path)
    assert (argv.exit_code, argv.output) == (0, "$((40 + 2)) a;b\n")


@pytest.mark.process
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
        with os.fdopen(write_fd, "wb", buffering=0) as live_out:
            out = run_command(("echo out; echo err >&2",), tmp_path, launch=Launch(output=live_out))
        live = os.read(read_fd, 1000)
    finally:
        os.close(read_fd)
    assert out.output == "out\nerr\n"
    assert live == b"out\nerr\n"


def test_the_command_inherits_the_hosts_environment_never_the_key(tmp_path: Path) -> None:
    """A host running a command line for someone else passes that caller's environment; the
    key that opens a remote (or the file naming it) is never passed on."""
    host_env = {
        "PATH": os.environ["PATH"],
        "ONLY_THE_CALLER_HAS": "yes",
        "TILLAGE_RECOVERY_KEY": "ab" * 32,
        "TILLAGE_RECOVERY_KEY_FILE": "/secret/key",
    }
    out = run_command(
        (
            'echo "$ONLY_THE_CALLER_HAS ${TILLAGE_RECOVERY_KEY-unset} '
            '${TILLAGE_RECOVERY_KEY_FILE-unset}"',
        ),
        tmp_path,
        launch=Launch(env=host_env),
    )
    assert out.output == "yes unset unset\n"


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


# -- `till run` and `till exec` through the real process ---------------------------------------

ENV_LINE = "echo fork=$TILLAGE_FORK index=$TILLAGE_FORK_INDEX port=$PORT"


def test_run_makes_the_fork_runs_the_command_seals_and_exits_with_its_status(
    till: Till, project: Path
) -> None:
    from tillage.features.forks.ports import DEFAULT_BASE, next_port

    port = next_port(DEFAULT_BASE, set())  # 3001 unless something listens there
    run = till("--json", "run", "try-1", "--", f"{ENV_LINE}; echo made > made.txt; exit 5")
    assert run.code == 5
    doc = json.loads(run.stdout)["fork"]  # one document, though the command printed
    assert doc["exit_code"] == 5
    assert doc["created"] is True
    assert f"fork=try-1 index=1 port={port}" in doc["output"]
    assert f"fork=try-1 index=1 port={port}" in run.stderr  # live, on stderr under --json
    assert doc["port"] == port
    path = Path(doc["path"])
    assert (path / "made.txt").read_text() == "made\n"
    assert not (project / "made.txt").exists()
    head = till.json("timeline", cwd=path)["snapshots"][0]
    assert head["id"] == doc["head"] and head["trigger"] == "fork"
    assert head["files"] == till.json("status")["head"]["files"] + 1

    again = till("--json", "run", "try-1", "--", "cat", "made.txt")
    assert again.code == 0
    second = json.loads(again.stdout)["fork"]
    assert second["created"] is False and second["output"] == "made\n"
    assert second["head"] == doc["head"]  # nothing changed: no new snapshot


def test_run_in_human_mode_prints_the_command_output_live_on_stdout(
    till: Till, project: Path
) -> None:
    run = till("run", "h", "--", "echo hello from the fork")
    assert run.code == 0
    assert run.stdout.startswith("hello from the fork\n")
    assert "Forked h" in run.stdout


def test_run_starts_in_the_callers_sub_folder_and_reports_a_missing_command(
    till: Till, project: Path
) -> None:
    doc = till.json("run", "cwd", "--", "pwd", cwd=project / "src")["fork"]
    assert doc["output"] == f"{doc['path']}/src\n"
    missing = till("--json", "run", "cwd", "--", "no-such-command-xyz")
    assert missing.code == 127
    assert "no-such-command-xyz" in json.loads(missing.stdout)["fork"]["output"]


def test_run_at_with_an_existing_fork_is_a_conflict_and_an_empty_command_invalid(
    till: Till, project: Path
) -> None:
    base = till.json("status")["head"]["id"]
    till.json("run", "r", "--", "true")
    clash = till("--json", "run", "r", "--at", base, "--", "true")
    assert (clash.code, clash.error["code"], clash.error["name"]) == (1, -32062, "fork.exists")
    empty = till("--json", "run", "r2", "--")
    assert empty.code in (1, 2)
    assert [f["name"] for f in till.json("forks")["forks"]] == ["r"]
    made_at = till.json("run", "r3", "--at", base[:8], "--", "true")["fork"]
    assert made_at["base"] == base


def test_fork_with_a_command_runs_it_in_the_new_fork(till: Till, project: Path) -> None:
    run = till("--json", "fork", "fx", "--", "sh", "-c", "echo $TILLAGE_FORK; exit 2")
    assert run.code == 2
    doc = json.loads(run.stdout)["fork"]
    assert (doc["exit_code"], doc["output"], doc["created"]) == (2, "fx\n", True)
    assert till("--json", "fork", "fx", "--", "true").error["name"] == "fork.exists"


def test_exec_runs_universes_at_once_each_with_its_own_port(
    till: Till, project: Path, tmp_path: Path
) -> None:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    # Each waits (bounded) until all three have started: only commands that run at the same
    # time can all pass; in a row, the first would give up with 9.
    script = (
        f"touch {barrier}/$TILLAGE_FORK; n=0; "
        f'while [ "$(ls {barrier} | wc -l)" -lt 3 ]; do n=$((n+1)); '
        "[ $n -gt 600 ] && exit 9; sleep 0.05; done; "
        f"{ENV_LINE}; echo $TILLAGE_FORK > who.txt"
    )
    run = till("--json", "exec", "-n", "3", "--", script)
    assert run.code == 0, run.stdout + run.stderr
    universes = json.loads(run.stdout)["universes"]
    assert [u["fork"] for u in universes] == ["exec-1", "exec-2", "exec-3"]
    assert [u["name"] for u in universes] == ["exec-1", "exec-2", "exec-3"]  # as in `fork`
    assert [u["exit_code"] for u in universes] == [0, 0, 0]
    ports = {u["output"].strip().rsplit("port=", 1)[1] for u in universes}
    assert len(ports) == 3
    bases = {u["base"] for u in universes}
    assert len(bases) == 1  # one base seal for all
    for u in universes:
        assert (Path(u["path"]) / "who.txt").read_text() == u["fork"] + "\n"
        assert till.json("timeline", cwd=Path(u["path"]))["snapshots"][0]["id"] == u["head"]
    assert len(till.json("forks")["forks"]) == 3
    # Names in use are skipped.
    more = till.json("exec", "--", "true")["universes"]
    assert [u["fork"] for u in more] == ["exec-4"]


def test_exec_exits_with_the_first_non_zero_status_in_universe_order(
    till: Till, project: Path
) -> None:
    run = till("--json", "exec", "-n", "3", "--fork", "t", "--", "exit $((4 - TILLAGE_FORK_INDEX))")
    doc = json.loads(run.stdout)
    assert [u["fork"] for u in doc["universes"]] == ["t-1", "t-2", "t-3"]
    assert [u["exit_code"] for u in doc["universes"]] == [3, 2, 1]
    assert run.code == 3


def test_exec_plan_creates_nothing(till: Till, project: Path) -> None:
    doc = till.json("exec", "--plan", "-n", "4", "--", "true")
    plan = doc["plan"]
    assert plan["driver"] in ("reflink", "copy_file_range", "copy")
    assert plan["count"] == 4
    assert plan["files"] >= 10 and plan["bytes"] > 0
    assert doc["universes"] == []
    assert till.json("forks")["forks"] == []
    assert not (project.parent / f"{project.name}.forks").exists()
    bad = till("--json", "exec", "-n", "0", "--", "true")
    assert bad.error["code"] == -32066


@pytest.mark.process
def test_an_interrupted_run_stops_its_command_and_what_it_started(
    till: Till, project: Path
) -> None:
    import subprocess
    import sys

    forks_dir = project.parent / f"{project.name}.forks"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tillage",
            "--json",
            "run",
            "long",
            "--",
            "sleep 300 & echo $! > bg.pid; wait",
        ],
        cwd=project,
        env=till.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_file = forks_dir / "long" / "bg.pid"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    sleeper = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    out, _err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert json.loads(out)["error"]["name"] == "interrupted"
    deadline = time.monotonic() + 30
    while _alive(sleeper):
        assert time.monotonic() < deadline, "the command outlived till"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by its parent) is not running.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.process
def test_an_interrupted_exec_stops_every_universes_command(till: Till, project: Path) -> None:
    import subprocess
    import sys

    forks_dir = project.parent / f"{project.name}.forks"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tillage",
            "--json",
            "exec",
            "-n",
            "2",
            "--",
            "sleep 300 & echo $! > bg.pid; wait",
        ],
        cwd=project,
        env=till.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_files = [forks_dir / f"exec-{i}" / "bg.pid" for i in (1, 2)]
    deadline = time.monotonic() + 60
    while not all(p.exists() and p.read_text().strip() for p in pid_files):
        assert time.monotonic() < deadline, "the commands never started"
        time.sleep(0.05)
    sleepers = [int(p.read_text()) for p in pid_files]
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 143
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in sleepers):
        assert time.monotonic() < deadline, "a universe's command outlived till"
        time.sleep(0.05)


def test_a_blank_command_is_refused_and_nothing_is_made(till: Till, project: Path) -> None:
    snapshots = len(till.json("timeline", "-n", "1000")["snapshots"])
    for args in (["run", "blank", "--", ""], ["try", "--", "  "], ["exec", "--", ""]):
        run = till("--json", *args)
        assert run.code == 1, args
        assert run.error["code"] == -32066, args
    assert till.json("forks")["forks"] == []
    assert len(till.json("timeline", "-n", "1000")["snapshots"]) == snapshots


def _start(till: Till, project: Path, *args: str) -> Any:
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "tillage", *args],
        cwd=project,
        env=till.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(paths: list[Path]) -> None:
    deadline = time.monotonic() + 60
    while not all(p.exists() and p.read_text().strip() for p in paths):
        assert time.monotonic() < deadline, "the commands never started"
        time.sleep(0.05)


WORK_THEN_WAIT = "echo work of $TILLAGE_FORK > work.txt; sleep 300 & echo $! > bg.pid; wait"


@pytest.mark.process
def test_an_interrupted_exec_seals_each_universe_and_names_them_in_the_error(
    till: Till, project: Path
) -> None:
    forks_dir = project.parent / f"{project.name}.forks"
    proc = _start(till, project, "--json", "exec", "-n", "2", "--", WORK_THEN_WAIT)
    _wait_for([forks_dir / f"exec-{i}" / "bg.pid" for i in (1, 2)])
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143
    error = json.loads(out)["error"]
    assert (error["code"], error["name"]) == (-32071, "interrupted")
    assert set(error) >= {"code", "name", "message", "next", "details"}
    universes = error["details"]["universes"]
    assert [u["name"] for u in universes] == ["exec-1", "exec-2"]
    assert [u["fork"] for u in universes] == ["exec-1", "exec-2"]
    forks = {f["name"]: f for f in till.json("forks")["forks"]}
    for u in universes:
        assert u["path"] == str(forks_dir / u["name"])
        assert u["base"] == forks[u["name"]]["base"]
        assert u["head"] == forks[u["name"]]["head"] != u["base"]  # sealed after the work
        assert u["port"] == forks[u["name"]]["port"]
        newest = till.json("timeline", cwd=Path(u["path"]))["snapshots"][0]
        assert newest["id"] == u["head"]
        assert newest["trigger"] == "fork" and "(interrupted)" in newest["label"]
        cat = till.json("cat", u["head"], "work.txt")
        assert base64.b64decode(cat["content_base64"]) == f"work of {u['name']}\n".encode()
    assert "universes made so far are sealed" in error["next"]
    assert "sealed exec-1 as" in err and "sealed exec-2 as" in err


@pytest.mark.process
def test_an_interrupted_run_seals_its_fork_and_names_it_in_the_error(
    till: Till, project: Path
) -> None:
    forks_dir = project.parent / f"{project.name}.forks"
    proc = _start(till, project, "--json", "run", "long", "--", WORK_THEN_WAIT)
    _wait_for([forks_dir / "long" / "bg.pid"])
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    error = json.loads(out)["error"]
    assert error["name"] == "interrupted"
    fork = error["details"]["fork"]
    (listed,) = till.json("forks")["forks"]
    assert (fork["name"], fork["path"], fork["base"]) == ("long", listed["path"], listed["base"])
    assert fork["head"] == listed["head"] != fork["base"]
    cat = till.json("cat", fork["head"], "work.txt")
    assert base64.b64decode(cat["content_base64"]) == b"work of long\n"
    assert "fork long is sealed" in error["next"]
    assert "sealed long as" in err


@pytest.mark.process
def test_an_interrupted_run_in_human_mode_says_what_it_sealed(till: Till, project: Path) -> None:
    forks_dir = project.parent / f"{project.name}.forks"
    till.json("fork", "again")
    proc = _start(till, project, "run", "again", "--", WORK_THEN_WAIT)
    _wait_for([forks_dir / "again" / "bg.pid"])
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143
    head = till.json("forks")["forks"][0]["head"]
    assert f"sealed again as {head[:12]} at {forks_dir / 'again'}" in err
