"""What the live claims say about each radar conflict (`claim`: unclaimed, covered, contested)
and which claims they are (`claimed_by`, with where each was taken and whether that place is
one of the colliding ones)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tillage.core.radar import Collision, claim_state
from tillage.platform import clock
from tillage.store.store import Store
from tillage.verbs.tool_defs import tool_def
from tillage.verbs.tool_text import render


def make_fork(till: Till, parent: Path, name: str) -> Path:
    return Path(till.json("fork", name, cwd=parent)["fork"]["path"])


@pytest.fixture
def project(till: Till, folder: Path) -> Path:
    (folder / "lib").mkdir()
    (folder / "lib" / "a.py").write_text("a = 1\n")
    (folder / "src").mkdir()
    (folder / "src" / "m.py").write_text("m = 1\n")
    till.json("watch", "--no-daemon")
    return folder


def _edit(till: Till, where: Path, path: str, text: str) -> None:
    (where / path).write_text(text)
    till.json("snap", cwd=where)


def _claim(till: Till, pattern: str, owner: str, where: Path) -> Any:
    return till.json("claim", pattern, "--owner", owner, cwd=where)["claim"]


def _only_conflict(till: Till, where: Path, *extra: str) -> dict[str, Any]:
    (conflict,) = till.json("radar", *extra, cwd=where)["conflicts"]
    return dict(conflict)


def _holders(conflict: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(k["owner"], k["party"]) for k in conflict["claimed_by"]]


def test_a_conflict_no_claim_covers_is_unclaimed(till: Till, project: Path) -> None:
    a = make_fork(till, project, "a")
    _claim(till, "lib/**", "alice", a)  # elsewhere
    _edit(till, a, "src/m.py", "a\n")
    _edit(till, project, "src/m.py", "workspace\n")
    conflict = _only_conflict(till, project)
    assert (conflict["claim"], conflict["claimed_by"]) == ("unclaimed", [])


def test_a_claim_taken_in_a_colliding_fork_covers_the_conflict(till: Till, project: Path) -> None:
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    claim = _claim(till, "src/**", "alice", a)
    _edit(till, a, "src/m.py", "a\n")
    _edit(till, b, "src/m.py", "b\n")
    conflict = _only_conflict(till, project)
    assert conflict["claim"] == "covered"
    (ref,) = conflict["claimed_by"]
    assert (ref["id"], ref["workspace"], ref["workspace_id"], ref["party"]) == (
        claim["id"],
        str(a),
        claim["workspace_id"],
        True,
    )


def test_a_claim_the_colliding_workspace_took_covers_the_conflict(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    _claim(till, "src/m.py", "carol", project)
    _edit(till, a, "src/m.py", "a\n")
    _edit(till, project, "src/m.py", "workspace\n")
    conflict = _only_conflict(till, project)
    assert (conflict["claim"], _holders(conflict)) == ("covered", [("carol", True)])


def test_a_claim_taken_in_a_place_that_is_not_colliding_contests_the_conflict(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    _claim(till, "src/**", "carol", project)  # the workspace said it works there
    _edit(till, a, "src/m.py", "a\n")
    _edit(till, b, "src/m.py", "b\n")
    doc = till.json("radar")
    (conflict,) = doc["conflicts"]
    assert (conflict["claim"], _holders(conflict)) == ("contested", [("carol", False)])
    assert "contested: claimed by carol (src/**)" in till("radar").stdout
    tool = tool_def("workspace_radar")
    assert tool is not None
    assert "(contested: claimed by carol)" in render(tool, None, doc=doc)


def test_claims_of_two_owners_inside_a_removed_folder_contest_it(till: Till, project: Path) -> None:
    """Two owners' claims never overlap, but both may lie inside a folder another place
    removed: the folder's conflict concerns them both."""
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    _claim(till, "lib/a.py", "alice", a)
    _claim(till, "lib/new.py", "bob", b)
    shutil.rmtree(a / "lib")
    till.json("snap", cwd=a)
    _edit(till, b, "lib/new.py", "new\n")
    conflict = _only_conflict(till, project)
    assert conflict["path"] == "lib"
    assert (conflict["claim"], _holders(conflict)) == (
        "contested",
        [("alice", True), ("bob", True)],
    )


def test_one_owners_claims_in_both_colliding_places_cover_the_conflict(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    b = make_fork(till, project, "b")
    _claim(till, "lib/a.py", "alice", a)
    _claim(till, "lib/new.py", "alice", b)
    shutil.rmtree(a / "lib")
    till.json("snap", cwd=a)
    _edit(till, b, "lib/new.py", "new\n")
    conflict = _only_conflict(till, project)
    assert (conflict["claim"], _holders(conflict)) == (
        "covered",
        [("alice", True), ("alice", True)],
    )


def test_a_claim_taken_above_the_workspace_scanned_is_no_party_to_its_conflicts(
    till: Till, project: Path
) -> None:
    """Seen from fork a, the workspace above it is no place of the look; the whole family's
    look (--family) names it."""
    a = make_fork(till, project, "a")
    inner = make_fork(till, a, "inner")
    _claim(till, "src/**", "carol", project)
    _edit(till, inner, "src/m.py", "inner\n")
    _edit(till, a, "src/m.py", "a\n")
    from_a = _only_conflict(till, a)
    assert (from_a["forks"], from_a["workspace"]) == (["inner"], True)
    assert (from_a["claim"], _holders(from_a)) == ("contested", [("carol", False)])
    family = _only_conflict(till, a, "--family")
    assert (family["forks"], family["workspace"]) == (["a", "a/inner"], False)
    assert family["claim"] == "contested"


def test_a_claim_whose_record_does_not_say_where_it_was_taken_contests(
    till: Till, project: Path
) -> None:
    a = make_fork(till, project, "a")
    store = Store.open(till.home)
    try:
        store.publish(
            "claim",
            {
                "id": "00112233445566aa",
                "family": till.json("status")["id"],
                "pattern": "src/**",
                "owner": "old-agent",
                "expires_ns": clock.now_ns() + 600 * 10**9,
            },
        )
    finally:
        store.close()
    _edit(till, a, "src/m.py", "a\n")
    _edit(till, project, "src/m.py", "workspace\n")
    conflict = _only_conflict(till, project)
    assert conflict["claim"] == "contested"
    (ref,) = conflict["claimed_by"]
    assert (ref["workspace"], ref["workspace_id"], ref["party"]) == (None, None, False)


def test_claim_state_reads_owners_and_places() -> None:
    between = Collision("lib", ("a", "b"), False)
    with_workspace = Collision("lib", ("a",), True)
    assert claim_state(between, []) == "unclaimed"
    assert claim_state(between, [("alice", "a"), ("alice", "b")]) == "covered"
    assert claim_state(between, [("alice", "a"), ("bob", "b")]) == "contested"
    assert claim_state(between, [("alice", "")]) == "contested"
    assert claim_state(between, [("alice", "a/c")]) == "contested"
    assert claim_state(between, [("alice", None)]) == "contested"
    assert claim_state(with_workspace, [("alice", "")]) == "covered"
