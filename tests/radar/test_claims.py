"""Claims through the real `till` process: take, list, release, expiry, overlap, forks, races."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.radar.test_radar import make_fork


@pytest.fixture
def project(till: Till, folder: Path) -> Path:
    (folder / "src").mkdir()
    (folder / "src" / "a.py").write_text("a\n")
    (folder / "README.md").write_text("# demo\n")
    till.json("watch", "--no-daemon")
    return folder


def _claim(till: Till, pattern: str, owner: str, *extra: str, cwd: Path | None = None) -> Any:
    return till.json("claim", pattern, "--owner", owner, *extra, cwd=cwd)["claim"]


def _live(till: Till, cwd: Path | None = None) -> list[dict[str, Any]]:
    claims: list[dict[str, Any]] = till.json("claims", cwd=cwd)["claims"]
    return claims


def test_a_claim_answers_its_fields_and_is_listed(till: Till, project: Path) -> None:
    before = datetime.now(UTC)
    claim = _claim(till, "src/**", "alice", "--ttl-seconds", "600")
    assert set(claim) >= {"id", "pattern", "owner", "expires_at"}
    assert (claim["pattern"], claim["owner"]) == ("src/**", "alice")
    expires = datetime.fromisoformat(claim["expires_at"].replace("Z", "+00:00"))
    assert 590 <= (expires - before).total_seconds() <= 660
    assert [c["id"] for c in _live(till)] == [claim["id"]]


def test_the_default_claim_lives_an_hour(till: Till, project: Path) -> None:
    claim = _claim(till, "README.md", "alice")
    expires = datetime.fromisoformat(claim["expires_at"].replace("Z", "+00:00"))
    assert 3500 <= (expires - datetime.now(UTC)).total_seconds() <= 3600


def test_an_overlapping_claim_of_another_owner_is_refused_naming_the_holder(
    till: Till, project: Path
) -> None:
    held = _claim(till, "src/**", "alice")
    run = till("--json", "claim", "src/a/*.py", "--owner", "bob")
    assert run.code == 1
    error = run.error
    assert (error["code"], error["name"]) == (-32062, "claim.held")
    assert "alice" in error["message"] and "src/**" in error["message"]
    assert error["details"]["holder"] == "alice"
    assert error["details"]["claim"] == held["id"]
    assert error["details"]["pattern"] == "src/**"
    assert error["details"]["expires_at"] == held["expires_at"]
    assert [c["owner"] for c in _live(till)] == ["alice"]  # nothing was claimed

    human = till("claim", "src/a.py", "--owner", "bob")
    assert human.code == 1 and "alice" in human.stderr


def test_globs_that_cannot_cover_one_path_do_not_collide(till: Till, project: Path) -> None:
    _claim(till, "*.md", "alice")
    _claim(till, "docs/x.md", "bob")
    _claim(till, "src/*.py", "carol")
    run = till("--json", "claim", "src/a.py", "--owner", "dave")
    assert run.error["details"]["holder"] == "carol"
    assert sorted(c["owner"] for c in _live(till)) == ["alice", "bob", "carol"]


def test_the_same_owner_may_overlap_itself_and_renews_a_pattern_it_holds(
    till: Till, project: Path
) -> None:
    first = _claim(till, "src/**", "alice", "--ttl-seconds", "60")
    inner = _claim(till, "src/a.py", "alice")
    assert inner["id"] != first["id"]
    doc = till.json("claim", "src/**", "--owner", "alice", "--ttl-seconds", "600")
    assert doc["renewed"] is True
    assert doc["claim"]["id"] == first["id"]
    assert doc["claim"]["expires_at"] > first["expires_at"]
    assert len(_live(till)) == 2


def test_release_by_its_owner_by_another_and_of_an_unknown_claim(till: Till, project: Path) -> None:
    claim = _claim(till, "src/**", "alice")
    other = till("--json", "release", claim["id"], "--owner", "bob")
    assert other.code == 1
    assert (other.error["code"], other.error["name"]) == (-32062, "claim.not_owner")
    assert "alice" in other.error["message"]
    assert other.error["details"]["holder"] == "alice"

    released = till.json("release", claim["id"][:8], "--owner", "alice")["released"]
    assert released["id"] == claim["id"] and released["pattern"] == "src/**"
    assert _live(till) == []
    again = till("--json", "release", claim["id"], "--owner", "alice")
    assert (again.error["code"], again.error["name"]) == (-32061, "claim.not_found")
    unknown = till("--json", "release", "0123456789abcdef", "--owner", "alice")
    assert unknown.error["code"] == -32061
    _claim(till, "src/a.py", "bob")  # free again


def test_an_expired_claim_vanishes_and_frees_its_paths(till: Till, project: Path) -> None:
    claim = _claim(till, "src/**", "alice", "--ttl-seconds", "1")
    deadline = time.monotonic() + 30
    while _live(till) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _live(till) == []
    run = till("--json", "release", claim["id"], "--owner", "alice")
    assert run.error["name"] == "claim.not_found"
    assert _claim(till, "src/a.py", "bob")["owner"] == "bob"


@pytest.mark.parametrize(
    "pattern", ["/etc/passwd", "../outside", "src/../../x", "src/[ab", "", "./"]
)
def test_a_pattern_outside_the_workspace_or_malformed_is_invalid(
    till: Till, project: Path, pattern: str
) -> None:
    run = till("--json", "claim", pattern, "--owner", "alice")
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32066, "claim.bad_pattern")
    assert _live(till) == []


@pytest.mark.parametrize("ttl", ["0", "-5", "2592001"])
def test_a_ttl_out_of_range_is_invalid(till: Till, project: Path, ttl: str) -> None:
    run = till("--json", "claim", "src", "--owner", "alice", "--ttl-seconds", ttl)
    assert (run.code, run.error["code"], run.error["name"]) == (1, -32066, "claim.bad_ttl")


def test_an_empty_owner_is_invalid(till: Till, project: Path) -> None:
    run = till("--json", "claim", "src", "--owner", " ")
    assert (run.error["code"], run.error["name"]) == (-32066, "claim.bad_owner")


def test_claims_are_shared_by_a_workspace_and_its_forks(till: Till, project: Path) -> None:
    alpha = make_fork(till, project, "alpha")
    inner = make_fork(till, alpha, "inner")
    in_fork = _claim(till, "src/**", "alice", cwd=alpha)
    assert [c["id"] for c in _live(till, project)] == [in_fork["id"]]
    assert [c["id"] for c in _live(till, inner)] == [in_fork["id"]]
    run = till("--json", "claim", "src/a.py", "--owner", "bob", cwd=project)
    assert run.error["details"]["holder"] == "alice"
    _claim(till, "README.md", "bob", cwd=project)
    run = till("--json", "claim", "*.md", "--owner", "carol", cwd=inner)
    assert run.error["details"]["holder"] == "bob"
    till.json("release", in_fork["id"], "--owner", "alice", cwd=inner)
    assert [c["owner"] for c in _live(till, alpha)] == ["bob"]


@pytest.mark.process
def test_of_processes_claiming_overlapping_globs_at_once_exactly_one_wins(
    till: Till, project: Path
) -> None:
    patterns = ["src/**", "src/a.py", "src/*.py", "**/a.py", "src", "s*/a.?y"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "claim", p, "--owner", f"agent{i}"],
            cwd=project,
            env=till.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, p in enumerate(patterns)
    ]
    results = []
    for proc in procs:
        out, _err = proc.communicate(timeout=120)
        results.append((proc.returncode, json.loads(out)))
    winners = [doc for code, doc in results if code == 0]
    assert len(winners) == 1, results
    losers = [doc["error"] for code, doc in results if code != 0]
    assert {e["name"] for e in losers} == {"claim.held"}
    assert {e["details"]["holder"] for e in losers} == {winners[0]["claim"]["owner"]}
    assert [c["id"] for c in _live(till)] == [winners[0]["claim"]["id"]]


def test_claimed_and_released_are_events(till: Till, project: Path) -> None:
    claim = _claim(till, "src/**", "alice")
    till.json("release", claim["id"], "--owner", "alice")
    run = till("--json", "events")
    kinds = [json.loads(line) for line in run.stdout.splitlines()]
    mine = [e for e in kinds if e["kind"] in ("claimed", "released")]
    assert [e["kind"] for e in mine] == ["claimed", "released"]
    assert mine[0]["detail"]["pattern"] == "src/**" and mine[0]["detail"]["owner"] == "alice"


def test_the_human_pages_of_claim_claims_and_release(till: Till, project: Path) -> None:
    run = till("claim", "src/**", "--owner", "alice smith")
    assert run.code == 0
    claim_id = _live(till)[0]["id"]
    assert f"till release {claim_id} --owner 'alice smith'" in run.stdout
    listing = till("claims")
    assert claim_id in listing.stdout and "alice smith" in listing.stdout
    done = till("release", claim_id, "--owner", "alice smith")
    assert done.code == 0 and "Released" in done.stdout
    assert "No live claims" in till("claims").stdout
