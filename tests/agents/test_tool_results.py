"""What a model reads from the tools (issue 23, items 3 and 4): the structured result is cut to
the text's cap, every next step speaks in tool calls that work when made, and every ID is whole.

Claude Code hands a model `structuredContent` in place of the text, so both are checked: the
scene below makes every list-ish tool answer far more than fits, and provokes the errors a
model meets, through `tillage.agent` (the same Toolbelt the MCP server calls).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import tillage.agent
from tests.conftest import Till
from tillage.verbs.tool_text import TEXT_LIMIT
from tillage.verbs.tools import ToolResult

# What the cut may add beyond the cap (the note of what was left out).
SLACK = 300
# The command line's spelling: a long flag, a shell `till`, a `--yes`.
CLI_SPELLING = re.compile(r"(?<![\w-])--[a-z]|\btill |--yes")
# Where the command line's words may stand: a command marked as a person's, a flag no tool takes.
PERSONS = re.compile(
    r"have a person run `[^`]*`"
    r"|`[^`]*` \(for a person to run: no tool does it\)"
    r"|`[^`]*` \(a command-line flag: no tool argument takes it\)"
)
# Fields of a result that hold what a command printed or a file held: not tillage's words.
FOREIGN = {"output", "check_output", "content", "value", "stdout", "stderr"}
CALL = re.compile(r"call (?:of )?(workspace_[a-z_]+)(?: with (?=\{))?")


@dataclass
class Scene:
    """A workspace with far more of everything than a tool result holds, and what each tool
    answered about it."""

    till: Till
    folder: Path
    tools: dict[str, Any]
    results: list[tuple[str, dict[str, Any], ToolResult]] = field(default_factory=list)

    def call(self, name: str, args: dict[str, Any] | None = None) -> ToolResult:
        result = self.tools[name].call(args or {})
        self.results.append((name, args or {}, result))
        return result

    def ok(self, name: str, args: dict[str, Any] | None = None) -> ToolResult:
        result = self.call(name, args)
        assert not result.is_error, (name, args, result.text)
        return result


def _loud(n: int) -> str:
    return f"head -c {n} /dev/zero | tr '\\0' x; echo"


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    root = tmp_path_factory.mktemp("scene")
    user_home = root / "home"
    folder = user_home / "project"
    folder.mkdir(parents=True)
    till = Till(root / "store", user_home, folder)
    (folder / "app.py").write_text("print('v1')\n")
    for i in range(200):
        (folder / f"shared_{i:03}.txt").write_text("base\n")
    till.json("watch", "--no-daemon")
    tools = {t.name: t for t in tillage.agent.tools(folder, home=till.home)}
    s = Scene(till, folder, tools)
    (folder / "big.txt").write_text("line of a big text file\n" * 9000)  # 216 KB
    (folder / "big.bin").write_bytes(bytes(range(256)) * 800)  # 200 KB, not UTF-8
    for i in range(110):
        s.ok("workspace_snap", {"label": f"restore point number {i} with a longer label"})
    (folder / "app.py").write_text("print('v2')\n")
    for i in range(400):
        (folder / f"generated_file_number_{i:04}.txt").write_text("x\n")
    s.ok("workspace_snap", {"label": "many files"})
    edit = "for f in shared_*.txt; do echo {0} > $f; done; " + _loud(9000)
    s.ok("workspace_run", {"name": "alpha", "command": edit.format("alpha")})
    s.ok("workspace_run", {"name": "beta", "command": edit.format("beta")})
    for f in folder.glob("shared_*.txt"):
        f.write_text("workspace\n")
    s.ok("workspace_snap", {"label": "workspace edits"})
    for i in range(60):
        s.ok(
            "workspace_claim",
            {"pattern": f"src/area_{i:03}/**/*.py", "owner": f"agent-with-a-long-name-{i}"},
        )
        s.ok(
            "workspace_coord_write",
            {"path": f"tasks/task_{i:03}", "value": f"plan {i} " * 20, "owner": "planner"},
        )
    s.ok("workspace_coord_write", {"path": "tasks/task_000", "value": "again", "owner": "x"})
    for i in range(40):
        s.ok("workspace_session_start", {"session": f"session-{i:03}-" + "s" * 120})
    s.ok("workspace_session_record", {"session": "session-000-" + "s" * 120})
    yield s
    for tool in tools.values():
        tool._belt.close()


def _first(scene: Scene) -> str:
    return str(scene.till.json("timeline", "-n", "1000")["snapshots"][-1]["id"])


@pytest.fixture(scope="module")
def answered(scene: Scene) -> Scene:
    """Every list-ish tool asked for its most, and the errors a model meets."""
    s = scene
    first = _first(s)
    commit = s.tools["workspace_session_log"].call({"session": "session-000-" + "s" * 120})
    commit_id = commit.document["commits"][-1]["id"]
    s.ok("workspace_snapshots", {"limit": 100})
    s.ok("workspace_events", {"limit": 500})
    s.ok("workspace_events", {"limit": 500, "family": True})
    s.ok("workspace_diff", {"target": first})
    s.ok("workspace_cat", {"id": _newest(s), "path": "big.txt"})
    s.ok("workspace_cat", {"id": _newest(s), "path": "big.bin"})
    s.ok("workspace_radar", {})
    pipes = s.folder / "pipes"
    pipes.mkdir()
    for i in range(150):  # paths a snapshot cannot capture exactly: status lists each
        os.mkfifo(pipes / f"named_pipe_number_{i:03}")
    s.ok("workspace_snap", {"label": "with pipes"})
    s.ok("workspace_status", {"fidelity": True})
    shutil.rmtree(pipes)
    s.ok("workspace_snap", {"label": "pipes gone"})
    s.ok("workspace_show", {"id": first})
    s.ok("workspace_forks", {})
    s.ok("workspace_claims", {})
    s.ok("workspace_coord_list", {})
    s.ok("workspace_coord_read", {"path": "tasks/task_000", "history": True})
    s.ok("workspace_sessions", {})
    s.ok("workspace_session_log", {"session": "session-000-" + "s" * 120})
    s.ok("workspace_session_changelog", {"session": "session-000-" + "s" * 120})
    s.ok("workspace_session_diff", {"commit": commit_id})
    s.ok("workspace_session_revert", {"commit": commit_id})  # a preview
    s.ok("workspace_fork_snapshots", {"name": "alpha", "after": first})
    s.ok("workspace_restore", {"snapshot": first})  # a preview of 600 paths
    s.ok("workspace_merge", {"fork": "alpha", "preview": True})
    s.ok("workspace_merge", {"fork": "alpha"})  # conflicts: 200 paths
    s.ok("workspace_exec", {"command": _loud(20000), "n": 3})
    s.ok("workspace_exec", {"command": "true", "n": 64, "plan": True})
    s.ok("workspace_bisect", {"command": "grep -q v1 app.py", "limit": 2})
    s.ok("workspace_try", {"command": _loud(30000)})
    s.ok("workspace_fork", {"name": "gamma", "command": _loud(30000)})
    for name, args in [
        ("workspace_restore", {"snapshot": "abcdef"}),
        ("workspace_restore", {"snapshot": first, "paths": ["../outside"]}),
        ("workspace_events", {"after": "yesterday"}),
        ("workspace_events", {"all_workspaces": True}),
        ("workspace_exec", {"command": "true", "n": 65}),
        ("workspace_claim", {"pattern": "x", "owner": "o", "ttl_seconds": 0}),
        ("workspace_coord_read", {"path": "nothing/here"}),
        ("workspace_coord_read", {"path": "tasks/task_000", "limit": 0}),
        ("workspace_fork_snapshots", {"name": "alpha"}),
        ("workspace_merge", {"fork": "alpha", "check": ""}),
        ("workspace_merge", {"fork": "alpha", "expect": "0" * 64}),
        ("workspace_run", {"name": "alpha", "command": "true", "at": first}),
        ("workspace_bisect", {"command": "true", "limit": 1}),
        ("workspace_release", {"claim": "ffffffffffff", "owner": "o"}),
        ("workspace_pin", {"id": "zz"}),
        ("workspace_session_diff", {"commit": "abcdef"}),
        ("workspace_diff", {"target": "no-such-fork"}),
        ("workspace_fork_remove", {"name": "no-such-fork"}),
        ("workspace_snapshots", {"limit": 101}),
        ("workspace_snapshots", {"trigger": "nonsense"}),
    ]:
        result = s.call(name, args)
        assert result.is_error, (name, args, result.text)
    return s


def _newest(s: Scene) -> str:
    return str(s.till.json("timeline", "-n", "1")["snapshots"][0]["id"])


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _items(doc: Any) -> int:
    """How many items the longest list of a document holds."""
    if isinstance(doc, dict):
        return max([_items(v) for v in doc.values()] or [0])
    if isinstance(doc, list):
        return max([len(doc), *(_items(v) for v in doc)])
    return 0


def test_every_result_a_model_reads_stays_within_the_cap_text_and_structured(
    answered: Scene,
) -> None:
    cut = set()
    for name, args, result in answered.results:
        assert len(result.text.encode()) <= TEXT_LIMIT + SLACK, (name, args, len(result.text))
        if result.structured is not None:
            assert _size(result.structured) <= TEXT_LIMIT + SLACK, (name, args)
            assert "content_base64" not in json.dumps(result.structured), name
        if _size(result.document) > TEXT_LIMIT + SLACK and _items(result.document) > 20:
            # A list too long to show whole: both say how much of it they left out.
            assert result.structured is not None, (name, args)
            assert result.structured.get("left_out"), (name, args, result.structured)
            assert re.search(r"more not shown|left out|\"left_out\"", result.text), (
                name,
                result.text[-300:],
            )
            cut.add(name)
    expected = {
        "workspace_snapshots",
        "workspace_events",
        "workspace_diff",
        "workspace_radar",
        "workspace_claims",
        "workspace_coord_list",
        "workspace_sessions",
        "workspace_restore",
        "workspace_merge",
        "workspace_status",
    }
    assert expected <= cut, expected - cut


def test_a_big_file_is_read_as_text_never_as_base64(answered: Scene) -> None:
    cats = [(args, r) for name, args, r in answered.results if name == "workspace_cat"]
    text_file = next(r for a, r in cats if a["path"] == "big.txt")
    assert text_file.structured is not None
    assert text_file.structured["content"].startswith("line of a big text file\n")
    assert text_file.structured["content_left_out_bytes"] > 200_000
    assert text_file.structured["truncated"] is True, "a cut content says it is cut"
    assert "left out" in text_file.text
    binary = next(r for a, r in cats if a["path"] == "big.bin")
    assert binary.structured is not None and binary.structured["binary"] is True
    for _, r in cats:  # the harness still has the bytes
        assert r.document["content_base64"]


def _spoken(value: Any, key: str = "") -> Iterator[str]:
    """The words tillage says in a structured result (not what a command printed)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in FOREIGN:
                yield from _spoken(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _spoken(v, key)
    elif isinstance(value, str) and key in {"next", "undo_command", "message", "hint"}:
        yield value


def _text_words(name: str, result: ToolResult) -> str:
    """The text tillage writes around a result (the end of a command's output cut away)."""
    text = result.text
    for marker in ("Its output (the end):", "The check's output (the end):", "as it was in "):
        if marker in text:
            text = text.split(marker)[0]
    if name in {"workspace_exec", "workspace_coord_read", "workspace_coord_list"}:
        return text.split("\n")[0]
    return text


def test_no_next_step_speaks_the_command_line(answered: Scene) -> None:
    said = 0
    for name, args, result in answered.results:
        words = [_text_words(name, result)]
        if result.structured is not None:
            words += list(_spoken(result.structured))
        for text in words:
            plain = PERSONS.sub("", text)
            assert not CLI_SPELLING.search(plain), (name, args, text)
            said += "call workspace_" in text
    assert said >= 10, "next steps are said as calls"


def test_every_id_a_tool_returns_is_whole(answered: Scene) -> None:
    whole: set[str] = set()
    for _, _, result in answered.results:
        whole |= set(re.findall(r"\b[0-9a-f]{64}\b", json.dumps(result.document)))
    assert len(whole) > 100
    prefixes = {w[:n] for w in whole for n in range(8, 64)}
    for name, args, result in answered.results:
        said = [result.text, json.dumps(result.structured or {})]
        for text in said:
            assert "first 12" not in text, name
            for word in re.findall(r"(?<![0-9a-f])[0-9a-f]{8,63}(?![0-9a-f])", text):
                assert word not in prefixes, (name, args, word, text[:400])
        assert "short" not in json.dumps(result.structured or {}).replace('"short_', ""), name


def _calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls a next step asks for: (tool, arguments)."""
    found = []
    decoder = json.JSONDecoder()
    for match in CALL.finditer(text):
        args: dict[str, Any] = {}
        if text[match.end() : match.end() + 1] == "{":
            args, _ = decoder.raw_decode(text, match.end())
        found.append((match.group(1), args))
    return found


def _next_of(result: ToolResult, key: str = "next") -> list[tuple[str, dict[str, Any]]]:
    assert result.structured is not None
    doc = result.structured.get("error", result.structured)
    return _calls(doc[key])


@pytest.fixture
def small(till: Till, attached: Path) -> Iterator[dict[str, Any]]:
    tools = {t.name: t for t in tillage.agent.tools(attached, home=till.home)}
    yield tools
    for tool in tools.values():
        tool._belt.close()


def test_a_restore_previews_then_its_next_call_applies_and_the_next_undoes(
    till: Till, attached: Path, small: dict[str, Any]
) -> None:
    first = till.json("timeline")["snapshots"][0]["id"]
    (attached / ".env").write_text("KEY=two\n")
    (attached / "app.py").write_text("print('v2')\n")
    preview = small["workspace_restore"].call({"snapshot": first, "paths": [".env"]})
    [(tool, args)] = _next_of(preview)
    assert (tool, args) == (
        "workspace_restore",
        {"snapshot": first, "confirm": True, "paths": [".env"]},
    )
    assert (attached / ".env").read_text() == "KEY=two\n", "a preview changes nothing"
    applied = small[tool].call(args)
    assert not applied.is_error and applied.structured["applied"] is True  # type: ignore[index]
    assert (attached / ".env").read_text() == "KEY=one\n"
    assert (attached / "app.py").read_text() == "print('v2')\n", "only the paths given"
    [(tool, args)] = _next_of(applied)
    assert args["snapshot"] == applied.document["undo"] and args["confirm"] is True
    undone = small[tool].call(args)
    assert not undone.is_error and (attached / ".env").read_text() == "KEY=two\n"


def test_a_try_says_its_undo_as_a_call_that_works(
    till: Till, attached: Path, small: dict[str, Any]
) -> None:
    tried = small["workspace_try"].call({"command": "rm app.py"})
    assert not tried.is_error and not (attached / "app.py").exists()
    [(tool, args)] = _next_of(tried, "undo_command")
    assert tool == "workspace_restore" and args["confirm"] is True
    assert not small[tool].call(args).is_error
    assert (attached / "app.py").read_text() == "print('v1')\n"


def test_a_bisect_cut_short_says_the_call_that_goes_on(
    till: Till, attached: Path, small: dict[str, Any]
) -> None:
    for i in range(6):
        (attached / "app.py").write_text("print('v1')\n" if i < 3 else "print('v2')\n")
        (attached / f"step{i}").write_text(str(i))
        till.json("snap")
    check = "grep -q v1 app.py"
    cut = small["workspace_bisect"].call({"command": check, "limit": 2})
    assert not cut.is_error and cut.document["outcome"] == "limit_reached"
    [(tool, args)] = _next_of(cut)
    assert tool == "workspace_bisect" and args["command"] == check
    assert len(args["good"]) == len(args["bad"]) == 64, "whole IDs, never short ones"
    went_on = small[tool].call(args)
    assert not went_on.is_error, went_on.text
    assert went_on.document["outcome"] == "found"
    [(tool, args)] = _next_of(went_on)
    assert tool == "workspace_diff"
    assert not small[tool].call(args).is_error


def test_an_error_names_the_call_that_gets_past_it(
    till: Till, attached: Path, small: dict[str, Any]
) -> None:
    missing = small["workspace_restore"].call({"snapshot": "abcdef"})
    assert missing.is_error
    calls = _next_of(missing)
    assert calls and calls[0][0] == "workspace_snapshots", missing.structured
    for tool, args in calls:
        assert not small[tool].call(args).is_error
    bad = small["workspace_events"].call({"after": "yesterday"})
    said = bad.structured["error"]  # type: ignore[index]
    assert "`after`" in said["message"] and "--after" not in said["message"]
    assert "--after" in bad.document["error"]["message"], "the harness keeps the envelope"


@pytest.mark.anyio
@pytest.mark.process  # a real `till mcp` process, as Claude Code launches it
async def test_what_a_real_mcp_client_is_handed_is_capped_and_speaks_tools(
    till: Till, attached: Path
) -> None:
    import sys

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    first = till.json("timeline")["snapshots"][0]["id"]
    (attached / "big.txt").write_text("a line of a file of 200 KB\n" * 8000)
    (attached / ".env").write_text("KEY=two\n")
    for i in range(40):
        till.json("snap", "-m", f"a label long enough to weigh something, number {i}")
    newest = till.json("timeline", "-n", "1")["snapshots"][0]["id"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tillage", "--repo", str(attached), "mcp"],
        env=till.env(),
        cwd=str(attached),
    )
    async with Client(params) as client:
        cat = await client.call_tool("workspace_cat", {"id": newest, "path": "big.txt"})
        events = await client.call_tool("workspace_events", {"limit": 500})
        preview = await client.call_tool(
            "workspace_restore", {"snapshot": first, "paths": [".env"]}
        )
    for result in (cat, events, preview):
        assert not result.is_error
        handed = result.structured_content  # what Claude Code gives the model
        assert handed is not None
        assert _size(handed) <= TEXT_LIMIT + SLACK, _size(handed)
    assert "content_base64" not in json.dumps(cat.structured_content)
    assert cat.structured_content["content"].startswith("a line of a file")  # type: ignore[index]
    assert events.structured_content["left_out"]["events"] > 0  # type: ignore[index]
    said = preview.structured_content["next"]  # type: ignore[index]
    assert "--yes" not in said and "till " not in said
    assert _calls(said) == [
        ("workspace_restore", {"snapshot": first, "confirm": True, "paths": [".env"]})
    ]
