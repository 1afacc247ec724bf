"""(issue 26) A store whose disk is full: every read still answers its document (SQLite cannot
make the index's WAL side files there, so the index is read into memory, as for a read-only
store), a write answers store.disk_full, and a gc with a little space left frees what needs
no space first. Needs a small tmpfs (root); skipped with the reason otherwise."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till, mounted_tmpfs

DISK_FULL = -32110


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs for the store, unmounted afterwards."""
    yield from mounted_tmpfs(tmp_path / "disk", "8m")


def fill(fs: Path, name: str = "filler") -> Path:
    """Writes a file on `fs` until the file system answers ENOSPC; returns it."""
    filler = fs / name
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)
    return filler


def free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_every_read_answers_on_a_full_store_disk(disk: Path, user_home: Path, folder: Path) -> None:
    till = Till(disk / "store", user_home, folder, process=True)
    (folder / "a.txt").write_text("one\n")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    (folder / "a.txt").write_text("two\n")
    head = till.json("snap")["snapshot"]["id"]
    fill(disk)
    assert free(disk) == 0

    assert [s["id"] for s in till.json("timeline")["snapshots"]] == [head, first]
    assert till.json("status")["head"]["id"] == head
    assert till.json("show", "head")["snapshot"]["id"] == head
    assert till.json("cat", first, "a.txt")["size"] == 4
    assert [c["path"] for c in till.json("diff", first, head)["changes"]] == ["a.txt"]
    (folder / "a.txt").write_text("three\n")
    assert till.json("rewind", first, "--dry-run")["snapshot"]["id"] == first
    assert till.json("gc", "--dry-run")["dry_run"] is True
    assert till.json("verify")["ok"] is True
    assert till.json("budget")["over_budget"] is True
    # A write cannot: it says the disk is full, and nothing was lost.
    run = till("--json", "snap")
    assert run.code == 1 and run.error["code"] == DISK_FULL, run
    assert (folder / "a.txt").read_text() == "three\n"
