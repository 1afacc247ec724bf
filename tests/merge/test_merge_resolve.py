"""Conflicts a person or an agent can resolve (issue 21): `merge --into-fork` writes the merge
into the fork with git-style markers and lists what is left, `--take ours|theirs PATH` settles
paths, and the merge that lands a fork refuses while anything is left unsettled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Till

TEXT = "".join(f"line {i}\n" for i in range(1, 11))


def _fork_root(folder: Path, name: str) -> Path:
    return folder.parent / f"{folder.name}.forks" / name


def _edit(text: str, line: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[line - 1] = new + "\n"
    return "".join(lines)


@pytest.fixture
def conflicted(till: Till, folder: Path) -> Path:
    """A fork and a workspace that changed the same line of t.txt and the same binary file,
    each with a change of its own besides."""
    (folder / "t.txt").write_text(TEXT)
    (folder / "blob.bin").write_bytes(b"\0base")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / "t.txt").write_text(_edit(_edit(TEXT, 5, "five from the fork"), 9, "nine, fork"))
    (fork / "blob.bin").write_bytes(b"\0fork")
    (fork / "fork-only.txt").write_text("the fork's own\n")
    (folder / "t.txt").write_text(_edit(_edit(TEXT, 5, "five from here"), 1, "one, here"))
    (folder / "blob.bin").write_bytes(b"\0here")
    (folder / "here-only.txt").write_text("the workspace's own\n")
    return fork


def test_into_fork_writes_markers_there_and_touches_nothing_here(
    till: Till, folder: Path, conflicted: Path
) -> None:
    here = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}

    doc = till.json("merge", "k", "--into-fork")

    assert doc["into_fork"] and doc["landed"]
    assert {c["path"]: c["kind"] for c in doc["conflicts"]} == {
        "blob.bin": "modify_modify",
        "t.txt": "modify_modify",
    }
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == here
    text = (conflicted / "t.txt").read_text()
    assert text == (
        "one, here\nline 2\nline 3\nline 4\n"
        "<<<<<<< workspace\nfive from here\n||||||| base\nline 5\n=======\n"
        "five from the fork\n>>>>>>> k\n"
        "line 6\nline 7\nline 8\nnine, fork\nline 10\n"
    )
    assert (conflicted / "here-only.txt").read_text() == "the workspace's own\n"
    assert (conflicted / "blob.bin").read_bytes() == b"\0fork"  # the fork's own, until settled


def test_a_fork_with_markers_left_is_refused_and_lands_once_they_are_gone(
    till: Till, folder: Path, conflicted: Path
) -> None:
    till.json("merge", "k", "--into-fork")

    refused = till("--json", "merge", "k", "--take", "theirs", "blob.bin")
    assert refused.code == 1 and refused.error["name"] == "merge.unsettled"
    assert [u["path"] for u in refused.error["details"]["unsettled"]] == ["t.txt"]
    assert not (folder / "fork-only.txt").exists()

    resolved = _edit(_edit(_edit(TEXT, 1, "one, here"), 5, "five, both"), 9, "nine, fork")
    (conflicted / "t.txt").write_text(resolved)
    landed = till.json("merge", "k", "--take", "theirs", "blob.bin")

    assert landed["landed"] and not landed["conflicts"]
    assert (folder / "t.txt").read_text() == resolved
    assert (folder / "blob.bin").read_bytes() == b"\0fork"
    assert (folder / "fork-only.txt").read_text() == "the fork's own\n"
    assert (folder / "here-only.txt").read_text() == "the workspace's own\n"


def test_a_binary_conflict_left_in_the_fork_needs_a_take(
    till: Till, folder: Path, conflicted: Path
) -> None:
    till.json("merge", "k", "--into-fork", "--take", "ours", "t.txt")
    assert (conflicted / "t.txt").read_text() == (folder / "t.txt").read_text()

    refused = till("--json", "merge", "k")
    assert refused.code == 1 and refused.error["name"] == "merge.unsettled"
    (left,) = refused.error["details"]["unsettled"]
    assert left["path"] == "blob.bin" and "--take" in left["why"]

    landed = till.json("merge", "k", "--take", "ours", "blob.bin")
    assert landed["landed"]
    assert (folder / "blob.bin").read_bytes() == b"\0here"
    assert (folder / "fork-only.txt").exists()


def test_take_settles_a_direct_merge_path_by_path(
    till: Till, folder: Path, conflicted: Path
) -> None:
    run = till("--json", "merge", "k", "--take", "theirs", "blob.bin")
    assert run.code == 3 and [c["path"] for c in run.doc["conflicts"]] == ["t.txt"]
    assert run.doc["next"] == "till merge k --take theirs blob.bin"

    doc = till.json("merge", "k", "--take", "theirs", "blob.bin", "--take", "ours", "t.txt")

    assert doc["landed"]
    assert (folder / "blob.bin").read_bytes() == b"\0fork"
    assert (folder / "t.txt").read_text() == _edit(_edit(TEXT, 5, "five from here"), 1, "one, here")
    assert (folder / "fork-only.txt").exists()


def test_a_folder_made_a_file_is_settled_by_taking_the_folder(till: Till, folder: Path) -> None:
    (folder / "d").mkdir()
    (folder / "d" / "f.txt").write_text("f\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / "d" / "f.txt").unlink()
    (fork / "d").rmdir()
    (fork / "d").write_text("now a file\n")
    (folder / "d" / "f.txt").write_text("f edited here\n")

    partial = till("--json", "merge", "k", "--take", "theirs", "d/f.txt")
    assert partial.code == 3 and [c["path"] for c in partial.doc["conflicts"]] == ["d"]

    doc = till.json("merge", "k", "--take", "theirs", "d")
    assert doc["landed"] and (folder / "d").read_text() == "now a file\n"


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["a.txt"], "side"),
        (["mine", "a.txt"], "side"),
        (["theirs"], "paths"),
        (["theirs", "../x"], ".."),
        (["theirs", "a.txt", "ours", "a.txt"], "both"),
    ],
)
def test_a_bad_take_is_refused_and_changes_nothing(
    till: Till, folder: Path, words: list[str], says: str
) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    (_fork_root(folder, "k") / "a.txt").write_text("theirs\n")
    count = len(till.json("timeline")["snapshots"])

    run = till("--json", "merge", "k", "--take", *words)

    assert run.code == 1 and run.error["name"] == "invalid_argument", run.stdout
    assert says in run.error["message"]
    assert len(till.json("timeline")["snapshots"]) == count
    assert (folder / "a.txt").read_text() == "a\n"


def test_into_fork_with_a_check_or_a_snapshot_is_refused(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    run = till("--json", "merge", "k", "--into-fork", "--check", "true")
    assert run.code == 1 and run.error["name"] == "merge.bad_request"


def test_a_clean_merge_into_the_fork_then_lands_only_the_forks_work(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / "mine.txt").write_text("the fork's\n")
    (folder / "a.txt").write_text("a, moved on here\n")

    into = till.json("merge", "k", "--into-fork")
    assert into["landed"] and not into["conflicts"] and into["next"] == "till merge k"
    assert (fork / "a.txt").read_text() == "a, moved on here\n"

    back = till.json("merge", "k")
    assert back["landed"] and [c["path"] for c in back["changed"]] == ["mine.txt"]


def test_the_mcp_merge_tool_offers_resolution_and_snapshots() -> None:
    from tillage.verbs.tool_defs import tool_defs

    (merge,) = [d for d in tool_defs() if d.name == "workspace_merge"]
    props = set(merge.input_schema()["properties"])
    assert {"take", "into_fork", "snapshot", "expect"} <= props
    assert "into_fork" in json.dumps(merge.input_schema())


def test_a_fork_rewound_to_before_a_merge_into_it_does_not_take_the_parents_work_out(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / "mine.txt").write_text("the fork's\n")
    (folder / "a.txt").write_text("a, moved on here\n")
    into = till.json("merge", "k", "--into-fork")
    assert (fork / "a.txt").read_text() == "a, moved on here\n"

    till.json("rewind", into["theirs"], "--yes", cwd=fork)  # undo it, in the fork
    assert (fork / "a.txt").read_text() == "a\n"
    back = till.json("merge", "k")

    assert back["landed"] and [c["path"] for c in back["changed"]] == ["mine.txt"]
    assert (folder / "a.txt").read_text() == "a, moved on here\n"


def test_a_fork_rewound_to_before_its_merge_does_not_undo_it_in_the_parent(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    before = till.json("snap", cwd=fork)["snapshot"]["id"]
    (fork / "work.txt").write_text("merged work\n")
    assert till.json("merge", "k")["landed"]

    till.json("rewind", before, "--yes", cwd=fork)
    again = till.json("merge", "k")

    assert (folder / "work.txt").read_text() == "merged work\n"
    assert again["changes"] == 0


@pytest.mark.parametrize(
    "failpoint", ["rewind.after_intent", "rewind.after_first_action", "merge.after_seal"]
)
def test_a_merge_into_the_fork_killed_half_way_is_finished_and_still_guards_its_conflicts(
    till: Till, folder: Path, conflicted: Path, failpoint: str
) -> None:
    """Killed at any step of its landing, a merge into the fork is rolled forward by the next
    command that opens the fork: the markers are whole, the base moved, and what is left to
    settle still stops the merge that would land it."""
    from tests.forks.test_fork_crash import crash

    here = (folder / "t.txt").read_text()
    assert crash(till, failpoint, "merge", "k", "--into-fork") == -9

    refused = till("--json", "merge", "k")

    assert refused.code == 1 and refused.error["name"] == "merge.unsettled", refused.stdout
    assert "<<<<<<< workspace\nfive from here\n" in (conflicted / "t.txt").read_text()
    assert (conflicted / "here-only.txt").read_text() == "the workspace's own\n"
    assert (folder / "t.txt").read_text() == here
    assert not (folder / "fork-only.txt").exists()
