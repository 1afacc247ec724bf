"""A merge never loses the parent's work (issue 21, data loss 2 and 3): a database written in
the parent while a merge's check runs refuses the landing like any edit, and a path either
side's policy leaves out is never merged."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Till


def _rows(db: Path) -> list[int]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT n FROM t ORDER BY n")]


def _insert(db: Path, n: int) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute("INSERT INTO t VALUES (?)", (n,))
        conn.commit()
    finally:
        conn.close()


def _fork_root(folder: Path, name: str) -> Path:
    return folder.parent / f"{folder.name}.forks" / name


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_a_database_written_in_the_parent_during_the_check_is_not_clobbered(
    till: Till, folder: Path, journal: str
) -> None:
    db = folder / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA journal_mode={journal}")
        conn.execute("CREATE TABLE t (n INTEGER)")
        conn.execute("INSERT INTO t VALUES (0)")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    _insert(_fork_root(folder, "k") / "app.db", 1)  # the fork's change
    # The check itself writes the parent's database: an edit landing while the check runs.
    writer = (
        f"import sqlite3; c = sqlite3.connect({str(db)!r}); "
        "c.execute('INSERT INTO t VALUES (2)'); c.commit()"
    )
    check = f"{shlex.quote(sys.executable)} -c {shlex.quote(writer)}"
    run = till("--json", "merge", "k", "--check", check)
    assert run.code == 3, run.stdout + run.stderr  # landed nothing: it changed meanwhile
    assert json.loads(run.stdout)["conflicts"][0]["path"] == "app.db"
    assert _rows(db) == [0, 2]  # the parent's row is still there, the fork's did not land
    # Merged again, both sides changed the database: a conflict, the parent's row kept.
    again = till("--json", "merge", "k")
    assert again.code == 3 and _rows(db) == [0, 2]


def test_a_folder_the_fork_stops_capturing_is_not_deleted_from_the_parent(
    till: Till, folder: Path
) -> None:
    (folder / "data").mkdir()
    (folder / "data" / "c.csv").write_text("secret\n")
    (folder / "keep.txt").write_text("keep\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / ".tillagepolicy").write_text("data/\n")
    (fork / "new.txt").write_text("from the fork\n")
    merged = till.json("merge", "k")
    assert (folder / "data" / "c.csv").read_text() == "secret\n"
    assert (folder / "new.txt").read_text() == "from the fork\n"  # the rest still merges
    assert merged["landed"] is True


def test_a_folder_the_parent_leaves_out_is_not_merged_in_from_the_fork(
    till: Till, folder: Path
) -> None:
    (folder / ".tillagepolicy").write_text("scratch/\n")
    (folder / "keep.txt").write_text("keep\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    fork = _fork_root(folder, "k")
    (fork / ".tillagepolicy").write_text("")  # the fork captures scratch/ ...
    (fork / "scratch").mkdir()
    (fork / "scratch" / "big.bin").write_text("fork's scratch\n")
    (folder / "scratch").mkdir()
    (folder / "scratch" / "big.bin").write_text("parent's scratch\n")
    till.json("merge", "k")
    # ... but the parent never did: its own scratch/ is left as it is.
    assert (folder / "scratch" / "big.bin").read_text() == "parent's scratch\n"


@pytest.mark.process
def test_a_merge_killed_during_its_check_leaves_no_copy_of_the_workspace(
    till: Till, folder: Path
) -> None:
    """(issue 21, item 4) The check's scratch copy holds the whole folder, `.env` included: a
    merge killed while its check runs must not leave it behind; the next command sweeps it."""
    (folder / ".env").write_text("SECRET=1\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "k")
    (_fork_root(folder, "k") / "new.txt").write_text("new\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", "merge", "k", "--check", "sleep 30"],
        cwd=folder,
        env=till.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        scratch: list[Path] = []
        deadline = time.monotonic() + 30
        while not scratch and time.monotonic() < deadline:
            scratch = [p for p in folder.parent.glob(f".{folder.name}.merge-check-*")]
            time.sleep(0.05)
        assert scratch, "the check never started"
        while not list(scratch[0].rglob(".env")) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the merge and its check
        proc.wait()
    assert scratch[0].exists()  # killed: nothing removed it
    till.json("status")  # the next command of any kind
    assert not scratch[0].exists()
    assert not (folder / "new.txt").exists()  # and the merge landed nothing


def test_an_undone_merge_can_be_merged_again(till: Till, folder: Path) -> None:
    """(issue 21, item 5) Rewinding the parent to the merge's undo puts the fork's base back:
    the fork's work is its own change again, `forks` counts it, and merging lands it."""
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "f")
    (_fork_root(folder, "f") / "work.txt").write_text("the fork's work\n")
    merged = till.json("merge", "f")
    assert merged["landed"] and (folder / "work.txt").exists()
    till.json("rewind", merged["undo"], "--yes")
    assert not (folder / "work.txt").exists()
    listed = till.json("forks")
    assert [f["changed_paths"] for f in listed["forks"]] == [1]
    again = till.json("merge", "f")
    assert again["landed"] and again["changes"] == 1
    assert (folder / "work.txt").read_text() == "the fork's work\n"


def test_a_rewind_of_some_paths_leaves_the_fork_base_alone(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    till.json("fork", "f")
    (_fork_root(folder, "f") / "work.txt").write_text("work\n")
    merged = till.json("merge", "f")
    till.json("rewind", merged["undo"], "--paths", "a.txt", "--yes")
    assert [f["changed_paths"] for f in till.json("forks")["forks"]] == [0]


def test_a_session_revert_to_before_a_merge_puts_the_fork_base_back(
    till: Till, folder: Path
) -> None:
    """(issue 21, item 5) A session revert is a whole-folder rewind: the merge it undoes is
    undone for the fork too, so the fork's work can land again."""
    (folder / "a.txt").write_text("a\n")
    till.json("watch", "--no-daemon")
    start = till.json("session", "start", "s1")["commit"]["id"]
    till.json("fork", "f")
    (_fork_root(folder, "f") / "work.txt").write_text("the fork's work\n")
    assert till.json("merge", "f")["landed"]

    till.json("session", "revert", start, "--yes")

    assert not (folder / "work.txt").exists()
    assert [f["changed_paths"] for f in till.json("forks")["forks"]] == [1]
    assert till.json("merge", "f")["changes"] == 1
