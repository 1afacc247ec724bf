"""The tools offered to models are derived from the registry, not written by hand."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import tillage.agent
from tests.conftest import Till
from tillage.verbs.contract import Audience, Effect, Scope
from tillage.verbs.registry import all_verbs
from tillage.verbs.tool_defs import FIRST_TOOLS, tool_defs


def _tools() -> dict[str, Any]:
    return {d.name: d for d in tool_defs()}


def test_every_agent_verb_of_a_workspace_is_a_tool_and_nothing_else_is() -> None:
    expected = {
        v.contract.name
        for v in all_verbs()
        if v.contract.audience is Audience.AGENT
        and v.contract.scope is Scope.WORKSPACE
        and (v.contract.tool is None or v.contract.tool.offered)
    }
    assert {d.verb.contract.name for d in tool_defs()} == expected
    assert len(_tools()) == len(tool_defs()), "tool names are unique"


def test_the_four_tools_a_model_reaches_for_come_first_in_a_fixed_order() -> None:
    names = [d.name for d in tool_defs()]
    assert (
        tuple(names[:4])
        == FIRST_TOOLS
        == (
            "workspace_snapshots",
            "workspace_restore",
            "workspace_fork",
            "workspace_merge",
        )
    )
    for name in ("workspace_diff", "workspace_snap"):
        assert name in names


def test_snapshot_limits_are_one_number_in_schema_and_description() -> None:
    snapshots = _tools()["workspace_snapshots"]
    limit = snapshots.input_schema()["properties"]["limit"]
    assert (limit["default"], limit["maximum"], limit["minimum"]) == (20, 100, 1)
    assert "default 20, at most 100" in snapshots.description


def test_arguments_are_spelled_as_the_contract_promises() -> None:
    tools = _tools()

    def props(name: str) -> set[str]:
        return set(tools[name].input_schema()["properties"])

    assert {"snapshot", "paths", "confirm"} <= props("workspace_restore")
    assert not {"yes", "dry_run", "id"} & props("workspace_restore")
    assert tools["workspace_restore"].input_schema()["required"] == ["snapshot"]
    assert {"command", "name"} <= props("workspace_fork")
    assert tools["workspace_fork"].input_schema()["properties"]["command"]["type"] == "string"
    assert {"fork", "check", "preview"} <= props("workspace_merge")
    assert tools["workspace_restore"].input_schema()["additionalProperties"] is False


def test_annotations_follow_each_verbs_contract() -> None:
    for d in tool_defs():
        contract = d.verb.contract
        effect = contract.effect
        runs = any(p.spec.runs for p in contract.params())
        hints = d.annotations()
        assert hints["openWorldHint"] is runs, d.name
        assert hints["readOnlyHint"] is (effect is Effect.READ and not runs), d.name
        destructive = effect is Effect.DESTRUCTIVE or (runs and contract.live_commands)
        assert hints["destructiveHint"] is destructive, d.name
        if effect is Effect.READ:
            assert hints["idempotentHint"] is True
    tools = _tools()
    assert tools["workspace_restore"].annotations()["destructiveHint"] is True
    assert tools["workspace_snapshots"].annotations()["readOnlyHint"] is True


def test_a_tool_that_runs_a_command_says_it_can_do_anything_and_try_that_it_destroys() -> None:
    tools = _tools()
    running = {
        "workspace_run",
        "workspace_fork",
        "workspace_exec",
        "workspace_try",
        "workspace_bisect",
        "workspace_merge",
    }
    for name, d in tools.items():
        assert d.annotations()["openWorldHint"] is (name in running), name
    # `try` runs the command in the live folder (`rm -rf src` deletes src): destructive.
    hints = tools["workspace_try"].annotations()
    assert hints["destructiveHint"] is True and hints["readOnlyHint"] is False
    for name in running - {"workspace_try"}:  # theirs run in a copy of the folder
        assert tools[name].annotations()["destructiveHint"] is False, name


@pytest.mark.anyio
@pytest.mark.process  # a real `till mcp` process, as a harness launches it
async def test_the_real_mcp_tools_list_says_the_same_annotations(
    till: Till, attached: Path
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tillage", "--repo", str(attached), "mcp"],
        env=till.env(),
        cwd=str(attached),
    )
    async with Client(params) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == set(_tools())
    for name, d in _tools().items():
        got = listed[name].annotations
        assert got is not None
        said = got.model_dump(by_alias=True, exclude_none=True)
        assert {k: said[k] for k in d.annotations()} == d.annotations(), name
    assert listed["workspace_try"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert listed["workspace_run"].annotations.open_world_hint is True  # type: ignore[union-attr]


def _cli_words(text: str) -> list[str]:
    """The command line's and the conversation's words in a text a model reads."""
    found = []
    if "--" in text:
        found.append("--")
    if re.search(r"\btill ", text):
        found.append("till ")
    if re.search(r"rewind", text, re.IGNORECASE):
        found.append("rewind")
    if "first 12" in text:
        found.append("first 12")
    for flag in SHORT_FLAGS:
        if re.search(r"(?<![\w/-])" + re.escape(flag) + r"(?![\w-])", text):
            found.append(flag)
    return found


SHORT_FLAGS = {p.spec.short for v in all_verbs() for p in v.contract.params() if p.spec.short}


def test_descriptions_speak_of_tools_and_arguments_never_of_flags_or_rewinds() -> None:
    for d in tool_defs():
        assert not _cli_words(d.description), (d.name, _cli_words(d.description), d.description)
        for name, prop in d.input_schema()["properties"].items():
            words = _cli_words(prop["description"])
            assert not words, (d.name, name, words, prop["description"])


def test_the_bounds_a_tool_states_are_the_bounds_its_code_keeps() -> None:
    from tillage.features.forks.ops import MAX_UNIVERSES
    from tillage.features.radar.claims import MAX_TTL_SECONDS

    def bounds(tool: str, arg: str) -> tuple[Any, Any]:
        prop = _tools()[tool].input_schema()["properties"][arg]
        return prop.get("minimum"), prop.get("maximum")

    assert bounds("workspace_exec", "n") == (1, MAX_UNIVERSES)
    assert bounds("workspace_claim", "ttl_seconds") == (1, MAX_TTL_SECONDS)
    assert bounds("workspace_bisect", "limit") == (2, None)
    assert bounds("workspace_coord_read", "limit") == (1, None)
    for d in tool_defs():
        for arg in d.args:
            if "int" in arg.type.split(" | "):
                assert arg.limit is not None, (d.name, arg.name, "states no bound")
                assert f"`{arg.name}`:" in d.description, (d.name, arg.name)


# Arguments that make a call cheap and harmless, beside the bound under test.
CHEAP = {
    "workspace_exec": {"command": "true", "plan": True},
    "workspace_claim": {"pattern": "src/**", "owner": "bounds"},
    "workspace_bisect": {"command": "true"},
    "workspace_coord_read": {"path": "plan", "history": True},
    "workspace_ls": {"snapshot": "head"},
}


def test_every_integer_argument_refuses_past_its_bounds_and_takes_them(
    till: Till, attached: Path
) -> None:
    tools = {t.name: t for t in tillage.agent.tools(attached, home=till.home)}
    assert (
        not tools["workspace_coord_write"]
        .call({"path": "plan", "value": "x", "owner": "o"})
        .is_error
    )
    try:
        for d in tool_defs():
            for arg in d.args:
                if "int" not in arg.type.split(" | "):
                    continue
                prop = d.input_schema()["properties"][arg.name]
                base = CHEAP.get(d.name, {})
                low = tools[d.name].call({**base, arg.name: prop["minimum"] - 1})
                assert low.is_error, (d.name, arg.name, low.text)
                said = low.structured["error"]  # type: ignore[index]
                assert f"{d.name}: {arg.name} must" in said["message"], said
                took = tools[d.name].call({**base, arg.name: prop["minimum"]})
                if took.is_error:  # the code refused what the schema allows
                    assert took.document["error"]["name"] != "invalid_argument", took.text
                if "maximum" in prop:
                    high = tools[d.name].call({**base, arg.name: prop["maximum"] + 1})
                    assert high.is_error, (d.name, arg.name)
                    top = tools[d.name].call({**base, arg.name: prop["maximum"]})
                    assert not top.is_error, (d.name, arg.name, top.text)
    finally:
        for tool in tools.values():
            tool._belt.close()


def test_the_code_refuses_just_past_the_bounds_the_schema_states(
    till: Till, attached: Path
) -> None:
    """The verbs themselves (a person's door) keep the same numbers the tools state."""
    past_n = till("--json", "exec", "-n", "65", "--plan", "--", "true")
    assert past_n.code != 0 and past_n.error["name"] == "invalid_argument"
    assert till("--json", "exec", "-n", "64", "--plan", "--", "true").code == 0
    past_ttl = till("--json", "claim", "x", "--owner", "o", "--ttl-seconds", "2592001")
    assert past_ttl.code != 0 and past_ttl.error["name"] == "claim.bad_ttl"
    assert till("--json", "claim", "x", "--owner", "o", "--ttl-seconds", "2592000").code == 0
    past_limit = till("--json", "bisect", "--limit", "1", "--", "true")
    assert past_limit.code != 0 and past_limit.error["name"] == "invalid_argument"


def test_destructive_tools_preview_unless_confirmed() -> None:
    for d in tool_defs():
        if d.verb.contract.needs_confirmation is not None:
            schema = d.input_schema()["properties"]
            assert schema["confirm"]["default"] is False, d.name
            assert "only previews" in d.description, d.name


def test_contracts_name_each_verbs_tool(till: Till) -> None:
    verbs = {c["verb"]: c for c in till.json("contracts")["verbs"]}
    assert verbs["timeline.list"]["tool"] == "workspace_snapshots"
    assert verbs["workspace.rewind"]["tool"] == "workspace_restore"
    assert verbs["workspace.watch"]["tool"] is None
    assert verbs["system.mcp"]["tool"] is None
