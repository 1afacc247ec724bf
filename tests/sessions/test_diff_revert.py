"""`till session diff` and `till session revert` through the real process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.helpers import manifest
from tests.sessions.conftest import commit_of, log_of, snapshot_count
from tillage.store.store import Store


@pytest.fixture
def chain(till: Till, project: Path) -> dict[str, Any]:
    """A session of three commits: the baseline, an edit, and a file added then one deleted;
    with the folder's exact state at each."""
    states = {}
    base = commit_of(till, "start", "s1")
    states[base["id"]] = manifest(project)
    (project / "README.md").write_text("# demo\n\nmore words\n")  # 7 -> 19 bytes
    (project / "notes.txt").write_bytes(b"n" * 2048)
    edit = commit_of(till, "record", "s1", "-m", "edit and add")
    states[edit["id"]] = manifest(project)
    (project / "src" / "app.py").unlink()
    last = commit_of(till, "record", "s1", "-m", "remove app")
    states[last["id"]] = manifest(project)
    return {"base": base, "edit": edit, "last": last, "states": states}


def _changes(till: Till, *args: str) -> list[tuple[str, str, Any, Any]]:
    doc = till.json("session", "diff", *args)
    return [(c["path"], c["kind"], c["old_size"], c["new_size"]) for c in doc["changes"]]


def test_diff_lists_what_a_commit_changed_from_its_parent(
    till: Till, chain: dict[str, Any]
) -> None:
    doc = till.json("session", "diff", chain["edit"]["id"])
    assert doc["from_commit"]["id"] == chain["base"]["id"]
    assert doc["to_commit"]["id"] == chain["edit"]["id"]
    assert _changes(till, chain["edit"]["id"]) == [
        ("README.md", "modified", 7, 19),
        ("notes.txt", "added", None, 2048),
    ]
    assert _changes(till, chain["last"]["id"]) == [("src/app.py", "deleted", 12, None)]


def test_diff_equals_till_diff_of_the_two_snapshots(till: Till, chain: dict[str, Any]) -> None:
    ours = till.json("session", "diff", chain["base"]["id"], "--to", chain["last"]["id"])
    theirs = till.json("diff", chain["base"]["snapshot"], "--to", chain["last"]["snapshot"])
    assert ours["changes"] == theirs["changes"]
    assert ours["from_commit"]["id"] == chain["base"]["id"]
    assert ours["to_commit"]["id"] == chain["last"]["id"]


def test_a_baseline_changed_nothing(till: Till, chain: dict[str, Any]) -> None:
    doc = till.json("session", "diff", chain["base"]["id"])
    assert doc["changes"] == [] and doc["from_commit"] is None


def test_a_commit_is_named_by_a_unique_prefix(till: Till, chain: dict[str, Any]) -> None:
    short = chain["edit"]["id"][:6]
    assert till.json("session", "diff", short.upper())["to_commit"]["id"] == chain["edit"]["id"]


@pytest.mark.parametrize(
    ("ref", "code", "name"),
    [
        ("000000", -32061, "session.commit_not_found"),
        ("abc12", -32066, "session.bad_commit_id"),
        ("not-hex-at-all", -32066, "session.bad_commit_id"),
    ],
)
def test_a_bad_or_unknown_commit_is_answered_as_such(
    till: Till, chain: dict[str, Any], ref: str, code: int, name: str
) -> None:
    for args in (("diff", ref), ("diff", chain["base"]["id"], "--to", ref), ("revert", ref)):
        run = till("--json", "session", *args)
        assert run.code == 1
        assert (run.error["code"], run.error["name"]) == (code, name), args


def test_an_ambiguous_prefix_is_refused(till: Till, chain: dict[str, Any]) -> None:
    """Two commits whose IDs share six characters are made directly in the log (IDs are
    hashes: a real collision would take thousands of commits); the index takes them as any."""
    store = Store.open(till.home)
    try:
        base = chain["base"]
        fields = {k: base[k] for k in ("session", "snapshot", "description")}
        workspace = store.snapshot(base["snapshot"]).workspace  # type: ignore[union-attr]
        for suffix in ("0", "1"):
            store.publish(
                "session_commit",
                {
                    **fields,
                    "id": "abcdef" + suffix * 58,
                    "workspace": workspace,
                    "session": "crafted",
                    "parent": None,
                    "created_ns": 1,
                    "file_count": 0,
                    "total_size": 0,
                    "changed_files": 0,
                    "changed_total_size": 0,
                    "baseline": True,
                    "agent": None,
                },
            )
    finally:
        store.close()
    run = till("--json", "session", "diff", "abcdef")
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32063, "session.commit_ambiguous")
    assert till.json("session", "diff", "abcdef1")["to_commit"]["id"] == "abcdef" + "1" * 58


def test_revert_without_yes_changes_nothing(
    till: Till, project: Path, chain: dict[str, Any]
) -> None:
    before = manifest(project)
    count = snapshot_count(till)
    run = till("--json", "session", "revert", chain["base"]["id"])
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32064, "confirmation_required")
    assert manifest(project) == before
    assert snapshot_count(till) == count
    assert len(log_of(till, "s1")) == 3


def test_revert_dry_run_previews_and_changes_nothing(
    till: Till, project: Path, chain: dict[str, Any]
) -> None:
    before = manifest(project)
    doc = till.json("session", "revert", chain["base"]["id"], "--dry-run")
    assert doc["applied"] is False and doc["commit"] is None and doc["undo"] is None
    assert doc["restored"] == chain["base"]["snapshot"]
    assert {(c["path"], c["kind"]) for c in doc["changes"]} == {
        ("README.md", "modified"),
        ("notes.txt", "deleted"),
        ("src/app.py", "added"),
    }
    assert doc["next"] == f"till session revert {chain['base']['id']} --yes"
    assert manifest(project) == before
    assert len(log_of(till, "s1")) == 3


def test_revert_records_a_backup_then_restores_the_folder_byte_exact(
    till: Till, project: Path, chain: dict[str, Any]
) -> None:
    (project / "scratch.txt").write_text("unrecorded work\n")
    present = manifest(project)
    doc = till.json("session", "revert", chain["edit"]["id"], "--yes")
    assert doc["applied"] is True
    assert doc["restored"] == chain["edit"]["snapshot"]
    assert doc["reverted_to"]["id"] == chain["edit"]["id"]
    backup = doc["commit"]
    assert backup["parent"] == chain["last"]["id"]  # recorded first, at the end of the chain
    assert backup["description"] == f"backup before revert to {chain['edit']['id'][:12]}"
    assert backup["changed_files"] == 1  # scratch.txt
    assert [c["id"] for c in log_of(till, "s1")][-1] == backup["id"]
    assert manifest(project) == chain["states"][chain["edit"]["id"]]
    # The revert is undone like any rewind: the present before it comes back exactly.
    assert doc["next"] == f"till rewind {doc['undo']} --yes"
    till.json("rewind", doc["undo"], "--yes")
    assert manifest(project) == present


def test_a_revert_can_be_reverted_through_its_backup(
    till: Till, project: Path, chain: dict[str, Any]
) -> None:
    present = manifest(project)
    backup = till.json("session", "revert", chain["base"]["id"], "--yes")["commit"]
    assert backup["id"] == chain["last"]["id"]  # nothing changed since the last commit
    assert manifest(project) == chain["states"][chain["base"]["id"]]
    till.json("session", "revert", backup["id"][:8], "--yes")
    assert manifest(project) == present


def test_a_revert_is_a_rewound_event(till: Till, chain: dict[str, Any]) -> None:
    doc = till.json("session", "revert", chain["base"]["id"], "--yes")
    lines = till("--json", "events").stdout.splitlines()
    rewound = [json.loads(x) for x in lines if json.loads(x)["kind"] == "rewound"]
    assert len(rewound) == 1
    detail = rewound[0]["detail"]
    assert (detail["snapshot"], detail["undo"]) == (chain["base"]["snapshot"], doc["undo"])
    assert (detail["session"], detail["commit"]) == ("s1", chain["base"]["id"])
