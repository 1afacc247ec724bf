"""`till try`: seal, run in the workspace, seal again, exit with the command's status."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Till

SNAPSHOT_FIELDS = {"id", "short", "sealed_at", "trigger", "label", "parent", "files", "bytes"}


@pytest.fixture
def project(till: Till, folder: Path) -> Path:
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("print('v1')\n")
    till.json("watch", "--no-daemon")
    return folder


def test_try_seals_before_and_after_and_says_how_to_undo(till: Till, project: Path) -> None:
    run = till("--json", "try", "-m", "bump", "--", "sh", "-c", "echo v2 > src/app.py")
    assert run.code == 0, run.stderr
    doc = run.doc
    before, after = doc["before"], doc["after"]
    assert set(before) >= SNAPSHOT_FIELDS and set(after) >= SNAPSHOT_FIELDS
    assert (before["trigger"], after["trigger"]) == ("try_before", "try_after")
    assert before["label"] == after["label"] == "bump"
    assert after["parent"] == before["id"]
    assert doc["exit_code"] == 0
    assert doc["undo"] == before["id"]  # the snapshot to rewind to, as merge and rewind say
    assert doc["undo_command"] == f"till rewind {before['id']} --yes"
    cat = till.json("cat", after["id"], "src/app.py")
    assert cat["size"] == 3
    till.json(*doc["undo_command"].split()[1:])
    assert (project / "src" / "app.py").read_text() == "print('v1')\n"


def test_a_failing_command_still_seals_after_and_its_status_is_the_exit_status(
    till: Till, project: Path
) -> None:
    run = till("--json", "try", "--", "echo broken > src/app.py; exit 3")
    assert run.code == 3
    doc = run.doc
    assert doc["exit_code"] == 3
    assert doc["after"]["trigger"] == "try_after"
    assert doc["before"]["label"] == "try: echo broken > src/app.py; exit 3"
    timeline = till.json("timeline", "-n", "2")["snapshots"]
    assert [s["id"] for s in timeline] == [doc["after"]["id"], doc["before"]["id"]]
    till.json("rewind", doc["before"]["id"], "--yes")
    assert (project / "src" / "app.py").read_text() == "print('v1')\n"


def test_a_command_that_cannot_be_found_exits_127(till: Till, project: Path) -> None:
    run = till("--json", "try", "--", "no-such-command-xyz", "arg")
    assert run.code == 127
    assert run.doc["exit_code"] == 127


def test_under_json_stdout_is_one_document_while_the_command_prints(
    till: Till, project: Path
) -> None:
    run = till("--json", "try", "--", "seq 1 3000; echo to-stderr >&2; echo {not json}")
    assert run.code == 0
    doc = json.loads(run.stdout)  # the whole of stdout: one document
    assert doc["output"].startswith("1\n2\n3\n")
    assert "to-stderr" in doc["output"] and "{not json}" in doc["output"]
    assert "2999\n3000\n" in run.stderr  # the command's own output went to stderr


def test_the_human_page_shows_the_output_live_and_the_undo_command(
    till: Till, project: Path
) -> None:
    run = till("try", "--", "echo hello-from-command")
    assert run.code == 0
    assert "hello-from-command" in run.stdout
    assert "till rewind " in run.stdout and "--yes" in run.stdout
    failed = till("try", "--", "exit 4")
    assert failed.code == 4
    assert "exit status 4" in failed.stdout


def test_the_command_runs_in_the_callers_folder(till: Till, project: Path) -> None:
    doc = till.json("try", "--", "pwd", cwd=project / "src")
    assert doc["output"].strip() == str((project / "src").resolve())


def test_the_command_keeps_its_own_flags(till: Till, project: Path) -> None:
    doc = till.json("try", "--", "sh", "-c", "echo $0 $1", "--json", "--yes")
    assert doc["output"] == "--json --yes\n"


def test_no_command_is_invalid_and_seals_nothing(till: Till, project: Path) -> None:
    count = till.json("status")["snapshots"]
    for args in (["try", "--"], ["try"]):
        run = till("--json", *args)
        assert run.code == 1
        assert run.error["code"] == -32066
        assert "after `--`" in run.error["next"]
    assert till.json("status")["snapshots"] == count


def test_try_outside_a_workspace_is_not_attached(till: Till) -> None:
    run = till("--json", "try", "--", "true")
    assert run.code == 1
    assert run.error["name"] == "workspace.not_attached"


@pytest.mark.process
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_try_seals_what_the_command_did_so_far_and_says_how_to_undo_it(
    till: Till, project: Path, sig: int, status: int
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tillage",
            "--json",
            "try",
            "--",
            "echo half > src/app.py; echo $$ > pid; exec sleep 60",
        ],
        cwd=project,
        env=till.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_file = project / "pid"
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    try:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert proc.returncode == status
    error = json.loads(out)["error"]
    assert (error["code"], error["name"]) == (-32071, "interrupted")
    assert {"message", "next"} <= set(error)
    after, before = till.json("timeline", "-n", "2")["snapshots"]
    assert (before["trigger"], after["trigger"]) == ("try_before", "try_after")
    assert after["label"].endswith("(interrupted)")
    assert error["details"] == {
        "before": before["id"],
        "after": after["id"],
        "undo": before["id"],
        "undo_command": f"till rewind {before['id']} --yes",
    }
    assert f"till rewind {before['id']} --yes" in error["next"]
    assert f"till rewind {before['id'][:12]} --yes" in err  # the line a person reads
    cat = till.json("cat", after["id"], "src/app.py")
    assert cat["size"] == len("half\n")
    till.json("rewind", error["details"]["undo"], "--yes")
    assert (project / "src" / "app.py").read_text() == "print('v1')\n"
