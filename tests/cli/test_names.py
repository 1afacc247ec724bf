"""Names for snapshots wherever an ID goes: head, head~N, latest, @, and fork names; one
resolver, so show, cat, diff, ls, rewind, pin and the tools agree, and bad names are refused
with a structured error and a next step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Till

import tillage.agent


@pytest.fixture
def three(till: Till, folder: Path) -> list[dict[str, Any]]:
    """A timeline of three snapshots (newest first), `a.txt` saying which."""
    (folder / "a.txt").write_text("one\n")
    till.json("watch", "--no-daemon")
    for text in ("two\n", "three\n"):
        (folder / "a.txt").write_text(text)
        till.json("snap", "-m", text.strip())
    snaps: list[dict[str, Any]] = till.json("timeline")["snapshots"]
    assert len(snaps) == 3
    return snaps


def test_head_and_latest_name_the_newest_snapshot_and_head_n_counts_back(
    till: Till, three: list[dict[str, Any]]
) -> None:
    ids = [s["id"] for s in three]
    assert till.json("show", "head")["snapshot"]["id"] == ids[0]
    assert till.json("show", "HEAD")["snapshot"]["id"] == ids[0]
    assert till.json("show", "latest")["snapshot"]["id"] == ids[0]
    assert till.json("show", "head~1")["snapshot"]["id"] == ids[1]
    assert till.json("show", "head~")["snapshot"]["id"] == ids[1]
    assert till.json("show", "head^^")["snapshot"]["id"] == ids[2]
    assert till.json("show", "latest~2")["snapshot"]["id"] == ids[2]
    assert till("cat", "head~1", "a.txt").stdout == "two\n"
    assert till("cat", "head~2", "a.txt").stdout == "one\n"
    diff = till.json("diff", "head~2", "--to", "head")
    assert diff["from_snapshot"]["id"] == ids[2] and diff["to_snapshot"]["id"] == ids[0]
    assert till.json("pin", "head~1")["snapshot"]["id"] == ids[1]


def test_a_rewind_to_head_n_puts_that_snapshot_back(
    till: Till, folder: Path, three: list[dict[str, Any]]
) -> None:
    done = till.json("rewind", "head~2", "--yes")
    assert done["applied"] is True
    assert done["snapshot"]["id"] == three[2]["id"]  # a whole ID comes back
    assert (folder / "a.txt").read_text() == "one\n"


def test_head_n_beyond_the_timeline_is_not_found_with_how_many_there_are(
    till: Till, three: list[dict[str, Any]]
) -> None:
    for verb in (("show", "head~999"), ("cat", "head~3", "a.txt"), ("rewind", "head~3")):
        run = till("--json", *verb)
        assert run.code == 1
        err = run.error
        assert err["name"] == "snapshot.beyond_timeline" and err["code"] == -32061
        assert err["details"]["snapshots"] == 3
        assert err["details"]["oldest"] == three[2]["id"]
        assert "till timeline" in err["next"]
    human = till("show", "head~999")
    assert "head~2 is the oldest" in human.stderr


def test_a_malformed_count_and_an_unknown_word_are_bad_ids_with_next_steps(
    till: Till, three: list[dict[str, Any]]
) -> None:
    for word in ("head~x", "head~-1", "head~1.5", "nosuchfork"):
        run = till("--json", "show", word)
        assert run.code == 1, word
        assert run.error["name"] == "snapshot.bad_id", word
        assert run.error["next"]
    assert "till forks" in till("--json", "show", "nosuchfork").error["next"]


def test_at_is_the_live_folder_in_diff_ls_and_cat(
    till: Till, folder: Path, three: list[dict[str, Any]]
) -> None:
    (folder / "a.txt").write_text("now\n")
    (folder / "new.txt").write_text("new\n")
    assert till("cat", "@", "a.txt").stdout == "now\n"
    forward = till.json("diff", "head", "--to", "@")
    assert forward["to_snapshot"] is None
    assert {c["path"]: c["kind"] for c in forward["changes"]} == {
        "a.txt": "modified",
        "new.txt": "added",
    }
    backward = till.json("diff", "@", "--to", "head")
    assert backward["from_snapshot"] is None
    assert backward["to_snapshot"]["id"] == three[0]["id"]
    assert {c["path"]: c["kind"] for c in backward["changes"]} == {
        "a.txt": "modified",
        "new.txt": "deleted",
    }
    assert "From the live folder to" in till("diff", "@", "--to", "head").stdout
    listed = till.json("ls", "@")
    assert listed["snapshot"] is None
    assert [e["path"] for e in listed["entries"]] == ["a.txt", "new.txt"]


def test_at_is_refused_where_a_stored_snapshot_is_needed_and_nothing_changes(
    till: Till, folder: Path, three: list[dict[str, Any]]
) -> None:
    (folder / "a.txt").write_text("edited\n")
    for verb in (("rewind", "@", "--yes"), ("show", "@"), ("pin", "@"), ("fork", "f", "--at", "@")):
        run = till("--json", *verb)
        assert run.code == 1, verb
        assert run.error["name"] == "snapshot.live_folder" and run.error["code"] == -32320
        assert "till snap" in run.error["next"]
    assert (folder / "a.txt").read_text() == "edited\n"
    assert len(till.json("timeline")["snapshots"]) == 3
    assert till.json("forks")["forks"] == []


def test_a_fork_name_names_the_forks_head_in_show_cat_diff_ls_and_rewind(
    till: Till, folder: Path, three: list[dict[str, Any]]
) -> None:
    fork = till.json("fork", "feature")["fork"]
    Path(fork["path"], "a.txt").write_text("feature\n")
    Path(fork["path"], "f.txt").write_text("f\n")
    fork_head = till.json("--repo", fork["path"], "snap")["snapshot"]["id"]
    assert till.json("show", "feature")["snapshot"]["id"] == fork_head
    assert till("cat", "feature", "a.txt").stdout == "feature\n"
    assert "f.txt" in [e["path"] for e in till.json("ls", "feature")["entries"]]
    assert till.json("diff", "head", "--to", "feature")["to_snapshot"]["id"] == fork_head
    done = till.json("rewind", "feature", "--paths", "f.txt", "--yes")
    assert done["snapshot"]["id"] == fork_head
    assert (folder / "f.txt").read_text() == "f\n"


def test_a_fork_name_beats_the_hex_prefix_it_spells_and_a_longer_prefix_still_works(
    till: Till, folder: Path, three: list[dict[str, Any]]
) -> None:
    oldest = three[2]["id"]
    name = oldest[:6]  # a fork called like the start of a snapshot's ID
    fork = till.json("fork", name)["fork"]
    assert till.json("show", name)["snapshot"]["id"] == fork["head"]
    assert fork["head"] != oldest
    assert till.json("show", oldest[:7])["snapshot"]["id"] == oldest


def test_a_removed_forks_name_says_where_its_last_state_is(
    till: Till, three: list[dict[str, Any]]
) -> None:
    till.json("fork", "gone")
    last = till.json("fork-rm", "gone", "--yes")["snapshot"]["id"]
    run = till("--json", "show", "gone")
    assert run.error["name"] == "snapshot.not_found"
    assert run.error["details"] == {"fork": "gone", "last": last}
    assert f"till show {last[:12]}" in run.error["next"]
    # ... and the command it suggests works.
    assert till.json("show", last[:12])["snapshot"]["id"] == last


def test_no_new_fork_may_take_a_name_that_means_a_snapshot(
    till: Till, three: list[dict[str, Any]]
) -> None:
    for name in ("head", "latest"):
        run = till("--json", "fork", name)
        assert run.code == 1
        assert run.error["name"] == "fork.invalid_name"
    assert till.json("forks")["forks"] == []


def test_the_tools_take_names_and_answer_whole_ids(
    till: Till, folder: Path, three: list[dict[str, Any]]
) -> None:
    tools = {t.name: t for t in tillage.agent.tools(folder, home=till.home)}
    preview = tools["workspace_restore"].call({"snapshot": "head~1"})
    assert not preview.is_error, preview.text
    assert preview.structured["snapshot"]["id"] == three[1]["id"]  # type: ignore[index]
    assert preview.structured["applied"] is False  # type: ignore[index]
    shown = tools["workspace_show"].call({"id": "latest"})
    assert shown.structured["snapshot"]["id"] == three[0]["id"]  # type: ignore[index]
    refused = tools["workspace_restore"].call({"snapshot": "@", "confirm": True})
    assert refused.is_error
    assert refused.structured["error"]["name"] == "snapshot.live_folder"  # type: ignore[index]
    assert (folder / "a.txt").read_text() == "three\n"
