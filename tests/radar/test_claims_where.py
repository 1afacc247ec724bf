"""Which workspace took a claim (issue 21, item 14): every claim object names the folder and
the workspace ID that took it, and a claim recorded without them is still read."""

from __future__ import annotations

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
