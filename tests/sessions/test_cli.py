"""Two-word commands on the command line: `till session start S` and friends parse, help and
fail like every other command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Till
from tillage.hosts.cli.where import command_of
from tillage.verbs.registry import COMMANDS

SUBCOMMANDS = ("start", "record", "end", "log", "diff", "revert", "cleanup", "changelog")


def test_session_alone_is_a_usage_error(till: Till, project: Path) -> None:
    run = till("--json", "session")
    assert run.code == 2
    assert (run.error["code"], run.error["name"]) == (-32070, "usage")
    assert "SUBCOMMAND" in run.error["message"]
    plain = till("session")
    assert plain.code == 2 and "SUBCOMMAND" in plain.stderr and plain.stdout == ""


def test_an_unknown_subcommand_is_a_usage_error_naming_the_known_ones(
    till: Till, project: Path
) -> None:
    run = till("--json", "session", "bogus", "S")
    assert run.code == 2 and run.error["name"] == "usage"
    assert "bogus" in run.error["message"] and "changelog" in run.error["message"]


def test_a_missing_session_is_a_usage_error(till: Till, project: Path) -> None:
    run = till("--json", "session", "start")
    assert run.code == 2 and run.error["name"] == "usage"


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_each_subcommand_has_help(till: Till, sub: str) -> None:
    run = till("session", sub, "--help")
    assert run.code == 0, run.stderr
    assert run.stdout.startswith(f"usage: till session {sub}")


def test_till_help_lists_the_session_commands(till: Till) -> None:
    run = till("--help")
    assert run.code == 0
    assert "sessions" in run.stdout
    line = next(x for x in run.stdout.splitlines() if x.strip().startswith("session "))
    assert all(sub in run.stdout for sub in SUBCOMMANDS), line
    group = till("session", "--help")
    assert group.code == 0 and all(sub in group.stdout for sub in SUBCOMMANDS)


def test_global_flags_go_before_or_between_the_words(till: Till, project: Path) -> None:
    assert till.json("session", "start", "s")["commit"]["session"] == "s"
    for args in (
        ("--json", "session", "log", "s"),
        ("session", "--json", "log", "s"),
        ("session", "log", "--json", "s"),
        ("--repo", str(project), "--json", "session", "log", "s"),
        ("session", "--repo", str(project), "--json", "log", "s"),
    ):
        run = till(*args, cwd=project.parent if "--repo" in args else project)
        assert run.code == 0, (args, run.stdout, run.stderr)
        assert [c["session"] for c in run.doc["commits"]] == ["s"], args


def test_a_session_named_like_a_subcommand_is_a_session(till: Till, project: Path) -> None:
    assert till.json("session", "start", "log")["commit"]["session"] == "log"
    assert len(till.json("session", "log", "log")["commits"]) == 1


def test_a_folder_that_is_not_attached_answers_not_attached(till: Till, folder: Path) -> None:
    run = till("--json", "session", "start", "s")
    assert run.code == 1 and run.error["code"] == -32060


def test_command_of_reads_two_words_for_a_group_only() -> None:
    groups = {c.split(" ")[0] for c in COMMANDS if " " in c}
    assert "session" in groups
    assert command_of(["--json", "session", "start", "S"], groups) == "session start"
    assert command_of(["session", "--repo", "x", "log", "S"], groups) == "session log"
    assert command_of(["session"], groups) == "session"
    assert command_of(["sessions"], groups) == "sessions"
    assert command_of(["--repo", "session", "timeline"], groups) == "timeline"
    assert command_of(["run", "x", "--", "session", "start"], groups) == "run"
    assert command_of(["--json"], groups) is None
