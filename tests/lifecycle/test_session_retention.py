"""(issue 26) Snapshots that session commits name follow the retention schedule too: with hooks
every turn commits, and a day of turns sixty days old is thinned like any other day, keeping
each session's ends (the snapshots of its first and its newest commit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Till
from tests.lifecycle.test_gc import DAY, T0, at, timeline

MINUTE = 60
HOUR_OF_DAY = 3600  # the turns begin an hour into the day of the first seal


def turn(till: Till, session: str, when: int) -> dict[str, Any]:
    """A turn's end as an agent's hook reports it: a seal and a commit in `session`."""
    doc: dict[str, Any] = till.json("hook", "turn-end", "--session", session, env=at(when))
    return doc


def test_a_day_of_session_turns_is_thinned_but_each_session_keeps_its_ends(
    till: Till, folder: Path
) -> None:
    (folder / "work.py").write_text("start\n")
    till.json("watch", "--no-daemon", env=at(T0))
    commits: dict[str, list[dict[str, Any]]] = {"s-one": [], "s-two": []}
    for n in range(40):  # one day, two sessions taking turns, every turn changing the folder
        session = "s-one" if n % 2 == 0 else "s-two"
        (folder / "work.py").write_text(f"turn {n}\n")
        doc = turn(till, session, T0 + HOUR_OF_DAY + n * 10 * MINUTE)
        commits[session].append(doc)
    assert len(timeline(till)) == 41
    ends = {docs[i]["snapshot"]["id"] for docs in commits.values() for i in (0, -1)}

    till.json("gc", "--yes", env=at(T0 + 60 * DAY))

    # The day keeps its newest (the last turn: the head), the sessions their ends.
    assert {s["id"] for s in timeline(till)} == ends
    # Every commit's record stays; a thinned one's snapshot answers not_found, naming it.
    log = till.json("session", "log", "s-one")["commits"]
    assert [c["id"] for c in log] == [d["session_commit"] for d in commits["s-one"]]
    gone = commits["s-one"][5]["session_commit"]
    run = till("--json", "session", "diff", gone)
    assert run.code == 1 and run.error["code"] == -32061, run
    # A session's ends still diff and revert.
    first, last = commits["s-two"][0]["session_commit"], commits["s-two"][-1]["session_commit"]
    assert till.json("session", "diff", first, "--to", last)["changes"]
    till.json("session", "revert", first, "--yes", env=at(T0 + 60 * DAY))
    assert (folder / "work.py").read_text() == "turn 1\n"
