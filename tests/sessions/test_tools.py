"""The session verbs as a model's tools: the same facts said in prose with the IDs to pass
back, and a revert that only previews until confirmed."""

from __future__ import annotations

from pathlib import Path

import tillage.agent
from tests.conftest import Till
from tests.helpers import manifest
from tests.sessions.conftest import commit_of


def _tools(till: Till, project: Path) -> dict[str, tillage.agent.Tool]:
    return {t.name: t for t in tillage.agent.tools(project, home=till.home)}


def test_the_session_verbs_are_tools_but_cleanup(till: Till, project: Path) -> None:
    names = set(_tools(till, project))
    for verb in ("start", "record", "end", "log", "diff", "revert", "changelog"):
        assert f"workspace_session_{verb}" in names
    assert "workspace_sessions" in names
    assert "workspace_session_cleanup" not in names  # a person's housekeeping


def test_a_model_reads_commits_with_their_ids(till: Till, project: Path) -> None:
    tools = _tools(till, project)
    started = tools["workspace_session_start"].call({"session": "m1", "description": "go"})
    assert not started.is_error and "Started session m1" in started.text
    (project / "README.md").write_text("# a longer readme\n")
    step = tools["workspace_session_record"].call({"session": "m1", "description": "readme"})
    commit = step.document["commit"]
    assert commit["id"] in step.text and "1 file changed" in step.text
    log = tools["workspace_session_changelog"].call({"session": "m1"})
    assert "modified README.md (7 B → 18 B)" in log.text and commit["id"] in log.text
    bad = tools["workspace_session_log"].call({"session": ""})
    assert bad.is_error and "session.bad_id" in bad.text


def test_a_revert_tool_previews_until_confirmed(till: Till, project: Path) -> None:
    base = commit_of(till, "start", "m1")
    (project / "new.txt").write_text("new\n")
    commit_of(till, "record", "m1")
    present = manifest(project)
    tool = _tools(till, project)["workspace_session_revert"]
    preview = tool.call({"commit": base["id"]})
    assert not preview.is_error and "Preview" in preview.text and "deleted new.txt" in preview.text
    assert manifest(project) == present
    applied = tool.call({"commit": base["id"], "confirm": True})
    assert not applied.is_error and "Reverted the folder" in applied.text
    assert applied.document["undo"] in applied.text
    assert not (project / "new.txt").exists()
