"""One contract, many doors: every tool verb answers the same error envelope through the command
line, MCP, the Python seam and the library call (one test walks the registry)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tillage.agent
from tests.agents.mcp_process import mcp_client
from tests.conftest import Till
from tillage import api
from tillage.errors import TillageError
from tillage.verbs.tool_defs import ToolDef, tool_def, tool_defs
from tillage.verbs.tool_speech import speak

pytestmark = pytest.mark.anyio

SAMPLE = {"string": "abcdef", "int": 1, "bool": False}


def _sample(kind: str) -> Any:
    kind = next(k for k in kind.split(" | ") if k != "null")
    if kind.startswith("list["):
        return [SAMPLE.get(kind[5:-1], "abcdef")]
    return SAMPLE.get(kind, "abcdef")


def tool_args(d: ToolDef) -> dict[str, Any]:
    """The least a model must pass: every required argument, with a plausible value."""
    return {a.name: ("true" if a.command else _sample(a.type)) for a in d.args if a.required}


def cli_words(d: ToolDef) -> list[str]:
    """The same call on the command line."""
    words = d.verb.contract.cli.split(" ")
    command: list[str] = []
    for prm in d.verb.contract.params():
        if prm.optional:
            continue
        value = _sample(prm.type)
        if prm.spec.remainder:
            command = ["--", "true"]
        elif prm.spec.positional:
            words += [str(v) for v in (value if isinstance(value, list) else [value])]
        else:
            flag = prm.spec.flag or "--" + prm.name.replace("_", "-")
            words += [flag, *(str(v) for v in (value if isinstance(value, list) else [value]))]
    return [*words, *command]


def api_params(d: ToolDef) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for prm in d.verb.contract.params():
        if not prm.optional:
            value = _sample(prm.type)
            params[prm.name] = ("true",) if prm.spec.remainder else value
    return params


async def test_every_tool_answers_not_attached_alike_on_every_door(
    till: Till, attached: Path
) -> None:
    seam_tools = {t.name: t for t in tillage.agent.tools(attached, home=till.home)}
    assert set(seam_tools) == {d.name for d in tool_defs()}
    till.json("forget")
    expected = {"code": -32060, "name": "workspace.not_attached"}
    async with mcp_client(till, attached) as client:
        assert (await client.list_tools()).tools == [], "absent, not broken"
        for d in tool_defs():
            run = till("--json", *cli_words(d))
            assert run.code == 1, (d.name, run.stdout, run.stderr)
            cli_error = run.error

            mcp_result = await client.call_tool(d.name, tool_args(d))
            assert mcp_result.is_error, d.name
            mcp_error = mcp_result.structured_content["error"]  # type: ignore[index]

            seam_result = seam_tools[d.name].call(tool_args(d))
            assert seam_result.is_error, d.name
            seam_error = seam_result.document["error"]

            with pytest.raises(TillageError) as raised:
                api.call(
                    d.verb.contract.name,
                    home=till.home,
                    folder=attached,
                    **api_params(d),
                )
            api_error = raised.value.envelope()

            for error in (cli_error, mcp_error, seam_error, api_error):
                assert {k: error[k] for k in expected} == expected, (d.name, error)
            # The harness gets the envelope every door has; the model reads the same
            # error with its next step said for it (a person attaches the folder).
            assert seam_error == api_error == cli_error, (d.name, seam_error, cli_error)
            assert seam_result.structured == mcp_result.structured_content
            assert mcp_error["message"] == cli_error["message"]
            assert mcp_error["next"] == speak(cli_error["next"]), mcp_error
            assert "have a person run `till watch`" in mcp_error["next"]


async def test_an_unknown_snapshot_is_the_same_error_on_every_door(
    till: Till, attached: Path
) -> None:
    seam = {t.name: t for t in tillage.agent.tools(attached, home=till.home)}
    cases = [
        ("workspace_restore", {"snapshot": "abcdef"}, ["rewind", "abcdef", "--dry-run"]),
        ("workspace_show", {"id": "abcdef"}, ["show", "abcdef"]),
        ("workspace_diff", {"target": "abcdef"}, ["diff", "abcdef"]),
        ("workspace_pin", {"id": "abcdef"}, ["pin", "abcdef"]),
    ]
    async with mcp_client(till, attached) as client:
        for name, args, words in cases:
            cli = till("--json", *words).error
            mcp = (await client.call_tool(name, args)).structured_content["error"]  # type: ignore[index]
            lib = seam[name].call(args).document["error"]
            assert cli == lib, (name, cli, lib)
            assert {**mcp, "next": cli["next"]} == cli, (name, cli, mcp)
            assert mcp["next"] == speak(cli["next"], tool_def(name)), mcp
            assert cli["code"] == -32061
