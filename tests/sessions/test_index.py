"""Session facts in the advisory index: an index of the schema before sessions is made anew
from the log, sessions included."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import Till
from tests.sessions.conftest import commit_of
from tillage.store.store import Store


def test_an_index_of_the_schema_before_sessions_is_rebuilt_with_them(
    till: Till, project: Path
) -> None:
    commit = commit_of(till, "start", "s1")
    old = sqlite3.connect(till.home / "index.sqlite")
    old.executescript(
        "DROP TABLE session_commits; DROP TABLE sessions;"
        "UPDATE meta SET value='3' WHERE key='schema';"
    )
    old.close()
    store = Store.open(till.home)
    try:
        found = store.session_commit(commit["id"])
        assert found is not None and found.session == "s1" and found.baseline
        assert [s.id for s in store.sessions(found.workspace)] == ["s1"]
    finally:
        store.close()
    assert till.json("session", "log", "s1")["commits"] == [commit]


def test_forget_purge_drops_the_workspaces_sessions(till: Till, project: Path) -> None:
    commit = commit_of(till, "start", "s1")
    store = Store.open(till.home)
    try:
        workspace = store.session_commit(commit["id"]).workspace  # type: ignore[union-attr]
    finally:
        store.close()
    till.json("forget", "--purge", "--yes")
    store = Store.open(till.home)
    try:
        assert store.session_commit(commit["id"]) is None
        assert store.sessions(workspace) == []
    finally:
        store.close()


def test_a_commit_applied_by_another_reader_first_is_counted_once(
    till: Till, project: Path
) -> None:
    """A reader's catch_up may apply a record between its append and the writer's own apply
    (it reads the log without the publish lock): the session's count moves once."""
    from tillage.features.sessions.sessions import create_session_snapshot
    from tillage.platform import failpoints
    from tillage.workspace.attach import find_workspace

    ws = find_workspace(till.home, project)
    assert ws is not None
    reader = Store.open(till.home)
    try:
        with failpoints.armed("publish.after_log", reader.catch_up):
            commit = create_session_snapshot(ws, "s1", "start", None)
        assert reader.session_commit(commit.id) is not None  # the reader applied it first
        for store in (ws.store, reader):
            found = store.session(ws.id, "s1")
            assert found is not None and found.commits == 1
    finally:
        reader.close()
        ws.store.close()
    assert till.json("sessions")["sessions"][0]["commits"] == 1
