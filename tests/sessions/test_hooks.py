"""Agent hooks feed a session's changelog: with a session, a pre-turn starts the chain and a
turn-end records the turn, each naming the snapshot the hook sealed (no second seal)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Till
from tests.hooks.test_hooks import hook, ok
from tests.sessions.conftest import commit_of, log_of, snapshot_count

SESSION = "0d6c4c39-8d4e-4f57-9f5e-3f6a3b1c2d7e"


def claude(till: Till, event: str, session: str = SESSION) -> dict[str, Any]:
    """A Claude Code hook as Claude Code runs it: its payload on stdin."""
    payload = {"session_id": session, "hook_event_name": event, "cwd": str(till.cwd)}
    doc: dict[str, Any] = ok(hook(till, stdin=json.dumps(payload)))
    return doc


def test_a_claude_code_session_gets_a_changelog_for_free(till: Till, project: Path) -> None:
    before = snapshot_count(till)
    pre = claude(till, "UserPromptSubmit")
    assert pre["event"] == "pre-turn" and pre["session_commit"] is not None
    (project / "feature.py").write_text("def f():\n    return 1\n")
    end = claude(till, "Stop")
    assert end["event"] == "turn-end"
    assert snapshot_count(till) == before + 2  # one seal per hook, none more
    log = log_of(till, SESSION)
    assert [c["id"] for c in log] == [pre["session_commit"], end["session_commit"]]
    base, turn = log
    assert base["is_baseline"] is True and base["snapshot"] == pre["snapshot"]["id"]
    assert turn["snapshot"] == end["snapshot"]["id"] and turn["parent"] == base["id"]
    assert (turn["changed_files"], turn["changed_total_size"]) == (1, 22)
    assert turn["description"] == "hook turn-end agent=claude-code turn=1"
    assert turn["agent"] == "claude-code"
    changes = till.json("session", "diff", turn["id"])["changes"]
    assert [(c["path"], c["kind"]) for c in changes] == [("feature.py", "added")]


def test_a_turn_end_without_a_chain_starts_it(till: Till, project: Path) -> None:
    doc = ok(hook(till, "turn-end", "--session", "s-late"))
    log = log_of(till, "s-late")
    assert [c["id"] for c in log] == [doc["session_commit"]]
    assert log[0]["is_baseline"] and log[0]["snapshot"] == doc["snapshot"]["id"]


def test_a_turn_that_changed_nothing_adds_no_commit(till: Till, project: Path) -> None:
    claude(till, "UserPromptSubmit")
    first = claude(till, "Stop")
    again = claude(till, "Stop")
    assert again["session_commit"] == first["session_commit"]
    assert len(log_of(till, SESSION)) == 1  # the turn changed nothing since the baseline


def test_a_second_pre_turn_leaves_the_chain_alone(till: Till, project: Path) -> None:
    claude(till, "UserPromptSubmit")
    (project / "x.txt").write_text("x")
    turn = claude(till, "Stop")
    again = claude(till, "UserPromptSubmit")
    assert again["session_commit"] == turn["session_commit"]  # the chain's newest, unchanged
    assert len(log_of(till, SESSION)) == 2


def test_hooks_and_session_verbs_extend_one_chain(till: Till, project: Path) -> None:
    base = commit_of(till, "start", SESSION, "-m", "by hand")
    (project / "y.txt").write_text("y")
    end = claude(till, "Stop")
    log = log_of(till, SESSION)
    assert [c["id"] for c in log] == [base["id"], end["session_commit"]]


def test_hooks_without_a_session_or_after_a_tool_record_no_commit(
    till: Till, project: Path
) -> None:
    assert ok(hook(till, "turn-end"))["session_commit"] is None
    (project / "z.txt").write_text("z")
    tool = ok(hook(till, "post-tool", "--session", "s1", "--tool", "Edit"))
    assert tool["session_commit"] is None
    assert till.json("sessions")["sessions"] == []


def test_a_hook_with_a_session_id_that_is_no_session_id_still_seals(
    till: Till, project: Path
) -> None:
    doc = ok(hook(till, "turn-end", "--session", "bad\x01id"))
    assert doc["snapshot"] is not None and doc["session_commit"] is None
    assert till.json("sessions")["sessions"] == []
