"""A model sees its own workspace and its family, never another workspace of the store
(issue 23, item 2): `workspace_events` from one folder names nothing of an unrelated one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tillage.agent
from tests.conftest import Till
from tillage.verbs.tools import ToolResult

SECRET_LABEL = "label-of-the-other-project"
SECRET_SESSION = "session-of-the-other-project-42"


@pytest.fixture
def other(till: Till, attached: Path) -> Path:
    """An unrelated workspace in the same store, with a label and a session of its own."""
    folder = till.user_home / "other-project"
    folder.mkdir()
    (folder / "notes.txt").write_text("theirs\n")
    till.json("watch", "--no-daemon", cwd=folder)
    till.json("snap", "-m", SECRET_LABEL, cwd=folder)
    till.json("session", "start", SECRET_SESSION, cwd=folder)
    (folder / "notes.txt").write_text("theirs, changed\n")
    till.json("session", "record", SECRET_SESSION, "-m", "a step", cwd=folder)
    return folder


def _tools(till: Till, folder: Path) -> Iterator[dict[str, Any]]:
    tools = {t.name: t for t in tillage.agent.tools(folder, home=till.home)}
    yield tools
    for tool in tools.values():
        tool._belt.close()


@pytest.fixture
def tools(till: Till, attached: Path) -> Iterator[dict[str, Any]]:
    yield from _tools(till, attached)


def _everything(result: ToolResult) -> str:
    return "\n".join(
        [result.text, json.dumps(getattr(result, "structured", None)), json.dumps(result.document)]
    )


def test_events_from_a_tool_never_name_an_unrelated_workspace(
    till: Till, attached: Path, other: Path, tools: dict[str, Any]
) -> None:
    # A person's `--all` sees the whole store: the other workspace's facts are there to leak.
    lines = till("--json", "events", "--all", "-n", "1000").stdout.splitlines()
    everyone = json.dumps([json.loads(line) for line in lines])
    for secret in (str(other), SECRET_LABEL, SECRET_SESSION):
        assert secret in everyone, secret

    # What the issue saw: `all_workspaces` from a tool listed the whole store.
    asked_for_all = tools["workspace_events"].call({"all_workspaces": True})
    assert str(other) not in _everything(asked_for_all), "another workspace leaked"
    assert asked_for_all.is_error
    assert asked_for_all.document["error"]["name"] == "invalid_argument"

    answers = [
        tools["workspace_events"].call({}),
        tools["workspace_events"].call({"limit": 500}),
        tools["workspace_events"].call({"family": True, "limit": 500}),
    ]
    for result in answers:
        assert not result.is_error, result.text
        assert result.document["events"], "its own events are there"
        for secret in (str(other), SECRET_LABEL, SECRET_SESSION):
            assert secret not in _everything(result), (secret, result.text)

    schema = tools["workspace_events"].input_schema["properties"]
    assert "all_workspaces" not in schema and "family" in schema


def test_the_family_is_its_forks_at_any_depth_and_the_forks_it_descends_from(
    till: Till, attached: Path, other: Path, tools: dict[str, Any]
) -> None:
    made = tools["workspace_run"].call({"name": "kid", "command": "echo kid > kid.txt"})
    assert not made.is_error, made.text
    kid = Path(made.document["fork"]["path"])
    for kid_tools in _tools(till, kid):
        grand = kid_tools["workspace_run"].call({"name": "grandkid", "command": "echo g > g.txt"})
        assert not grand.is_error, grand.text
        grandkid = grand.document["fork"]["path"]

        mine = tools["workspace_events"].call({"limit": 500})
        assert {e["workspace"] for e in mine.document["events"]} == {str(attached)}
        family = tools["workspace_events"].call({"family": True, "limit": 500})
        seen = {e["workspace"] for e in family.document["events"]}
        assert seen == {str(attached), str(kid), grandkid}, seen

        from_the_kid = kid_tools["workspace_events"].call({"family": True, "limit": 500})
        seen = {e["workspace"] for e in from_the_kid.document["events"]}
        assert seen == {str(attached), str(kid), grandkid}, seen
        assert str(other) not in _everything(from_the_kid)

    # A person on the command line may still read every workspace.
    lines = till("--json", "events", "--all", "-n", "1000").stdout.splitlines()
    assert str(other) in {json.loads(line)["workspace"] for line in lines}
