"""`till fork`: a byte-exact, attached copy with its own timeline, its name and destination
rules, forks of forks, forks of stored snapshots, and a first seal that reads nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.helpers import allocated, digest, git, make_sparse, manifest, rows
from tillage.platform.clone import DRIVERS

FORK_FIELDS = {"name", "path", "base", "head", "driver", "exit_code", "output"}


def _fork_path(folder: Path, name: str) -> Path:
    return folder.parent / f"{folder.name}.forks" / name


def test_a_fork_is_a_byte_exact_attached_copy_with_its_own_timeline(
    till: Till, project: Path
) -> None:
    (project / "secret.key").write_text("k")
    (project / "secret.key").chmod(0o600)
    (project / "build" / "cache").mkdir()
    (project / "build" / "cache" / "x.o").write_bytes(os.urandom(5000))
    head = till.json("snap")["snapshot"]

    doc = till.json("fork", "feature-1")["fork"]

    path = _fork_path(project, "feature-1")
    assert set(doc) >= FORK_FIELDS
    assert doc["name"] == "feature-1"
    assert doc["path"] == str(path)
    assert doc["base"] == head["id"]  # nothing changed since: the head is the base
    assert doc["driver"] in DRIVERS
    assert doc["exit_code"] is None and doc["output"] is None
    assert manifest(path) == manifest(project)  # files, .env, ignored, link, modes, mtimes
    assert rows(path / "dev.db") == 500
    assert git(path, "status", "--porcelain") == git(project, "status", "--porcelain")
    assert "init" in git(path, "log", "--oneline")

    status = till.json("status", cwd=path)
    assert status["workspace"] == str(path)
    assert status["id"] != till.json("status")["id"]
    assert status["fork"] == {
        "name": "feature-1",
        "parent": str(project),
        "parent_workspace": till.json("status")["id"],
        "base": head["id"],
    }
    assert till.json("status")["fork"] is None
    timeline = till.json("timeline", cwd=path)["snapshots"]
    assert [s["trigger"] for s in timeline] == ["fork"]
    assert timeline[0]["id"] == doc["head"]
    assert timeline[0]["parent"] == head["id"]


def test_the_fork_reseals_to_its_base_and_edits_in_it_leave_the_parent_untouched(
    till: Till, project: Path
) -> None:
    doc = till.json("fork", "f")["fork"]
    path = Path(doc["path"])
    before = manifest(project)
    parent_snaps = len(till.json("timeline")["snapshots"])

    first = till.json("snap", cwd=path)["snapshot"]
    assert till.json("diff", doc["base"], "--to", first["id"], cwd=path)["changes"] == []

    (path / "src" / "pkg" / "app.py").write_text("def main():\n    return 43\n")
    (path / "new.txt").write_text("only in the fork\n")
    (path / "README.md").unlink()
    till.json("snap", cwd=path)

    assert manifest(project) == before
    assert len(till.json("timeline")["snapshots"]) == parent_snaps
    changes = till.json("diff", doc["base"], "--to", "f")["changes"]
    assert {(c["path"], c["kind"]) for c in changes} == {
        ("src/pkg/app.py", "modified"),
        ("new.txt", "added"),
        ("README.md", "deleted"),
    }


@pytest.mark.parametrize(
    "name", ["Feature", "_x", "a/b", "..", ".hidden", "a b", "x" * 41, "é", "a\nb"]
)
def test_an_invalid_name_is_refused_and_nothing_is_made(
    till: Till, project: Path, name: str
) -> None:
    run = till("--json", "fork", name)
    assert run.code == 1
    assert run.error["code"] == -32066
    assert run.error["name"] == "fork.invalid_name"
    assert not (project.parent / f"{project.name}.forks").exists()


def test_the_longest_and_shortest_names_are_fine(till: Till, project: Path) -> None:
    for name in ("a", "z" * 40, "v1.2_rc-3"):
        assert till.json("fork", name)["fork"]["name"] == name


def test_an_existing_name_or_destination_is_a_conflict_never_an_overwrite(
    till: Till, project: Path
) -> None:
    path = Path(till.json("fork", "dup")["fork"]["path"])
    (path / "mine.txt").write_text("work in the fork\n")
    again = till("--json", "fork", "dup")
    assert again.code == 1
    assert (again.error["code"], again.error["name"]) == (-32062, "fork.exists")
    assert (path / "mine.txt").read_text() == "work in the fork\n"

    taken = project.parent / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("keep")
    clash = till("--json", "fork", "other", "--destination", str(taken))
    assert clash.code == 1
    assert (clash.error["code"], clash.error["name"]) == (-32062, "fork.destination_exists")
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]
    empty = project.parent / "empty"
    empty.mkdir()
    assert till("--json", "fork", "other", "--destination", str(empty)).code == 1
    assert list(empty.iterdir()) == []
    assert [f["name"] for f in till.json("forks")["forks"]] == ["dup"]


def test_a_destination_inside_the_workspace_or_the_store_is_refused(
    till: Till, project: Path
) -> None:
    inside = (project / "sub", project / "src" / "deeper", till.home / "f", project / "n/e/w")
    for dest in inside:
        run = till("--json", "fork", "x", "--destination", str(dest))
        assert run.code == 1, dest
        assert (run.error["code"], run.error["name"]) == (-32066, "fork.bad_destination")
        assert not dest.exists()
    assert not (project / "n").exists()  # a refused destination makes no folder on its way
    assert till.json("forks")["forks"] == []


def test_missing_folders_on_the_way_to_a_destination_are_made(till: Till, project: Path) -> None:
    dest = project.parent / "tasks" / "t1" / "world"
    doc = till.json("fork", "t1", "--destination", str(dest))["fork"]
    assert doc["path"] == str(dest)
    assert manifest(dest) == manifest(project)
    (project.parent / "a-file").write_text("")
    run = till("--json", "fork", "t2", "--destination", str(project.parent / "a-file" / "w"))
    assert run.error["name"] == "fork.bad_destination"


def test_a_custom_destination_relative_to_the_caller(till: Till, project: Path) -> None:
    doc = till.json("fork", "rel", "--destination", "../elsewhere")["fork"]
    assert doc["path"] == str(project.parent / "elsewhere")
    assert manifest(project.parent / "elsewhere") == manifest(project)


def test_a_fork_of_a_fork_has_the_fork_as_its_parent(till: Till, project: Path) -> None:
    a = Path(till.json("fork", "a")["fork"]["path"])
    (a / "from-a.txt").write_text("a\n")
    b = till.json("fork", "b", cwd=a)["fork"]
    assert b["path"] == str(a.parent / "a.forks" / "b")
    b_path = Path(b["path"])
    assert (b_path / "from-a.txt").read_text() == "a\n"
    status = till.json("status", cwd=b_path)
    assert status["fork"]["parent"] == str(a)
    assert status["fork"]["parent_workspace"] == till.json("status", cwd=a)["id"]
    assert [f["name"] for f in till.json("forks")["forks"]] == ["a"]
    assert [f["name"] for f in till.json("forks", cwd=a)["forks"]] == ["b"]
    # A fork is a workspace like any other: rewindable.
    (b_path / "from-a.txt").write_text("changed\n")
    till.json("rewind", b["head"], "--yes", cwd=b_path)
    assert (b_path / "from-a.txt").read_text() == "a\n"


def test_fork_at_a_stored_snapshot_materializes_that_state(till: Till, project: Path) -> None:
    old = till.json("snap", "-m", "old")["snapshot"]
    expected = manifest(project, mtimes=False)
    (project / "README.md").write_text("# changed since\n")
    (project / "added.txt").write_text("later\n")
    till.json("snap")

    doc = till.json("fork", "past", "--at", old["id"][:10])["fork"]

    assert doc["base"] == old["id"]
    assert doc["driver"] == "copy"
    assert manifest(Path(doc["path"]), mtimes=False) == expected
    assert rows(Path(doc["path"]) / "dev.db") == 500
    assert till.json("status", cwd=Path(doc["path"]))["fork"]["base"] == old["id"]
    bad = till("--json", "fork", "nope", "--at", "0000000000")
    assert bad.code == 1 and bad.error["code"] == -32061


def test_the_first_seal_in_a_fresh_fork_reads_no_unchanged_file(till: Till, project: Path) -> None:
    from tillage.workspace.attach import find_workspace
    from tillage.workspace.seal import SealOptions, seal_result

    old = time.time() - 3600
    for dirpath, _dirs, files in os.walk(project):
        for name in files:
            os.utime(os.path.join(dirpath, name), (old, old), follow_symlinks=False)
    time.sleep(0.1)  # not an assertion: files must be older than the racy window (50 ms)
    till.json("snap")
    path = Path(till.json("fork", "fresh")["fork"]["path"])
    (path / "edited.txt").write_text("new\n")

    ws = find_workspace(till.home, path)
    assert ws is not None
    sealed = seal_result(ws, SealOptions(trigger="manual"))

    assert sealed.capture.read_files == 1  # edited.txt only
    assert sealed.capture.files == till.json("status")["head"]["files"] + 1


def test_a_file_that_changed_during_the_copy_gets_no_row(tmp_path: Path) -> None:
    from tillage.features.forks.copy import Seeder
    from tillage.workspace.pathindex import PathIndex, stat_facts

    f = tmp_path / "f"
    f.write_text("a")
    old = time.time() - 3600
    os.utime(f, (old, old))
    before = os.stat(f)
    row = (*stat_facts(before), 0, b"id", 0, 1, ())
    seeder = Seeder(PathIndex(files={"f": row, "g": row}))
    seeder.now += 10**9  # the copy is a second later: the utime above is not racy then
    copy = tmp_path / "copy"
    copy.write_text("a")
    seeder("f", before, before, os.stat(copy))
    assert seeder.rows["f"][:6] == stat_facts(os.stat(copy))[:6]
    f.write_text("b")  # changed while copied
    seeder.rows.clear()
    seeder("f", before, os.stat(f), os.stat(copy))
    assert seeder.rows == {}


@pytest.mark.process
def test_two_forks_of_one_name_at_once_make_one_fork_and_one_conflict(
    till: Till, project: Path
) -> None:
    import json
    import subprocess
    import sys

    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "fork", "same"],
            cwd=project,
            env=till.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=120), json.loads(p.communicate()[0])) for p in procs]
    codes = sorted(code for code, _doc in results)
    assert codes == [0, 1]
    errors = [doc["error"]["name"] for code, doc in results if code == 1]
    assert errors == ["fork.exists"]
    assert [f["name"] for f in till.json("forks")["forks"]] == ["same"]
    forks_dir = project.parent / f"{project.name}.forks"
    assert sorted(p.name for p in forks_dir.iterdir()) == ["same"]


def test_a_destination_with_a_long_name_is_fine(till: Till, project: Path) -> None:
    dest = project.parent / ("d" * 240)
    doc = till.json("fork", "long", "--destination", str(dest))["fork"]
    assert doc["path"] == str(dest)
    assert manifest(dest) == manifest(project)
    assert till.json("fork-rm", "long", "--yes")["removed"] is True
    assert sorted(p.name for p in project.parent.iterdir() if p.name.startswith(".")) == []


def test_a_fork_of_a_sparse_file_keeps_its_holes(till: Till, project: Path) -> None:
    """A 256 MiB disk image holding 1 MiB of data costs its fork about 1 MiB, not 256."""
    whole = make_sparse(project / "disk.img")
    if allocated(project / "disk.img") > 4 << 20:
        pytest.skip("this file system does not keep holes")
    till.json("snap")
    doc = till.json("fork", "sparse")["fork"]
    copy = Path(doc["path"]) / "disk.img"
    assert os.stat(copy).st_size == os.stat(project / "disk.img").st_size
    assert digest(copy) == whole
    assert allocated(copy) <= 4 << 20
