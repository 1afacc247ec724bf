"""tillage.agent, as a harness author uses it: tools when they can work, none when they cannot."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import tillage.agent
from tests.conftest import Till
from tillage.agent import seam


def test_an_unattached_folder_gets_no_tools_and_says_which_half_is_missing(
    till: Till, folder: Path
) -> None:
    assert tillage.agent.tools(folder, home=till.home) == []
    assert tillage.agent.open_workspace(folder, home=till.home) is None
    found = tillage.agent.presence(folder, home=till.home)
    assert found.attached is False and found.head is None and found.watching is False
    assert found.reason and "not attached" in found.reason
    assert found.next and "till watch" in found.next


def test_an_attached_folder_gets_its_tools_in_a_fixed_order(till: Till, attached: Path) -> None:
    tools = tillage.agent.tools(attached, home=till.home)
    assert [t.name for t in tools[:4]] == [
        "workspace_snapshots",
        "workspace_restore",
        "workspace_fork",
        "workspace_merge",
    ]
    snapshots = tools[0]
    assert snapshots.schema["properties"]["limit"]["default"] == 20
    result = snapshots.call({"limit": 5})
    assert result.is_error is False
    assert "1 snapshot" in result.text
    bad = snapshots.call({"limit": 1000})
    assert bad.is_error and "at most 100" in bad.text
    assert bad.document["error"]["code"] == -32066


def test_presence_is_cached_for_thirty_seconds_and_forget_clears_it(
    till: Till, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(seam.time, "monotonic", lambda: clock[0])
    assert tillage.agent.presence(folder, home=till.home).attached is False
    till.json("watch", "--no-daemon")
    assert tillage.agent.presence(folder, home=till.home).attached is False, "still cached"
    clock[0] += seam.PRESENCE_TTL + 1
    now = tillage.agent.presence(folder, home=till.home)
    assert now.attached is True and now.head is not None and now.watching is False
    till.json("forget")
    assert tillage.agent.presence(folder, home=till.home).attached is True, "cached"
    tillage.agent.forget()
    assert tillage.agent.presence(folder, home=till.home).attached is False


def test_attach_attaches_without_leaving_a_watcher_running(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    ws = tillage.agent.attach(folder, home=till.home)
    assert ws is not None and ws.root == str(folder)
    status = till.json("status")
    assert status["attached"] is True and status["watching"] is False
    assert status["head"]["trigger"] == "initial"
    assert next(t.name for t in ws.tools()) == "workspace_snapshots"


def test_five_threads_attaching_one_folder_at_once_all_succeed(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    barrier = threading.Barrier(5)
    got: list[object] = []
    errors: list[BaseException] = []

    def attach() -> None:
        try:
            barrier.wait()
            got.append(tillage.agent.attach(folder, home=till.home))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=attach) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(got) == 5 and all(ws is not None for ws in got)
    assert till.json("status")["snapshots"] >= 1
    initial = till.json("timeline", "--trigger", "initial")["snapshots"]
    assert len(initial) == 1, "one folder, one workspace, one first snapshot"


def test_attach_refuses_the_users_home_and_says_why(
    till: Till, user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(user_home))
    ws = tillage.agent.attach(user_home, home=till.home)
    assert ws is None
    found = tillage.agent.presence(user_home, home=till.home)
    assert found.attached is False and found.reason


def test_point_near_joins_a_moment_to_the_restore_point_of_that_moment(
    till: Till, attached: Path
) -> None:
    ws = tillage.agent.open_workspace(attached, home=till.home)
    assert ws is not None
    first = till.json("timeline")["snapshots"][0]
    time.sleep(0.01)
    (attached / "app.py").write_text("two\n")
    second = ws.snap("second")
    sealed_first = datetime.fromisoformat(first["sealed_at"].replace("Z", "+00:00"))
    sealed_second = datetime.fromisoformat(second.sealed_at.replace("Z", "+00:00"))

    assert ws.point_near(sealed_first - timedelta(seconds=1)) is None, "never the oldest"
    exact = ws.point_near(first["sealed_at"])
    assert exact is not None and exact.id == first["id"]
    between = ws.point_near(sealed_first + (sealed_second - sealed_first) / 2)
    assert between is not None and between.id == first["id"]
    later = ws.point_near(datetime.now(UTC) + timedelta(hours=1))
    assert later is not None and later.id == second.id
    assert ws.point_near(sealed_second.timestamp() + 0.000001).id == second.id  # type: ignore[union-attr]
    naive = sealed_second.astimezone().replace(tzinfo=None)  # local time, as Python reads it
    assert ws.point_near(naive).id == second.id  # type: ignore[union-attr]


def test_mark_seals_a_turn_end_restore_point(till: Till, attached: Path) -> None:
    ws = tillage.agent.open_workspace(attached, home=till.home)
    assert ws is not None
    (attached / "app.py").write_text("turn 3\n")
    snapshot = ws.mark("my-agent", 3)
    assert len(snapshot) == 64
    shown = till.json("show", snapshot)["snapshot"]
    assert shown["trigger"] == "hook" and shown["agent"] == "my-agent" and shown["turn"] == "3"
    later = ws.mark("my-agent", 4)
    assert till.json("show", later)["snapshot"]["turn"] == "4", "each turn has its point"


def test_offer_sync_returns_commands_and_runs_nothing(till: Till, attached: Path) -> None:
    ws = tillage.agent.open_workspace(attached, home=till.home)
    assert ws is not None
    remote = str(attached.parent / "remote-dir")
    offer = ws.offer_sync(remote)
    assert not Path(remote).exists(), "nothing was run"
    assert any("remote add" in c and remote in c for c in offer.here_commands)
    assert "till clone" in offer.there and "sync" in offer.here
    # The key travels as a file, never in a command line: both sides name the same one.
    assert f"--key-file {offer.key_file}" in offer.here_commands[0]
    assert f"--key-file {offer.key_file}" in offer.there_commands[0]
    assert "--key " not in str(offer) and not re.search(r"[0-9a-fA-F]{64}", str(offer))
    assert offer.here.splitlines() == list(offer.here_commands)
    assert "key" in offer.note and offer.name == "project"
    with pytest.raises(ValueError):
        ws.offer_sync("  ")


def test_restore_methods_preview_and_apply(till: Till, attached: Path) -> None:
    ws = tillage.agent.open_workspace(attached, home=till.home)
    assert ws is not None
    first = ws.snapshots()[0]
    (attached / ".env").write_text("KEY=wrong\n")
    (attached / "app.py").write_text("keep me\n")
    preview = ws.preview_restore(first.id, [".env"])
    assert preview.applied is False and [c.path for c in preview.changes] == [".env"]
    assert (attached / ".env").read_text() == "KEY=wrong\n"
    done = ws.apply_restore(first.id, [".env"])
    assert done.applied is True and done.undo
    assert (attached / ".env").read_text() == "KEY=one\n"
    assert (attached / "app.py").read_text() == "keep me\n"


def test_fork_run_and_merge_through_the_seam(till: Till, attached: Path) -> None:
    ws = tillage.agent.open_workspace(attached, home=till.home)
    assert ws is not None
    ran = ws.run_in_fork("task", "echo done > result.txt; exit 2")
    assert ran.exit_code == 2 and ran.name == "task"
    assert [f.name for f in ws.forks()] == ["task"]
    merged = ws.merge_fork("task", check="test -f result.txt")
    assert merged.landed is True
    assert (attached / "result.txt").read_text() == "done\n"
    ws.drop_fork("task")
    assert ws.forks() == []
