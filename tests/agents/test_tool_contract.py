"""The tools offered to models are derived from the registry, not written by hand."""

from __future__ import annotations

from typing import Any

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


def test_annotations_follow_each_verbs_effect() -> None:
    for d in tool_defs():
        effect = d.verb.contract.effect
        hints = d.annotations()
        assert hints["readOnlyHint"] is (effect is Effect.READ), d.name
        assert hints["destructiveHint"] is (effect is Effect.DESTRUCTIVE), d.name
        if effect is Effect.READ:
            assert hints["idempotentHint"] is True
    tools = _tools()
    assert tools["workspace_restore"].annotations()["destructiveHint"] is True
    assert tools["workspace_snapshots"].annotations()["readOnlyHint"] is True


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
