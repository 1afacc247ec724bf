"""What a person who knows git, jj or restic reaches for first: `till --version`, "did you
mean", help grouped with the daily commands first, an example on every command's help whose
flags parse, defaults shown, every environment variable tillage reads documented, shell
completion generated from the registry, and `-q`."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import Till

SRC = Path(__file__).parents[2] / "src" / "tillage"


def _commands() -> list[str]:
    from tillage.verbs.registry import COMMANDS

    return sorted(COMMANDS)


def test_version_is_a_flag_too(till: Till) -> None:
    run = till("--version")
    assert run.code == 0 and run.stdout.startswith("till 0.")
    assert till.json("--version") == till.json("version")


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("statsu", "status"), ("timelien", "timeline"), ("session strat", "session start")],
)
def test_a_mistyped_command_is_a_usage_error_that_names_the_one_meant(
    till: Till, typed: str, meant: str
) -> None:
    run = till(*typed.split())
    assert run.code == 2
    assert f"did you mean `till {meant}`?" in run.stderr
    doc = till("--json", *typed.split())
    assert doc.code == 2 and doc.error["name"] == "usage"


def test_a_command_nothing_resembles_says_where_the_list_is(till: Till) -> None:
    run = till("xyzzy")
    assert run.code == 2 and "`till --help` lists them" in run.stderr


def test_top_level_help_groups_daily_commands_first_and_plumbing_last(till: Till) -> None:
    page = till("--help").stdout
    titles = [line[:-1] for line in page.splitlines() if line.endswith(":") and line[0] != " "]
    assert titles[:3] == ["Options", "Protect a folder", "Look back and go back"]
    assert titles[-3] == "Plumbing (for other programs)" and titles[-1] == "Environment"
    assert max(len(line) for line in page.splitlines()) <= 100  # one line a command
    assert page.index("  watch ") < page.index("  timeline ") < page.index("  agents-md ")
    assert page.index("Plumbing") > page.index("The store")
    assert "TILLAGE_HOME" in page and "-q, --quiet" in page and "--version" in page


def test_every_command_is_in_a_group_and_has_an_example() -> None:
    from tillage.hosts.cli.help import EXAMPLES, GROUPS

    grouped = {name for _title, names in GROUPS for name in names}
    for command in _commands():
        assert command in grouped, f"`till {command}` is in no help group"
        assert EXAMPLES.get(command), f"`till {command} --help` has no example"


def test_every_example_parses() -> None:
    from tillage.hosts.cli.help import EXAMPLES
    from tillage.hosts.cli.parser import build_parser
    from tillage.verbs.registry import verb_for_command

    for command, examples in EXAMPLES.items():
        verb = verb_for_command(command)
        assert verb is not None, command
        for line, _what in examples:
            words = shlex.split(line.split(" > ")[0].removeprefix('eval "$(').rstrip(')"'))
            assert words[0] == "till", line
            words = words[1:]
            if "--" in words:
                words = words[: words.index("--")]
            ns = build_parser(verb).parse_args(words)
            assert " ".join(filter(None, (ns.command, getattr(ns, "subcommand", None)))) == (
                command
            ), line


def test_a_command_help_ends_with_its_examples_and_shows_defaults(till: Till) -> None:
    page = till("timeline", "--help").stdout
    assert "(default: 50)" in page
    assert page.index("examples:") > page.index("options:")
    assert "  till timeline -n 200 --trigger manual" in page


def test_a_command_that_may_run_one_shows_it_in_brackets(till: Till) -> None:
    assert "[-- CMD ...]" in till("fork", "--help").stdout
    run_usage = till("run", "--help").stdout
    assert "-- CMD ..." in run_usage and "[-- CMD ...]" not in run_usage


def test_every_environment_variable_tillage_reads_is_documented() -> None:
    from tillage.hosts.cli.help import ENVIRONMENT, SET_FOR_COMMANDS

    told = {name for name, _text in ENVIRONMENT} | set(re.findall(r"[A-Z_]{4,}", SET_FOR_COMMANDS))
    told |= set(re.findall(r"[A-Z][A-Z0-9_]{3,}", " ".join(text for _n, text in ENVIRONMENT)))
    read: set[str] = set()
    for path in SRC.rglob("*.py"):
        read |= set(re.findall(r'"(TILLAGE_[A-Z0-9_]*[A-Z0-9])"', path.read_text()))
    read -= {"TILLAGE_S3_", "TILLAGE_RECOVERY_KEY_"}  # prefixes, not variables
    assert read, "the scan found nothing"
    assert read <= told, sorted(read - told)


def test_the_bash_completion_completes_commands_groups_and_flags(till: Till) -> None:
    script = till("completion", "bash").stdout

    def complete(line: str) -> list[str]:
        probe = (
            f"{script}\nread -ra COMP_WORDS <<< {shlex.quote(line)}\n"
            f'[[ {shlex.quote(line)} == *" " ]] && COMP_WORDS+=("")\n'
            "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _till; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
        )
        out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
        return out.stdout.split()

    assert complete("till stat") == ["status"]
    assert complete("till session st") == ["start"]
    assert "--limit" in complete("till timeline --") and "--json" in complete("till timeline -")
    assert "--description" in complete("till --repo x session start --d")
    assert complete("till rewind 80d3") == []  # an ID: left to the shell


def test_the_zsh_completion_offers_commands_groups_and_flags(till: Till) -> None:
    zsh = till("completion", "zsh").stdout
    assert zsh.startswith("#compdef till") and "compdef _till till" in zsh
    if shutil.which("zsh") is None:
        pytest.skip("no zsh here to run the script in")

    def offered(*words: str) -> list[str]:
        # compadd and _files stood in for: what the function offers, before zsh matches it.
        probe = (
            f"compdef() {{ :; }}\n{zsh}\n"
            'compadd() { [[ $1 == -- ]] && shift; print -l -- "$@" }\n'
            "_files() { print FILES }\n"
            f"words=({' '.join(shlex.quote(w) for w in words)}); CURRENT={len(words)}; _till\n"
        )
        out = subprocess.run(["zsh", "-c", probe], capture_output=True, text=True, check=True)
        return out.stdout.split()

    assert "status" in offered("till", "stat") and "timeline" in offered("till", "stat")
    assert offered("till", "session", "st") == sorted(
        c.partition(" ")[2] for c in _commands() if c.startswith("session ")
    )
    assert "--limit" in offered("till", "timeline", "--l")
    assert offered("till", "rewind", "80d3") == ["FILES"]


def test_the_fish_completion_names_every_command(till: Till) -> None:
    fish = till("completion", "fish").stdout
    for command in _commands():
        assert f"-a {command.partition(' ')[0]} " in fish or f"-a '{command}" in fish
    assert "-l limit -s n -r" in fish
    if shutil.which("fish") is None:
        return  # the script's text is checked; no fish here to run it in
    probe = f"{fish}\ncomplete -C 'till stat'; complete -C 'till session st'"
    out = subprocess.run(["fish", "-c", probe], capture_output=True, text=True, check=True)
    said = [line.split("\t")[0] for line in out.stdout.splitlines()]
    assert said == ["status", "start"]


def test_completion_of_an_unknown_shell_is_refused(till: Till) -> None:
    run = till("--json", "completion", "tcsh")
    assert run.code == 1 and run.error["name"] == "invalid_argument"


def test_quiet_prints_nothing_on_success_but_content_and_errors(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    head = till.json("watch", "--no-daemon")["head"]["id"]
    assert till("-q", "snap").stdout == ""
    assert till("snap", "-q").stdout == ""
    assert till("-q", "cat", head, "a.txt").stdout == "a\n"  # content is what was asked for
    failed = till("-q", "show", "ffffff")
    assert failed.code == 1 and "till:" in failed.stderr
    assert till.json("-q", "status")["attached"] is True  # --json: the document still
    fork = Path(till.json("fork", "f1")["fork"]["path"])
    (fork / "a.txt").write_text("fork\n")
    failed_check = till("-q", "merge", "f1", "--check", "false")
    assert failed_check.code == 3 and "Nothing landed" in failed_check.stdout  # says why


@pytest.mark.process
def test_version_and_did_you_mean_as_a_process(till: Till) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tillage", "statsu"],
        capture_output=True,
        text=True,
        env=till.env(),
        cwd=till.cwd,
    )
    assert run.returncode == 2 and "did you mean `till status`?" in run.stderr


@pytest.mark.parametrize(
    ("typed", "meant"),
    [(("timeline", "--limt", "3"), "--limit"), (("--jsn", "status"), "--json")],
)
def test_a_mistyped_flag_names_the_one_meant(
    till: Till, typed: tuple[str, ...], meant: str
) -> None:
    run = till(*typed)
    assert run.code == 2 and f"did you mean {meant}?" in run.stderr


def test_a_flag_nothing_resembles_is_refused_as_before(till: Till) -> None:
    run = till("timeline", "--zzzzzz")
    assert run.code == 2 and "unrecognized arguments: --zzzzzz" in run.stderr
    assert "did you mean" not in run.stderr


def test_help_is_a_word_too(till: Till) -> None:
    assert till("help").stdout == till("--help").stdout
    assert till("help", "timeline").stdout == till("timeline", "--help").stdout
    assert "examples:" in till("help", "session", "start").stdout
