"""Conflict events appear as universes change, without anyone running `till radar`: a seal in a
fork or the workspace, a fork removed, each make the family's radar look again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Till


def _conflicts(till: Till) -> list[dict[str, Any]]:
    run = till("--json", "events")
    assert run.code == 0, run.stderr
    docs = [json.loads(line) for line in run.stdout.splitlines() if line]
    return [d["detail"] for d in docs if d["kind"] == "conflict"]


def test_a_seal_in_a_fork_opens_a_collision_and_removing_the_fork_resolves_it(
    till: Till, project: Path
) -> None:
    a = Path(till.json("fork", "a")["fork"]["path"])
    b = Path(till.json("fork", "b")["fork"]["path"])
    (a / "README.md").write_text("a's version\n")
    till.json("snap", cwd=a)
    assert _conflicts(till) == []  # one place changed it: no collision yet
    (b / "README.md").write_text("b's version\n")
    till.json("snap", cwd=b)
    opened = _conflicts(till)
    assert [(c["path"], c["state"], sorted(c["forks"])) for c in opened] == [
        ("README.md", "opened", ["a", "b"])
    ]
    till.json("fork-rm", "b", "--yes")
    states = [(c["path"], c["state"]) for c in _conflicts(till)]
    assert states == [("README.md", "opened"), ("README.md", "resolved")]


def test_a_rewind_in_a_fork_that_undoes_the_colliding_change_resolves_it(
    till: Till, project: Path
) -> None:
    a = Path(till.json("fork", "a")["fork"]["path"])
    first = till.json("status", cwd=a)["head"]["id"]
    (a / "README.md").write_text("a's version\n")
    till.json("snap", cwd=a)
    (project / "README.md").write_text("the workspace's version\n")
    till.json("snap")
    opened = _conflicts(till)
    assert [(c["path"], c["state"], c["workspace"]) for c in opened] == [
        ("README.md", "opened", True)
    ]
    till.json("rewind", first, "--yes", cwd=a)
    # The radar reads sealed states: the rewound folder counts once it is sealed (the
    # fork's watcher would seal it on its own).
    till.json("snap", cwd=a)
    assert [c["state"] for c in _conflicts(till)] == ["opened", "resolved"]
