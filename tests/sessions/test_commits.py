"""`till session start | record | end | log` and `till sessions` through the real process: a
session is a linear chain of commits over snapshots, each counting what it changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.sessions.conftest import commit_of, log_of, snapshot_count
from tillage.core.sessions import body_holds_its_id

COMMIT_FIELDS = {
    "id",
    "short",
    "parent",
    "session",
    "snapshot",
    "description",
    "created_at",
    "file_count",
    "total_size",
    "changed_files",
    "changed_total_size",
    "is_baseline",
}


def test_start_records_a_baseline_on_a_new_session_snapshot(till: Till, project: Path) -> None:
    before = snapshot_count(till)
    doc = till.json("session", "start", "s1", "-m", "begin the work")
    commit = doc["commit"]
    assert set(commit) >= COMMIT_FIELDS
    assert len(commit["id"]) == 64 and commit["short"] == commit["id"][:12]
    assert commit["is_baseline"] is True and commit["parent"] is None
    assert (commit["changed_files"], commit["changed_total_size"]) == (0, 0)
    assert (commit["file_count"], commit["total_size"]) == (2, 19)
    assert commit["session"] == "s1" and commit["description"] == "begin the work"
    assert commit["created_at"].endswith("Z")
    assert (doc["added"], doc["sealed"], doc["ended"]) == (True, True, False)
    assert snapshot_count(till) == before + 1
    snap = till.json("show", commit["snapshot"])["snapshot"]
    assert (snap["trigger"], snap["session"]) == ("session", "s1")
    assert snap["label"] == "session start: begin the work"


def test_starting_again_answers_the_same_baseline_and_seals_nothing(
    till: Till, project: Path
) -> None:
    first = commit_of(till, "start", "s1")
    (project / "new.txt").write_text("later\n")
    count = snapshot_count(till)
    again = till.json("session", "start", "s1", "-m", "again")
    assert again["commit"] == first
    assert (again["added"], again["sealed"]) == (False, False)
    assert snapshot_count(till) == count
    assert [c["id"] for c in log_of(till, "s1")] == [first["id"]]


def test_record_with_nothing_changed_answers_the_previous_commit(till: Till, project: Path) -> None:
    base = commit_of(till, "start", "s1")
    (project / "README.md").write_text("# demo, edited\n")
    step = commit_of(till, "record", "s1", "-m", "edit")
    count = snapshot_count(till)
    doc = till.json("session", "record", "s1", "-m", "nothing new")
    assert doc["commit"] == step
    assert (doc["added"], doc["sealed"]) == (False, False)
    assert snapshot_count(till) == count  # an unchanged folder publishes no snapshot
    assert [c["id"] for c in log_of(till, "s1")] == [base["id"], step["id"]]


def test_starting_a_session_that_has_commits_answers_its_newest_commit(
    till: Till, project: Path
) -> None:
    """As upstream's NewChange on a started chain: where the session is now, not its
    baseline."""
    base = commit_of(till, "start", "s1")
    (project / "step.txt").write_text("a step\n")
    step = commit_of(till, "record", "s1", "-m", "a step")
    count = snapshot_count(till)
    again = till.json("session", "start", "s1", "-m", "again")
    assert again["commit"] == step and again["commit"]["id"] != base["id"]
    assert (again["added"], again["sealed"], again["already_started"]) == (False, False, True)
    assert snapshot_count(till) == count
    assert [c["id"] for c in log_of(till, "s1")] == [base["id"], step["id"]]
    assert "already started" in till("session", "start", "s1").stdout


def test_a_deleted_file_counts_its_old_size(till: Till, project: Path) -> None:
    commit_of(till, "start", "s1")
    (project / "big.bin").write_bytes(b"b" * 5000)
    commit_of(till, "record", "s1")
    (project / "big.bin").unlink()
    gone = commit_of(till, "record", "s1", "-m", "drop it")
    assert (gone["changed_files"], gone["changed_total_size"]) == (1, 5000)


def test_a_commit_counts_changed_files_and_their_sizes(till: Till, project: Path) -> None:
    commit_of(till, "start", "s1")
    readme = (project / "README.md").stat().st_size
    (project / "src" / "app.py").write_text("x" * 500)  # modified: 500 new bytes
    (project / "README.md").unlink()  # deleted: counted, by its old size (as upstream)
    (project / "docs").mkdir()
    (project / "docs" / "guide.md").write_bytes(b"g" * 3000)  # added in a new folder
    (project / "empty").touch()  # added, 0 bytes
    commit = commit_of(till, "record", "s1", "-m", "a step")
    assert commit["changed_files"] == 4  # the new folder itself is no file
    assert commit["changed_total_size"] == 3500 + readme
    assert commit["is_baseline"] is False
    snap = till.json("show", commit["snapshot"])["snapshot"]
    assert (commit["file_count"], commit["total_size"]) == (snap["files"], snap["bytes"])
    assert (commit["file_count"], commit["total_size"]) == (3, 3500)


def test_each_commit_names_the_one_before_it(till: Till, project: Path) -> None:
    ids = [commit_of(till, "start", "s1")["id"]]
    for n in range(3):
        (project / f"f{n}.txt").write_text(str(n))
        commit = commit_of(till, "record", "s1", "-m", f"step {n}")
        assert commit["parent"] == ids[-1]
        ids.append(commit["id"])
    log = log_of(till, "s1")
    assert [c["id"] for c in log] == ids  # oldest first
    assert [c["description"] for c in log] == ["session started", "step 0", "step 1", "step 2"]


def test_record_on_a_session_without_commits_starts_it(till: Till, project: Path) -> None:
    commit = commit_of(till, "record", "fresh", "-m", "first")
    assert commit["is_baseline"] is True and commit["parent"] is None
    assert commit["description"] == "first"


def test_end_marks_the_session_ended_and_a_later_record_goes_on(till: Till, project: Path) -> None:
    commit_of(till, "start", "s1")
    (project / "a.txt").write_text("a")
    doc = till.json("session", "end", "s1", "-m", "done")
    assert doc["ended"] is True and doc["added"] is True
    assert doc["commit"]["changed_files"] == 1
    listed = till.json("sessions")["sessions"]
    assert [(s["id"], s["ended"]) for s in listed] == [("s1", True)]
    assert listed[0]["ended_at"].endswith("Z")
    # Ending again with nothing changed: the same commit, still ended, nothing new.
    again = till.json("session", "end", "s1")
    assert again["commit"] == doc["commit"] and again["added"] is False
    (project / "b.txt").write_text("b")
    commit_of(till, "record", "s1", "-m", "more")
    listed = till.json("sessions")["sessions"]
    assert (listed[0]["ended"], listed[0]["commits"]) == (False, 3)


def test_end_of_an_unknown_session_starts_and_ends_it(till: Till, project: Path) -> None:
    doc = till.json("session", "end", "short-lived")
    assert doc["commit"]["is_baseline"] is True and doc["ended"] is True
    assert till.json("sessions")["sessions"][0]["ended"] is True


def test_the_log_of_an_unknown_session_is_empty(till: Till, project: Path) -> None:
    doc = till.json("session", "log", "never-started")
    assert doc == {"session": "never-started", "commits": []}


def test_sessions_are_listed_most_recently_updated_first(till: Till, project: Path) -> None:
    assert till.json("sessions") == {"sessions": []}
    commit_of(till, "start", "alpha")
    commit_of(till, "start", "beta")
    (project / "c.txt").write_text("c")
    head = commit_of(till, "record", "alpha", "-m", "alpha again")
    listed = till.json("sessions")["sessions"]
    assert [s["id"] for s in listed] == ["alpha", "beta"]
    alpha = listed[0]
    assert set(alpha) >= {"id", "commits", "created_at", "updated_at"}
    assert (alpha["commits"], alpha["head"], alpha["ended"]) == (2, head["id"], False)
    assert alpha["updated_at"] >= alpha["created_at"]


def test_sessions_are_per_workspace(till: Till, project: Path, tmp_path: Path) -> None:
    other = till.user_home / "other"
    other.mkdir()
    (other / "x.txt").write_text("x")
    till.json("watch", "--no-daemon", cwd=other)
    commit_of(till, "start", "mine")
    assert till.json("sessions", cwd=other) == {"sessions": []}
    assert log_of(till, "mine", cwd=other) == []


def test_a_commit_id_is_the_hash_of_its_record(till: Till, project: Path) -> None:
    commit = commit_of(till, "start", "s1")
    lines = (till.home / "log" / "publication.log").read_text().splitlines()
    bodies = [json.loads(x)["body"] for x in lines if json.loads(x)["kind"] == "session_commit"]
    assert [b["id"] for b in bodies] == [commit["id"]]
    assert body_holds_its_id(bodies[0])
    assert not body_holds_its_id({**bodies[0], "description": "rewritten"})


@pytest.mark.process
def test_the_agent_is_recorded_from_tillage_agent(till: Till, project: Path) -> None:
    import subprocess
    import sys

    env = {**till.env(), "TILLAGE_AGENT": "claude-code"}
    proc = subprocess.run(
        [sys.executable, "-m", "tillage", "--json", "session", "start", "s1"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    commit = json.loads(proc.stdout)["commit"]
    assert commit["agent"] == "claude-code"
    assert till.json("show", commit["snapshot"])["snapshot"]["agent"] == "claude-code"


@pytest.mark.parametrize(
    "bad",
    ["", "   ", "tab\there", "bell\x07", "x" * 201, "new\nline"],
    ids=["empty", "blank", "tab", "control", "too-long", "newline"],
)
@pytest.mark.parametrize("verb", ["start", "record", "end", "log", "changelog"])
def test_a_bad_session_id_is_refused_and_nothing_changes(
    till: Till, project: Path, bad: str, verb: str
) -> None:
    count = snapshot_count(till)
    log = (till.home / "log" / "publication.log").read_bytes()
    run = till("--json", "session", verb, bad)
    assert run.code == 1, (run.stdout, run.stderr)
    assert (run.error["code"], run.error["name"]) == (-32066, "session.bad_id")
    assert snapshot_count(till) == count
    assert (till.home / "log" / "publication.log").read_bytes() == log


def test_a_session_id_of_200_characters_is_taken(till: Till, project: Path) -> None:
    name = "é" * 200
    assert commit_of(till, "start", name)["session"] == name


def test_a_description_too_long_is_refused_and_nothing_is_sealed(till: Till, project: Path) -> None:
    count = snapshot_count(till)
    run = till("--json", "session", "start", "s1", "-m", "d" * 4097)
    assert run.code == 1
    assert run.error["code"] == -32066 and run.error["name"] == "session.bad_description"
    assert snapshot_count(till) == count
