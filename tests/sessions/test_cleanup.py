"""`till session cleanup`: whole sessions go by age or count; their snapshots stay."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.sessions.conftest import commit_of, log_of, snapshot_count
from tillage.features.sessions.sessions import create_session_snapshot
from tillage.platform import clock
from tillage.workspace.attach import find_workspace

DAY_NS = 86_400 * 1_000_000_000
LATER = {"TILLAGE_NOW": "2200-01-01T00:00:00Z"}  # every session of a test is old by then


@contextlib.contextmanager
def clock_at(ns: int) -> Iterator[None]:
    """This process's clock (the seam platform/clock.py offers tests) set to `ns`."""
    real = clock.now_ns
    clock.now_ns = lambda: ns
    try:
        yield
    finally:
        clock.now_ns = real


def _old_session(till: Till, project: Path, session: str, days: int) -> str:
    """A session started `days` ago, through the Python seam in this process (the command
    line has no clock to set for it)."""
    ws = find_workspace(till.home, project)
    assert ws is not None
    try:
        with clock_at(clock.now_ns() - days * DAY_NS):
            return create_session_snapshot(ws, session, "start", "long ago").snapshot
    finally:
        ws.store.close()


def _three_sessions(till: Till, project: Path) -> list[dict[str, str]]:
    commits = []
    for name in ("first", "second", "third"):
        (project / f"{name}.txt").write_text(name)
        commits.append(commit_of(till, "start", name))
    return commits


def test_cleanup_needs_yes_and_changes_nothing_without_it(till: Till, project: Path) -> None:
    _three_sessions(till, project)
    run = till("--json", "session", "cleanup", "--max-sessions", "1")
    assert run.code == 1 and run.error["name"] == "confirmation_required"
    assert len(till.json("sessions")["sessions"]) == 3


def test_cleanup_without_yes_says_what_it_would_change_which_is_no_file(
    till: Till, project: Path
) -> None:
    """It removes session records only: its words say so, and not that it "changes files"."""
    _three_sessions(till, project)
    files = sorted((p.relative_to(project), p.read_bytes()) for p in project.rglob("*.txt"))
    run = till("--json", "session", "cleanup", "--max-sessions", "1")
    message = run.error["message"]
    assert "changes files" not in message
    assert "removes session records" in message and "no file" in message
    assert "nothing was changed" in message
    human = till("session", "cleanup", "--max-sessions", "1")
    assert human.code == 1 and "changes files" not in human.stderr
    preview = till("session", "cleanup", "--max-sessions", "1", "--dry-run")
    assert "no file and no snapshot changes" in preview.stdout
    # The command it offers removes what the preview listed: the same limit, confirmed.
    assert "till session cleanup --max-sessions 1 --yes" in preview.stdout
    doc = till.json("session", "cleanup", "--max-sessions", "1", "--dry-run")
    assert doc["next"] == "till session cleanup --max-sessions 1 --yes"
    assert sorted((p.relative_to(project), p.read_bytes()) for p in project.rglob("*.txt")) == files
    assert len(till.json("sessions")["sessions"]) == 3


@pytest.mark.parametrize("flag", ["--max-sessions", "--max-age-days"])
def test_a_limit_of_0_is_no_limit_as_upstream(till: Till, project: Path, flag: str) -> None:
    """The seed's `Cleanup(ctx, maxAgeDays, maxSessions)`: 0 means no limit, never "remove
    them all"."""
    _old_session(till, project, "ancient", days=400)
    _three_sessions(till, project)
    doc = till.json("session", "cleanup", flag, "0", "--dry-run")
    if flag == "--max-sessions":  # the default age limit still holds
        assert doc["removed"] == ["ancient"] and doc["max_sessions"] is None
    else:  # the default count limit (100) still holds
        assert doc["removed"] == [] and doc["max_age_days"] is None
    doc = till.json("session", "cleanup", "--max-sessions", "0", "--max-age-days", "0", "--yes")
    assert doc["removed"] == []
    assert len(till.json("sessions")["sessions"]) == 4
    doc = till.json("session", "cleanup", "--max-age-days", "0", "--max-sessions", "2", "--yes")
    assert doc["removed"] == ["first", "ancient"]


def test_cleanup_dry_run_names_what_would_go(till: Till, project: Path) -> None:
    _three_sessions(till, project)
    doc = till.json("session", "cleanup", "--max-sessions", "1", "--dry-run")
    assert doc["removed"] == ["second", "first"] and doc["dry_run"] is True
    assert doc["commits_removed"] == 2
    assert len(till.json("sessions")["sessions"]) == 3


def test_cleanup_keeps_the_most_recently_updated_sessions(till: Till, project: Path) -> None:
    commits = _three_sessions(till, project)
    (project / "first.txt").write_text("first, again")
    commit_of(till, "record", "first", "-m", "touch first")  # now the most recent
    count = snapshot_count(till)
    doc = till.json("session", "cleanup", "--max-sessions", "1", "--yes")
    assert doc["removed"] == ["third", "second"] and doc["dry_run"] is False
    assert [s["id"] for s in till.json("sessions")["sessions"]] == ["first"]
    assert log_of(till, "second") == []
    # The snapshots the removed sessions named stay in the timeline, readable.
    assert snapshot_count(till) == count
    assert till.json("show", commits[1]["snapshot"])["snapshot"]["session"] == "second"
    run = till("cat", commits[2]["snapshot"], "third.txt")
    assert (run.code, run.stdout) == (0, "third")


def test_cleanup_removes_sessions_older_than_the_age_by_last_update(
    till: Till, project: Path
) -> None:
    _old_session(till, project, "ancient", days=40)
    _old_session(till, project, "revived", days=40)
    (project / "x.txt").write_text("x")
    commit_of(till, "record", "revived", "-m", "today")  # updated now: it stays
    commit_of(till, "start", "recent")
    doc = till.json("session", "cleanup", "--yes")  # the default: 30 days
    assert doc["removed"] == ["ancient"]
    assert {s["id"] for s in till.json("sessions")["sessions"]} == {"revived", "recent"}
    doc = till.json("session", "cleanup", "--max-age-days", "50", "--yes")
    assert doc["removed"] == []


def test_a_removed_session_can_start_again_from_a_new_baseline(till: Till, project: Path) -> None:
    old = commit_of(till, "start", "again")
    till.json("session", "cleanup", "--max-age-days", "1", "--yes", env=LATER)
    assert till.json("sessions")["sessions"] == []
    new = commit_of(till, "start", "again")
    assert new["id"] != old["id"] and new["is_baseline"] is True
    assert [c["id"] for c in log_of(till, "again")] == [new["id"]]
    run = till("--json", "session", "diff", old["id"])
    assert run.code == 1 and run.error["code"] == -32061


@pytest.mark.parametrize("flag", ["--max-age-days", "--max-sessions"])
def test_a_negative_limit_is_refused(till: Till, project: Path, flag: str) -> None:
    commit_of(till, "start", "kept")
    run = till("--json", "session", "cleanup", flag, "-1", "--yes")
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32066, "session.bad_limit")
    assert len(till.json("sessions")["sessions"]) == 1
