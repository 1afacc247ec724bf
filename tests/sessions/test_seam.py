"""The harness seam (features/sessions/sessions.py): create_session_snapshot, session_log and a
subscription that yields each new commit as it is created, by this process or another."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till
from tillage.features.sessions.errors import BadSessionIdError
from tillage.features.sessions.sessions import create_session_snapshot, follow_commits, session_log
from tillage.store.rows import SessionCommitRow
from tillage.workspace.attach import Workspace, find_workspace


@pytest.fixture
def ws(till: Till, project: Path) -> Iterator[Workspace]:
    found = find_workspace(till.home, project)
    assert found is not None
    yield found
    found.store.close()


def test_start_begins_a_chain_end_ends_it_and_anything_else_records(
    ws: Workspace, project: Path, till: Till
) -> None:
    base = create_session_snapshot(ws, "h1", "start", "begin", agent="harness")
    assert isinstance(base, SessionCommitRow) and base.baseline and base.agent == "harness"
    assert create_session_snapshot(ws, "h1", "start", "again") == base
    (project / "a.txt").write_text("a")
    step = create_session_snapshot(ws, "h1", "checkpoint", "a step")
    assert (step.parent, step.changed_files, step.changed_total_size) == (base.id, 1, 1)
    assert create_session_snapshot(ws, "h1", "tool", None) == step  # nothing changed
    (project / "b.txt").write_text("bb")
    last = create_session_snapshot(ws, "h1", "end", "done")
    assert [c.id for c in session_log(ws, "h1")] == [base.id, step.id, last.id]
    assert till.json("sessions")["sessions"][0]["ended"] is True
    with pytest.raises(BadSessionIdError):
        create_session_snapshot(ws, "", "start", None)


def test_follow_yields_each_new_commit_made_by_another_process(
    ws: Workspace, project: Path, till: Till
) -> None:
    till.json("session", "start", "before")  # made before following: not yielded
    stop = threading.Event()
    stream = follow_commits(ws, session="s1", stop=stop, poll_seconds=0.02)
    got: queue.Queue[SessionCommitRow | None] = queue.Queue()

    def run() -> None:
        for commit in stream:
            got.put(commit)
        got.put(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        first = till.json("session", "start", "s1")["commit"]
        till.json("session", "start", "other")  # another session: filtered out
        (project / "n.txt").write_text("n")
        second = till.json("session", "record", "s1", "-m", "n")["commit"]
        seen = [got.get(timeout=10), got.get(timeout=10)]
        assert [c.id for c in seen if c is not None] == [first["id"], second["id"]]
        assert seen[1] is not None and seen[1].changed_files == 1 and seen[1].seq > 0
    finally:
        stop.set()
    assert got.get(timeout=10) is None  # stop ends the stream
    thread.join(10)


def test_follow_after_a_seq_replays_the_commits_since(
    ws: Workspace, project: Path, till: Till
) -> None:
    first = create_session_snapshot(ws, "s1", "start", None)
    (project / "m.txt").write_text("m")
    second = create_session_snapshot(ws, "s1", "record", "m")
    stop = threading.Event()
    stream = follow_commits(ws, after_seq=first.seq, stop=stop, poll_seconds=0.02)
    assert next(stream).id == second.id
    stop.set()
    assert list(stream) == []
