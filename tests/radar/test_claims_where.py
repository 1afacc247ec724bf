"""Which workspace took a claim, and a removed fork's claims (issue 21, item 14): every claim
object names the folder and the workspace ID that took it, a claim recorded without them is
still read, and removing a fork releases the claims taken in it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.radar.test_radar import make_fork
from tillage.platform import clock
from tillage.store.store import Store


@pytest.fixture
def project(till: Till, folder: Path) -> Path:
    (folder / "src").mkdir()
    (folder / "src" / "a.py").write_text("a\n")
    (folder / "README.md").write_text("# demo\n")
    till.json("watch", "--no-daemon")
    return folder


def _claim(till: Till, pattern: str, owner: str, cwd: Path) -> Any:
    return till.json("claim", pattern, "--owner", owner, cwd=cwd)["claim"]


def _where(till: Till, cwd: Path) -> tuple[str, str]:
    status = till.json("status", cwd=cwd)
    return status["workspace"], status["id"]


def test_a_claim_names_the_folder_and_the_workspace_that_took_it(till: Till, project: Path) -> None:
    alpha = make_fork(till, project, "alpha")
    here = _claim(till, "README.md", "alice", project)
    there = _claim(till, "src/**", "bob", alpha)
    assert (here["workspace"], here["workspace_id"]) == _where(till, project)
    assert (there["workspace"], there["workspace_id"]) == _where(till, alpha)
    listed = till.json("claims", cwd=project)["claims"]
    assert [(c["id"], c["workspace"], c["workspace_id"]) for c in listed] == [
        (here["id"], *_where(till, project)),
        (there["id"], *_where(till, alpha)),
    ]
    released = till.json("release", there["id"], "--owner", "bob", cwd=project)["released"]
    assert released["workspace"] == str(alpha)
    page = till("claims", cwd=alpha)
    assert page.code == 0 and str(project) in page.stdout


def test_a_claim_recorded_without_its_workspace_is_still_listed(till: Till, project: Path) -> None:
    family = till.json("status")["id"]
    store = Store.open(till.home)
    try:
        store.publish(
            "claim",
            {
                "id": "00112233445566aa",
                "family": family,
                "pattern": "docs/**",
                "owner": "old-agent",
                "expires_ns": clock.now_ns() + 600 * 10**9,
            },
        )
    finally:
        store.close()
    (claim,) = till.json("claims")["claims"]
    assert (claim["id"], claim["owner"]) == ("00112233445566aa", "old-agent")
    assert (claim["workspace"], claim["workspace_id"]) == (None, None)
    assert "old-agent" in till("claims").stdout
    assert (
        till.json("release", "00112233445566aa", "--owner", "old-agent")["released"]["workspace"]
        is None
    )


def test_an_index_built_before_claims_kept_their_workspace_is_rebuilt_with_it(
    till: Till, project: Path
) -> None:
    claim = _claim(till, "src/**", "alice", project)
    old = sqlite3.connect(till.home / "index.sqlite")
    old.executescript(
        # Schema 6's claims table: no workspace column.
        "DROP TABLE claims;"
        "CREATE TABLE claims(id TEXT PRIMARY KEY, family TEXT NOT NULL, pattern TEXT NOT NULL,"
        " owner TEXT NOT NULL, expires_ns INT, claimed_ns INT NOT NULL);"
        "UPDATE meta SET value='6' WHERE key='schema';"
    )
    old.close()
    (listed,) = till.json("claims")["claims"]
    assert (listed["id"], listed["workspace"]) == (claim["id"], str(project))


# -- a removed fork's claims go with it ------------------------------------------------------


def _released_events(till: Till) -> list[dict[str, Any]]:
    run = till("--json", "events")
    assert run.code == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    return [e for e in events if e["kind"] == "released"]


def test_removing_a_fork_releases_the_claims_taken_in_it_and_no_others(
    till: Till, project: Path
) -> None:
    alpha = make_fork(till, project, "alpha")
    beta = make_fork(till, project, "beta")
    mine = [_claim(till, "src/**", "alice", alpha), _claim(till, "docs/**", "bob", alpha)]
    kept = [_claim(till, "README.md", "carol", project), _claim(till, "lib/**", "dan", beta)]
    done = till.json("fork-rm", "alpha", "--yes")
    assert done["claims_released"] == [c["id"] for c in mine]
    assert [c["id"] for c in till.json("claims")["claims"]] == [c["id"] for c in kept]
    events = _released_events(till)
    assert [(e["detail"]["id"], e["detail"]["pattern"], e["detail"]["owner"]) for e in events] == [
        (c["id"], c["pattern"], c["owner"]) for c in mine
    ]
    # What alice held is free for anyone now.
    assert till.json("claim", "src/a.py", "--owner", "erin")["claim"]["owner"] == "erin"


def test_a_fork_retired_with_its_files_kept_releases_its_claims_and_a_dry_run_does_not(
    till: Till, project: Path
) -> None:
    alpha = make_fork(till, project, "alpha")
    claim = _claim(till, "src/**", "alice", alpha)
    preview = till.json("fork-rm", "alpha", "--dry-run")
    assert preview["claims_released"] == []
    assert [c["id"] for c in till.json("claims")["claims"]] == [claim["id"]]
    retired = till.json("fork-rm", "alpha", "--keep-files")
    assert retired["claims_released"] == [claim["id"]]
    assert till.json("claims")["claims"] == []


def test_the_human_page_of_fork_rm_says_how_many_claims_went(till: Till, project: Path) -> None:
    alpha = make_fork(till, project, "alpha")
    _claim(till, "src/**", "alice", alpha)
    run = till("fork-rm", "alpha", "--yes")
    assert run.code == 0 and "Released 1 claim taken in it." in run.stdout


def test_a_claim_of_a_fork_removed_without_its_release_is_no_longer_live(
    till: Till, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A removal killed between its record and the releases (or one by an earlier build,
    which released nothing) leaves the claim recorded: it is not live, and blocks no one."""
    from tillage.features.radar import claims

    alpha = make_fork(till, project, "alpha")
    _claim(till, "src/**", "alice", alpha)

    def killed(*_args: object, **_kwargs: object) -> list[Any]:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(claims, "release_taken_in", killed)
        assert till("--json", "fork-rm", "alpha", "--yes").code == 130
    assert till.json("forks")["forks"] == []
    assert till.json("claims")["claims"] == []
    assert till.json("claim", "src/**", "--owner", "bob")["claim"]["owner"] == "bob"
    assert _released_events(till) == []
