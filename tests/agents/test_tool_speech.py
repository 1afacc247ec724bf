"""The command line's words said as tool calls (issue 23, item 3): derived from the registry,
so every next step the catalogue holds is said for every tool that can answer it."""

from __future__ import annotations

import re

import pytest

from tillage.errors import SHARED_ERRORS
from tillage.verbs.tool_defs import tool_def, tool_defs
from tillage.verbs.tool_speech import speak

CLI_SPELLING = re.compile(r"(?<![\w-])--[a-z]|\btill |--yes")
PERSONS = re.compile(
    r"have a person run `[^`]*`"
    r"|`[^`]*` \(for a person to run: no tool does it\)"
    r"|`[^`]*` \(a command-line flag: no tool argument takes it\)"
)
ID = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("said", "tool", "expected"),
    [
        (  # the issue's own: a restore preview's next step
            f"till rewind {ID} --yes --paths .env",
            None,
            f'call workspace_restore with {{"snapshot": "{ID}", "confirm": true, '
            '"paths": [".env"]}',
        ),
        (
            f"till bisect --good {ID} --bad {ID} -- 'make test'",
            None,
            f'call workspace_bisect with {{"good": "{ID}", "bad": "{ID}", "command": "make test"}}',
        ),
        (
            "fix the cause and merge again; to put it back, run `till rewind UNDO --yes`",
            None,
            "fix the cause and merge again; to put it back, call workspace_restore with "
            '{"snapshot": "<UNDO>", "confirm": true}',
        ),
        (
            "look at them with `till forks`, or remove one with `till fork-rm NAME --yes`",
            None,
            "look at them with a call of workspace_forks, or remove one with a call of "
            'workspace_fork_remove with {"name": "<NAME>", "confirm": true}',
        ),
        (  # a command no tool offers is a person's
            "run `till watch` in /x to attach it",
            None,
            "have a person run `till watch` in /x to attach it",
        ),
        (
            "till events --follow",  # `follow` is no argument of workspace_events
            None,
            "`till events --follow` (for a person to run: no tool does it)",
        ),
        (  # a flag of the tool's verb is its argument
            "pass the `cursor` of the last event you saw, or leave --after off",
            "workspace_events",
            "pass the `cursor` of the last event you saw, or leave `after` off",
        ),
        (
            "preview with --dry-run, then repeat with --yes",
            "workspace_restore",
            "preview with `confirm: false`, then repeat with `confirm: true`",
        ),
        (
            "give the check to run, e.g. --check 'make test'",
            "workspace_merge",
            'give the check to run, e.g. `check: "make test"`',
        ),
        (
            "e.g. `--take theirs app.db`",
            "workspace_merge",
            'e.g. `take: ["theirs", "app.db"]`',
        ),
        (
            "put the command after `--`, e.g. `-- make test`",
            "workspace_run",
            'put the command in `command`, e.g. `command: "make test"`',
        ),
        ("-n must be between 1 and 64", "workspace_exec", "`n` must be between 1 and 64"),
        (  # `sh -c` is no flag of ours; `till` the English word is no command
            "it runs through /bin/sh -c till it ends",
            "workspace_run",
            "it runs through /bin/sh -c till it ends",
        ),
    ],
)
def test_commands_and_flags_are_said_as_tool_calls_and_arguments(
    said: str, tool: str | None, expected: str
) -> None:
    definition = tool_def(tool) if tool else None
    assert speak(said, definition) == expected
    assert speak(expected, definition) == expected, "saying it twice changes nothing"


def test_a_short_id_a_result_holds_whole_is_said_whole() -> None:
    said = speak(f"till diff {ID[:12]} --to {ID[:12]}", None, (ID,))
    assert said == f'call workspace_diff with {{"target": "{ID}", "to": "{ID}"}}'


def test_every_next_step_of_the_catalogue_is_said_for_each_tool_that_can_answer_it() -> None:
    checked = 0
    for d in tool_defs():
        for cls in {*d.verb.contract.errors, *SHARED_ERRORS}:
            if not cls.next_step:
                continue
            said = speak(cls.next_step, d)
            assert speak(said, d) == said, (d.name, cls.name, said)
            plain = PERSONS.sub("", said)
            assert not CLI_SPELLING.search(plain), (d.name, cls.name, said)
            checked += "till " in cls.next_step or "--" in cls.next_step
    assert checked > 50
