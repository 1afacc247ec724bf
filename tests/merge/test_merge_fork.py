"""`till merge NAME`: a fork merged back into its parent, through real `till` processes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.faults.harness import manifest
from tests.helpers import allocated, make_sparse

TEXT = "".join(f"line {i}\n" for i in range(1, 21))


def _line(text: str, number: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[number - 1] = new + "\n"
    return "".join(lines)


@pytest.fixture
def project(till: Till, folder: Path) -> Path:
    (folder / "app.txt").write_text(TEXT)
    (folder / "lib").mkdir()
    for i in range(5):
        (folder / "lib" / f"m{i}.py").write_text(f"V = {i}\n")
    till.json("watch", "--no-daemon")
    return folder


def _fork(till: Till, name: str, cwd: Path | None = None) -> Path:
    doc = till.json("fork", name, cwd=cwd)
    return Path(doc["fork"]["path"])


def _fork_row(till: Till, name: str, cwd: Path | None = None) -> dict[str, Any]:
    rows = [f for f in till.json("forks", cwd=cwd)["forks"] if f["name"] == name]
    assert len(rows) == 1
    return dict(rows[0])


def test_a_fork_merges_back_and_its_base_moves_to_what_was_merged(
    till: Till, project: Path
) -> None:
    fork = _fork(till, "feature")
    (fork / "app.txt").write_text(_line(TEXT, 18, "line 18 from the fork"))
    (fork / "lib" / "m1.py").write_text("V = 'fork'\n")
    (fork / "lib" / "new.py").write_text("NEW = True\n")
    (project / "app.txt").write_text(_line(TEXT, 2, "line 2 here"))
    (project / "lib" / "m3.py").write_text("V = 'here'\n")

    run = till("--json", "merge", "feature")
    assert run.code == 0, (run.stdout, run.stderr)
    doc = run.doc
    assert doc["fork"] == "feature" and doc["landed"] is True and doc["conflicts"] == []
    assert doc["merged"] == ["app.txt"]
    assert (project / "app.txt").read_text() == _line(
        _line(TEXT, 2, "line 2 here"), 18, "line 18 from the fork"
    )
    assert (project / "lib" / "m1.py").read_text() == "V = 'fork'\n"
    assert (project / "lib" / "new.py").read_text() == "NEW = True\n"
    assert (project / "lib" / "m3.py").read_text() == "V = 'here'\n"
    # The fork itself is untouched by the merge; its head was sealed (trigger fork).
    assert (fork / "lib" / "m3.py").read_text() == "V = 3\n"
    theirs = till.json("show", doc["theirs"])["snapshot"]
    assert theirs["trigger"] == "fork"
    head = till.json("status")["head"]
    assert head["id"] == doc["result"] and head["trigger"] == "merge"
    assert head["label"] == "merge feature"
    # Its base moved to the state merged.
    assert _fork_row(till, "feature")["base"] == doc["theirs"]
    merged = [
        json.loads(line)
        for line in till("--json", "events").stdout.splitlines()
        if '"kind":"merged"' in line.replace(" ", "")
    ]
    assert len(merged) == 1
    assert merged[0]["detail"]["name"] == "feature"
    assert merged[0]["detail"]["result"] == doc["result"]

    # Nothing new in the fork: nothing to merge, even though the workspace moved on.
    (project / "lib" / "m1.py").write_text("V = 'changed again here'\n")
    again = till("--json", "merge", "feature")
    assert again.code == 0 and again.doc["landed"] is False and again.doc["changes"] == 0
    # A later change in the fork merges from the moved base: the earlier one is not redone.
    (fork / "lib" / "m4.py").write_text("V = 'second round'\n")
    second = till.json("merge", "feature")
    assert second["landed"] is True
    assert [c["path"] for c in second["changed"]] == ["lib/m4.py"]
    assert (project / "lib" / "m1.py").read_text() == "V = 'changed again here'\n"


def test_a_fork_merge_with_a_conflict_lands_nothing(till: Till, project: Path) -> None:
    fork = _fork(till, "clash")
    (fork / "app.txt").write_text(_line(TEXT, 5, "five in the fork"))
    (fork / "lib" / "m0.py").write_text("V = 'fork'\n")
    (project / "app.txt").write_text(_line(TEXT, 5, "five here"))
    before = manifest(project)
    run = till("--json", "merge", "clash")
    assert run.code == 3, run.stdout
    assert [(c["path"], c["kind"]) for c in run.doc["conflicts"]] == [("app.txt", "modify_modify")]
    assert manifest(project) == before
    base_before = _fork_row(till, "clash")["base"]
    assert base_before == run.doc["base"]  # nothing merged: the base stays


def test_the_checks_scratch_copy_keeps_a_sparse_files_holes(till: Till, project: Path) -> None:
    """The check runs in a copy of the whole folder: a 256 MiB image with 1 MiB of data must
    not cost the check 256 MiB (nor the time to write them)."""
    make_sparse(project / "disk.img")
    if allocated(project / "disk.img") > 4 << 20:
        pytest.skip("this file system does not keep holes")
    till.json("snap")
    fork = _fork(till, "sparse")
    (fork / "lib" / "m1.py").write_text("V = 'one'\n")
    run = till("--json", "merge", "sparse", "--check", "stat -c 'blocks=%b size=%s' disk.img")
    assert run.code == 0, run.stdout
    blocks, size = run.doc["check_output"].split()
    assert size == f"size={256 << 20}"
    assert int(blocks.removeprefix("blocks=")) * 512 <= 4 << 20


def test_a_fork_merge_gated_on_a_check(till: Till, project: Path) -> None:
    fork = _fork(till, "gated")
    (fork / "lib" / "m2.py").write_text("V = 'broken'\n")
    before = manifest(project)
    failing = till("--json", "merge", "gated", "--check", "grep -q broken lib/m2.py && exit 1")
    assert failing.code == 3 and failing.doc["check_failed"] is True
    assert manifest(project) == before
    (fork / "lib" / "m2.py").write_text("V = 'fixed'\n")
    passing = till("--json", "merge", "gated", "--check", "grep -q fixed lib/m2.py")
    assert passing.code == 0, passing.stdout
    assert passing.doc["landed"] is True and passing.doc["check_exit_code"] == 0
    assert (project / "lib" / "m2.py").read_text() == "V = 'fixed'\n"
    human = till("merge", "gated")
    assert human.code == 0 and "Nothing to merge" in human.stdout


def test_a_fork_of_a_fork_merges_into_its_own_parent(till: Till, project: Path) -> None:
    child = _fork(till, "child")
    grandchild = _fork(till, "grandchild", cwd=child)
    (grandchild / "lib" / "deep.py").write_text("DEEP = 1\n")
    doc = till.json("merge", "grandchild", cwd=child)
    assert doc["landed"] is True
    assert (child / "lib" / "deep.py").exists()
    assert not (project / "lib" / "deep.py").exists()
    # And the child then merges into the workspace.
    till.json("merge", "child")
    assert (project / "lib" / "deep.py").read_text() == "DEEP = 1\n"


def test_merging_an_unknown_fork_is_not_found(till: Till, project: Path) -> None:
    run = till("--json", "merge", "nope")
    assert run.code == 1 and run.error["code"] == -32061
    assert "till forks" in run.error["next"]
    bad = till("--json", "merge", "Not A Name")
    assert bad.code == 1 and bad.error["code"] == -32066


def test_a_merge_of_a_hundred_files_lands_them_all(till: Till, project: Path) -> None:
    for i in range(100):
        (project / "lib" / f"f{i:03d}.txt").write_text(f"file {i}\n")
    till.json("snap")
    fork = _fork(till, "wide")
    for i in range(100):
        (fork / "lib" / f"f{i:03d}.txt").write_text(f"file {i} edited\n")
    doc = till.json("merge", "wide")
    assert doc["landed"] is True and doc["changes"] == 100
    assert all(
        (project / "lib" / f"f{i:03d}.txt").read_text() == f"file {i} edited\n" for i in range(100)
    )


def test_a_database_changed_in_the_fork_lands_while_one_is_open_here(
    till: Till, folder: Path
) -> None:
    db = folder / "app.db"
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("CREATE TABLE t(x)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
        conn.commit()  # in the WAL, not checkpointed: the sealed image is not the file
        till.json("watch", "--no-daemon")
        fork = _fork(till, "data")
        other = sqlite3.connect(fork / "app.db")
        other.execute("INSERT INTO t VALUES (-1)")
        other.commit()
        other.close()
        doc = till.json("merge", "data")
        assert doc["landed"] is True and [c["path"] for c in doc["changed"]] == ["app.db"]
    finally:
        conn.close()
    check = sqlite3.connect(db)
    try:
        assert check.execute("SELECT count(*) FROM t").fetchone()[0] == 101
    finally:
        check.close()
