"""The whole round through a folder remote, as two machines see it: add, push, clone, pull
(up to date, fast-forward keeping inodes, diverged), merge the incoming, push again."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Till


def machines(tmp_path: Path, till: Till) -> tuple[Till, Till]:
    other = Till(tmp_path / "home-b", till.user_home, tmp_path)
    return till, other


def test_a_round_trip_between_two_machines(tmp_path: Path, till: Till, folder: Path) -> None:
    a, b = machines(tmp_path, till)
    remote = tmp_path / "remote"
    (folder / "notes.txt").write_text("one\n")
    (folder / ".env").write_text("SECRET=hunter2\n")
    a.json("watch", "--no-daemon")
    added = a.json("remote", "add", str(remote))
    key = added["key"]
    assert len(key) == 64 and added["name"] == "origin"
    assert "key" not in a.json("remote", "list")["remotes"][0]
    first = a.json("sync", "--push")
    assert first["uploaded_objects"] > 0 and first["reused_objects"] == 0

    cloned = b.json("clone", str(remote), "b", "--key", key, cwd=tmp_path)
    copy = tmp_path / "b"
    assert cloned["workspace"] == str(copy)
    assert (copy / ".env").read_text() == "SECRET=hunter2\n"
    assert b.json("sync", "--pull", cwd=copy)["disposition"] == "up_to_date"

    (folder / "later.txt").write_text("two\n")
    again = a.json("sync", "--push")
    assert again["reused_objects"] >= 1  # only what changed goes up
    inode = os.stat(copy / "notes.txt").st_ino
    pulled = b.json("sync", "--pull", cwd=copy)
    assert pulled["disposition"] == "fast_forwarded"
    assert (copy / "later.txt").read_text() == "two\n"
    assert os.stat(copy / "notes.txt").st_ino == inode  # unchanged files keep their inodes

    (copy / "notes.txt").write_text("one, edited on b\n")
    (folder / "later.txt").write_text("two, edited on a\n")
    a.json("sync", "--push")
    run = b("--json", "sync", "--pull", cwd=copy)
    assert run.code == 3
    assert run.doc["disposition"] == "diverged"
    assert (copy / "later.txt").read_text() == "two\n"  # nothing changed in the folder
    refused = b("--json", "sync", "--push", cwd=copy)
    assert refused.code == 1 and refused.error["name"] == "sync.pull_first"

    merged = b.json("merge", "--snapshot", run.doc["remote_snapshot"], cwd=copy)
    assert merged["landed"] is True
    b.json("sync", "--push", cwd=copy)
    assert a.json("sync", "--pull")["disposition"] == "fast_forwarded"
    assert (folder / "notes.txt").read_text() == "one, edited on b\n"
    assert (folder / "later.txt").read_text() == "two, edited on a\n"

    for path in remote.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"hunter2" not in data and b"notes.txt" not in data


def test_a_wrong_key_is_integrity_and_writes_nothing(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    a, b = machines(tmp_path, till)
    remote = tmp_path / "remote"
    (folder / "a.txt").write_text("a")
    a.json("watch", "--no-daemon")
    a.json("remote", "add", str(remote))
    a.json("sync", "--push")
    run = b("--json", "clone", str(remote), "b", "--key", "ab" * 32, cwd=tmp_path)
    assert run.code == 1 and run.error["name"] == "integrity"
    assert not (tmp_path / "b").exists()
    bad = b("--json", "clone", str(remote), "c", "--key", "xyz", cwd=tmp_path)
    assert bad.code == 1 and bad.error["name"] == "sync.bad_key"


def test_work_that_changes_nothing_still_replaces_another_runs_result(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    remote = tmp_path / "remote"
    (folder / "a.txt").write_text("a")
    till.json("watch", "--no-daemon")
    key = till.json("remote", "add", str(remote))["key"]
    till.json("sync", "--push", "--ref", "in-1")
    (folder / "a.txt").write_text("b")
    till.json("sync", "--push", "--ref", "in-2")
    common = ("--remote", str(remote), "--key", key, "--result-ref", "out")
    first = till.json("work", *common, "--ref", "in-1", "--", "echo made > made.txt")
    second = till.json("work", *common, "--ref", "in-2", "--", "true")
    assert second["result"] != first["result"]
    other = Till(tmp_path / "home-b", till.user_home, tmp_path)
    other.json("clone", str(remote), "c", "--key", key, "--ref", "out", cwd=tmp_path)
    assert (tmp_path / "c" / "a.txt").read_text() == "b"
    assert not (tmp_path / "c" / "made.txt").exists()
