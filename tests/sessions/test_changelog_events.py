"""The changelog a person reads, the same as JSON, sessions in `till events`, and sessions
surviving an index rebuild."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.conftest import Till
from tests.sessions.conftest import commit_of


def _session(till: Till, project: Path) -> list[dict[str, Any]]:
    commits = [commit_of(till, "start", "s1", "-m", "begin")]
    (project / "big.bin").write_bytes(b"b" * 3 * 1024 * 1024)
    (project / "README.md").write_text("# demo, longer now\n")
    commits.append(commit_of(till, "record", "s1", "-m", "add data\nand say so"))
    (project / "big.bin").unlink()
    commits.append(commit_of(till, "end", "s1", "-m", "drop data"))
    return commits


def test_the_changelog_json_is_every_commit_with_its_changes(till: Till, project: Path) -> None:
    commits = _session(till, project)
    doc = till.json("session", "changelog", "s1")
    assert doc["session"] == "s1" and doc["ended"] is True
    assert [c["id"] for c in doc["commits"]] == [c["id"] for c in commits]
    for entry, commit in zip(doc["commits"], commits, strict=True):
        assert {k: v for k, v in entry.items() if k != "changes"} == commit
    assert doc["commits"][0]["changes"] == []
    assert doc["commits"][1]["changes"] == [
        {"path": "README.md", "kind": "modified", "old_size": 7, "new_size": 19},
        {"path": "big.bin", "kind": "added", "old_size": None, "new_size": 3 * 1024 * 1024},
    ]
    assert doc["commits"][2]["changes"] == [
        {"path": "big.bin", "kind": "deleted", "old_size": 3 * 1024 * 1024, "new_size": None}
    ]


def test_the_changelog_reads_as_text_for_people(till: Till, project: Path) -> None:
    commits = _session(till, project)
    run = till("session", "changelog", "s1")
    assert run.code == 0, run.stderr
    text = run.stdout
    assert "Session s1: 3 commits" in text and "ended" in text
    for commit in commits:
        assert commit["short"] in text
    assert "begin" in text and "add data" in text and "and say so" in text
    assert "2 files changed, +3.0 MiB" in text  # sizes for people
    assert "added" in text and "big.bin" in text and "+3.0 MiB" in text
    assert "just now" in text  # relative times
    assert f"till session revert {commits[-1]['short']} --dry-run" in text  # what to run next


def test_the_changelog_of_an_unknown_session_says_how_to_start_it(
    till: Till, project: Path
) -> None:
    assert till.json("session", "changelog", "nope") == {
        "session": "nope",
        "commits": [],
        "ended": False,
    }
    assert "till session start nope" in till("session", "changelog", "nope").stdout


def test_human_pages_of_the_other_verbs_name_the_next_command(till: Till, project: Path) -> None:
    start = till("session", "start", "my session")
    assert "Started session my session" in start.stdout
    assert "till session record 'my session' -m DESC" in start.stdout
    (project / "n.txt").write_text("n" * 2000)
    step = till("session", "record", "my session", "-m", "note")
    assert "1 file changed, +2.0 KiB" in step.stdout and "till session diff" in step.stdout
    assert "Nothing changed since" in till("session", "record", "my session").stdout
    listing = till("sessions").stdout
    assert "my session" in listing and "2 commits" in listing
    assert "till session changelog 'my session'" in till("session", "log", "my session").stdout


def _events(till: Till) -> list[dict[str, Any]]:
    run = till("--json", "events")
    assert run.code == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


def test_commits_ends_and_removals_are_session_events(till: Till, project: Path) -> None:
    commits = _session(till, project)
    later = {"TILLAGE_NOW": "2200-01-01T00:00:00Z"}  # the session is old by then
    till.json("session", "cleanup", "--max-age-days", "1", "--yes", env=later)
    found = [e for e in _events(till) if e["kind"] == "session"]
    assert [e["detail"]["action"] for e in found] == ["start", "commit", "commit", "end", "removed"]
    start, step = found[0]["detail"], found[1]["detail"]
    assert start["commit"] == commits[0]["id"] and start["session"] == "s1"
    assert step == {
        "action": "commit",
        "session": "s1",
        "commit": commits[1]["id"],
        "short": commits[1]["short"],
        "parent": commits[0]["id"],
        "snapshot": commits[1]["snapshot"],
        "description": "add data\nand say so",
        "changed_files": 2,
        "changed_total_size": 3 * 1024 * 1024 + 19,
    }
    assert found[3]["detail"]["commit"] == commits[2]["id"]
    assert found[4]["detail"] == {"action": "removed", "session": "s1", "commits": 3}
    assert all(e["workspace"] == str(project.resolve()) for e in found)
    # For people: one line each, saying what happened.
    lines = [x for x in till("events").stdout.splitlines() if "  session   " in x]
    assert len(lines) == 5
    assert 'commit s1 "add data" 2 files changed' in lines[1]


def _state(till: Till) -> tuple[Any, Any]:
    return till.json("sessions"), till.json("session", "changelog", "s1")


def test_sessions_survive_a_deleted_index(till: Till, project: Path) -> None:
    _session(till, project)
    before = _state(till)
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{till.home / 'index.sqlite'}{suffix}")
        if path.exists():
            os.unlink(path)
    assert _state(till) == before


def test_sessions_survive_verify_repair(till: Till, project: Path) -> None:
    _session(till, project)
    till.json("session", "cleanup", "--max-sessions", "5", "--yes")
    before = _state(till)
    assert till.json("verify", "--repair")["ok"] is True
    assert _state(till) == before
