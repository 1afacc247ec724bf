"""`till forks` and `till fork-rm`: listing universes with their cost and changes, and
retiring one (confirmation, the last state kept, a folder that is not the fork refused)."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

from tests.conftest import Till

LIST_FIELDS = {
    "name",
    "path",
    "base",
    "head",
    "created_at",
    "disk_bytes",
    "changed_paths",
    "conflicts",
}


def test_forks_lists_each_universe_with_its_changes_and_disk_cost(
    till: Till, project: Path
) -> None:
    assert till.json("forks")["forks"] == []
    a = till.json("fork", "a")["fork"]
    b = till.json("fork", "b")["fork"]
    path = Path(a["path"])
    (path / "README.md").write_text("# changed in a\n")
    (path / "big.bin").write_bytes(b"\x01" * 300_000)
    head = till.json("snap", cwd=path)["snapshot"]

    forks = till.json("forks")["forks"]

    assert [f["name"] for f in forks] == ["a", "b"]
    for f in forks:
        assert set(f) >= LIST_FIELDS
        assert f["created_at"].endswith("Z")
        assert isinstance(f["conflicts"], list)
        assert f["missing"] is False
    first, second = forks
    assert (first["base"], first["head"], first["changed_paths"]) == (a["base"], head["id"], 2)
    assert (second["head"], second["changed_paths"]) == (b["head"], 0)
    # What the fork wrote is its own on any file system: at least the 300 KB file.
    assert first["disk_bytes"] >= 300_000
    assert first["disk_bytes"] > second["disk_bytes"] >= 0


def test_a_fork_whose_folder_is_gone_is_listed_as_missing(till: Till, project: Path) -> None:
    path = Path(till.json("fork", "gone")["fork"]["path"])
    shutil.rmtree(path)
    (listed,) = till.json("forks")["forks"]
    assert listed["missing"] is True
    assert listed["disk_bytes"] is None
    run = till("--json", "run", "gone", "--", "true")
    assert (run.code, run.error["code"], run.error["name"]) == (1, -32161, "fork.folder_missing")
    # Retiring it removes nothing (there is nothing) and keeps its last state.
    done = till.json("fork-rm", "gone", "--yes")
    assert done["files_removed"] == 0
    assert till.json("forks")["forks"] == []


def test_fork_rm_without_yes_changes_nothing(till: Till, project: Path) -> None:
    path = Path(till.json("fork", "keep")["fork"]["path"])
    run = till("--json", "fork-rm", "keep")
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32064, "confirmation_required")
    assert path.is_dir()
    assert [f["name"] for f in till.json("forks")["forks"]] == ["keep"]
    preview = till.json("fork-rm", "keep", "--dry-run")
    assert preview["removed"] is False
    assert preview["files_removed"] > 0
    assert path.is_dir()


def test_fork_rm_seals_the_last_state_removes_the_folder_and_keeps_it_restorable(
    till: Till, project: Path
) -> None:
    made = till.json("fork", "done")["fork"]
    path = Path(made["path"])
    (path / "result.txt").write_text("what the fork made\n")  # never sealed in the fork

    doc = till.json("fork-rm", "done", "--yes")

    assert doc["name"] == "done"
    assert doc["removed"] is True
    assert doc["files_removed"] >= 10
    assert doc["snapshot"]["trigger"] == "fork"
    assert not path.exists()
    assert not any(p.name.startswith(".done") for p in path.parent.iterdir())
    assert till.json("forks")["forks"] == []
    cat = till.json("cat", doc["snapshot"]["id"], "result.txt")
    assert base64.b64decode(cat["content_base64"]) == b"what the fork made\n"
    raw = till("cat", doc["snapshot"]["short"], "result.txt")
    assert raw.stdout == "what the fork made\n"
    again = till("--json", "fork-rm", "done", "--yes")
    assert (again.code, again.error["code"], again.error["name"]) == (
        1,
        -32061,
        "fork.not_found",
    )
    # The name is free again, and so is the removed fork's port.
    new = till.json("fork", "done")["fork"]
    assert new["workspace"] != made["workspace"]
    assert new["port"] == made["port"]


def test_fork_rm_refuses_a_folder_that_is_not_the_fork(till: Till, project: Path) -> None:
    path = Path(till.json("fork", "victim")["fork"]["path"])
    shutil.rmtree(path)
    path.mkdir()
    (path / "precious.txt").write_text("someone else's work\n")

    run = till("--json", "fork-rm", "victim", "--yes")
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32160, "fork.not_the_fork")
    assert (path / "precious.txt").read_text() == "someone else's work\n"

    # A copy of another workspace's pointer is not the fork either.
    shutil.copytree(project / ".tillage", path / ".tillage")
    assert till("--json", "fork-rm", "victim", "--yes").error["name"] == "fork.not_the_fork"
    assert (path / "precious.txt").exists()
    assert [f["name"] for f in till.json("forks")["forks"]] == ["victim"]

    kept = till.json("fork-rm", "victim", "--keep-files")
    assert kept["kept_files"] is True and kept["files_removed"] == 0
    assert (path / "precious.txt").exists()
    assert till.json("forks")["forks"] == []


def test_fork_rm_keep_files_retires_the_fork_and_leaves_its_folder(
    till: Till, project: Path
) -> None:
    path = Path(till.json("fork", "k")["fork"]["path"])
    (path / "x.txt").write_text("x\n")
    doc = till.json("fork-rm", "k", "--keep-files")
    assert doc["removed"] is True and doc["files_removed"] == 0
    assert (path / "x.txt").read_text() == "x\n"
    assert till.json("forks")["forks"] == []
    # Retired: the folder is no longer attached (a later `till watch` there picks its
    # timeline up again as a workspace of its own).
    assert till("--json", "status", cwd=path).error["code"] == -32060


def test_fork_rm_of_an_unknown_or_invalid_name(till: Till, project: Path) -> None:
    unknown = till("--json", "fork-rm", "nope", "--yes")
    assert (unknown.error["code"], unknown.error["name"]) == (-32061, "fork.not_found")
    assert "till forks" in unknown.error["next"]
    unknown_no_yes = till("--json", "fork-rm", "nope")
    assert unknown_no_yes.error["code"] == -32061  # answered before asking for --yes
    invalid = till("--json", "fork-rm", "Bad/Name", "--yes")
    assert invalid.error["code"] == -32066


def test_a_fork_with_forks_of_its_own_is_not_removed(till: Till, project: Path) -> None:
    a = Path(till.json("fork", "a")["fork"]["path"])
    till.json("fork", "b", cwd=a)
    run = till("--json", "fork-rm", "a", "--yes")
    assert (run.error["code"], run.error["name"]) == (-32062, "fork.has_forks")
    assert a.is_dir()


def test_diff_takes_fork_names_on_both_sides(till: Till, project: Path) -> None:
    one = Path(till.json("fork", "one")["fork"]["path"])
    till.json("fork", "two")
    (one / "only-one.txt").write_text("1\n")
    till.json("snap", cwd=one)
    changes = till.json("diff", "two", "--to", "one")["changes"]
    assert [(c["path"], c["kind"]) for c in changes] == [("only-one.txt", "added")]
    # Against the live folder: the parent lacks the fork's file.
    live = till.json("diff", "one")["changes"]
    assert ("only-one.txt", "deleted") in [(c["path"], c["kind"]) for c in live]


def test_a_fork_can_be_watched_and_fork_rm_stops_its_watcher(till: Till, project: Path) -> None:
    from tillage.workspace import watchstate

    doc = till.json("fork", "w")["fork"]
    path = Path(doc["path"])
    watched = till.json("watch", cwd=path)
    try:
        assert watched["watching"] is True
        assert till.json("status", cwd=path)["watching"] is True
        removed = till.json("fork-rm", "w", "--yes")
        assert removed["removed"] is True
        assert not watchstate.is_watching(till.home, doc["workspace"])
        assert not path.exists()
    finally:
        if path.exists():
            till("watch", "--stop", cwd=path)


def test_forks_lists_the_paths_a_fork_shares_with_another(till: Till, project: Path) -> None:
    for name in ("x", "y"):
        path = Path(till.json("fork", name)["fork"]["path"])
        (path / "README.md").write_text(f"# {name}\n")
        (path / f"only-{name}.txt").write_text(name)
        till.json("snap", cwd=path)
    listed = {f["name"]: f["conflicts"] for f in till.json("forks")["forks"]}
    assert listed == {"x": ["README.md"], "y": ["README.md"]}


def test_fork_rm_with_an_expected_destination_refuses_another_folder(
    till: Till, project: Path
) -> None:
    path = Path(till.json("fork", "t")["fork"]["path"])
    wrong = till("--json", "fork-rm", "t", "--yes", "--destination", str(project.parent / "x"))
    assert (wrong.code, wrong.error["code"], wrong.error["name"]) == (
        1,
        -32160,
        "fork.not_the_fork",
    )
    assert path.is_dir()
    done = till.json("fork-rm", "t", "--yes", "--destination", str(path))
    assert done["removed"] is True and not path.exists()
