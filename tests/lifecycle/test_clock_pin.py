"""TILLAGE_NOW pins the clock for seals (and so for retention and gc), as GIT_COMMITTER_DATE
does for git, through every door: the process itself and a call the watcher serves."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Till


def test_seals_take_the_pinned_time(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a")
    doc = till.json("watch", "--no-daemon", env={"TILLAGE_NOW": "2026-01-01T00:00:00Z"})
    assert doc["head"]["sealed_at"] == "2026-01-01T00:00:00.000000Z"
    (folder / "b.txt").write_text("b")
    doc = till.json("snap", env={"TILLAGE_NOW": "1767229200"})  # epoch seconds: one hour on
    assert doc["snapshot"]["sealed_at"] == "2026-01-01T01:00:00.000000Z"
    events = till.json("timeline")["snapshots"]
    assert [s["sealed_at"][:19] for s in events] == ["2026-01-01T01:00:00", "2026-01-01T00:00:00"]


def test_a_time_that_is_no_time_is_refused_and_seals_nothing(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a")
    till.json("watch", "--no-daemon")
    (folder / "a.txt").write_text("changed")
    run = till("--json", "snap", env={"TILLAGE_NOW": "yesterday-ish"})
    assert run.code == 1
    assert run.error["name"] == "invalid_argument"
    assert "TILLAGE_NOW" in run.error["message"]
    assert len(till.json("timeline")["snapshots"]) == 1


def test_a_call_the_watcher_serves_takes_the_callers_time(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a")
    doc = till.json("watch")
    assert doc["watching"] is True
    try:
        (folder / "b.txt").write_text("b")
        snap = till.json("snap", env={"TILLAGE_NOW": "2030-06-01T12:00:00Z"})
        assert snap["snapshot"]["sealed_at"] == "2030-06-01T12:00:00.000000Z"
        (folder / "c.txt").write_text("c")
        later = till.json("snap")  # the next served call is not pinned any more
        assert not later["snapshot"]["sealed_at"].startswith("2030")
    finally:
        till("watch", "--stop")
