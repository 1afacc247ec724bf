"""Session changelogs through the seam: a harness records at its own boundaries and hears of
every commit, whoever made it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import tillage.agent
from tests.conftest import Till


def test_a_harness_records_a_session_and_subscribes_to_its_commits(
    till: Till, attached: Path
) -> None:
    ws = tillage.agent.open_workspace(attached, home=till.home)
    assert ws is not None
    stop = threading.Event()
    heard: list[Any] = []
    commits = ws.subscribe("s-1", stop=stop, poll_seconds=0.02)  # from now on

    baseline = ws.create_session_snapshot("s-1", "start", "begin the task")
    assert baseline.is_baseline and baseline.parent is None and baseline.changed_files == 0
    assert ws.create_session_snapshot("s-1", "start", "again").id == baseline.id, "idempotent"
    assert ws.create_session_snapshot("s-1", "tool", "nothing changed").id == baseline.id

    (attached / "app.py").write_text("print('v2')\n")
    edited = ws.create_session_snapshot("s-1", "tool", "edit app.py")
    assert edited.parent == baseline.id and edited.changed_files == 1
    (attached / "notes.txt").write_text("n\n")
    till.json("session", "record", "s-1", "-m", "another process")  # heard too
    (attached / "notes.txt").unlink()
    ended = ws.create_session_snapshot("s-1", "end", "done")

    def listen() -> None:
        for commit in commits:
            heard.append(commit)
            if commit.id == ended.id:
                stop.set()

    listener = threading.Thread(target=listen)
    listener.start()
    listener.join(30)
    stop.set()
    assert not listener.is_alive()
    assert [c.id for c in heard] == [c.id for c in ws.sessions.log("s-1")]
    assert [c.description for c in heard] == [
        "begin the task",
        "edit app.py",
        "another process",
        "done",
    ]
    assert type(heard[0]) is type(baseline), "the same commit value as the calls return"
    assert [s.id for s in ws.sessions.sessions()] == ["s-1"]
    assert [c.path for c in ws.sessions.diff(edited.id)] == ["app.py"]


def test_session_tools_are_offered_to_a_model(till: Till, attached: Path) -> None:
    names = [t.name for t in tillage.agent.tools(attached, home=till.home)]
    for name in ("workspace_session_log", "workspace_session_diff", "workspace_sessions"):
        assert name in names
    log = next(
        t
        for t in tillage.agent.tools(attached, home=till.home)
        if t.name == "workspace_session_log"
    )
    assert log.call({"session": "nobody"}).is_error is False
