"""The command-line host's promises, through the real process: exit statuses and envelopes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import Till

CRASH = (
    "import sys; from tillage.platform import failpoints; "
    "from tillage.hosts.cli.main import main; "
    "failpoints.arm('publish.after_log'); sys.exit(main(sys.argv[1:]))"
)


def test_an_unknown_flag_is_a_usage_error_with_status_2(till: Till) -> None:
    run = till("status", "--no-such-flag")
    assert run.code == 2
    assert "no-such-flag" in run.stderr


def test_an_unknown_command_is_a_usage_error_with_status_2(till: Till) -> None:
    run = till("frobnicate")
    assert run.code == 2
    assert run.stdout == ""


def test_a_usage_error_under_json_still_prints_one_envelope(till: Till) -> None:
    run = till("--json", "frobnicate")
    assert run.code == 2
    assert run.error["name"] == "usage"


def test_a_missing_argument_is_a_usage_error(till: Till) -> None:
    assert till("--json", "show").code == 2


def test_a_public_error_exits_1_with_the_envelope_on_stdout(till: Till) -> None:
    run = till("--json", "status")
    assert run.code == 1
    assert set(run.error) >= {"code", "name", "message", "next"}
    assert run.error["code"] == -32060


def test_a_public_error_without_json_is_one_line_on_stderr(till: Till) -> None:
    run = till("status")
    assert run.code == 1
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1
    assert "workspace.not_attached" in run.stderr


def test_global_flags_may_follow_the_command(till: Till) -> None:
    run = till("status", "--json")
    assert run.code == 1
    assert run.error["name"] == "workspace.not_attached"


def _crash(till: Till, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CRASH, *args],
        cwd=till.cwd,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.process
def test_an_internal_error_shows_no_traceback_without_debug(till: Till) -> None:
    proc = _crash(till, "--json", "watch", "--no-daemon")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert '"name":"internal"' in proc.stdout


@pytest.mark.process
def test_an_internal_error_shows_the_traceback_with_debug(till: Till) -> None:
    proc = _crash(till, "--debug", "watch", "--no-daemon")
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr
    assert "FailpointCrashError" in proc.stderr


def test_version_needs_no_store(till: Till, tmp_path: Path) -> None:
    doc = till.json("version")
    assert doc["version"]
    assert not till.home.exists()
