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
    """A 24 MiB tmpfs for the store, unmounted afterwards."""
    yield from mounted_tmpfs(tmp_path / "disk", "24m")


def fill(fs: Path, leave: int = 0) -> Path:
    """Writes a file on `fs` until about `leave` bytes are free (none: until the file system
    answers ENOSPC); returns it."""
    filler = fs / "filler"
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
        f.write(b"\0" * max(0, free(fs) - leave))
        while not leave:
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


T0 = 1_767_225_600
MiB = 1 << 20


def _old_history(till: Till, folder: Path, *, dead_pack: bool) -> tuple[str, bytes]:
    """Three seals in one hour, the first with `keep.bin` (which stays) and `a.bin` in one
    pack, then `a.bin` changed twice (4 MB each: a pack with nothing live once the first two
    are removed, unless `dead_pack` is false). A gc three days on removes the first two and
    must copy `keep.bin` out of the first pack. Returns the head and keep.bin's bytes."""
    keep = os.urandom(4 * MiB)
    (folder / "keep.bin").write_bytes(keep)
    (folder / "a.bin").write_bytes(os.urandom(4 * MiB))
    till.json("watch", "--no-daemon", env={"TILLAGE_NOW": str(T0)})
    (folder / "a.bin").write_bytes(os.urandom(4 * MiB) if dead_pack else b"small")
    till.json("snap", env={"TILLAGE_NOW": str(T0 + 60)})
    (folder / "a.bin").write_bytes(b"last")
    head = till.json("snap", env={"TILLAGE_NOW": str(T0 + 120)})["snapshot"]["id"]
    return head, keep


def _whole(till: Till, head: str, keep: bytes) -> None:
    assert till.json("verify")["ok"] is True
    assert [s["id"] for s in till.json("timeline")["snapshots"]] == [head]
    run = till("cat", head, "keep.bin")
    assert run.code == 0 and run.stdout.encode("utf-8", "surrogateescape") == keep


LATER = {"TILLAGE_NOW": str(T0 + 3 * 86_400)}


def test_a_gc_on_a_nearly_full_disk_frees_the_dead_packs_before_copying(
    disk: Path, user_home: Path, folder: Path
) -> None:
    till = Till(disk / "store", user_home, folder)
    head, keep = _old_history(till, folder, dead_pack=True)
    before = till.json("status")["store"]["bytes"]
    fill(disk, leave=2 * MiB)  # less than keep.bin's copy needs

    done = till.json("gc", "--yes", env=LATER)

    assert done["snapshots_removed"] == 2
    assert done["store_bytes_after"] < before - 7 * MiB
    _whole(till, head, keep)


def test_a_gc_that_cannot_copy_leaves_the_store_whole_and_the_next_one_finishes(
    disk: Path, user_home: Path, folder: Path
) -> None:
    till = Till(disk / "store", user_home, folder)
    head, keep = _old_history(till, folder, dead_pack=False)
    filler = fill(disk, leave=2 * MiB)

    run = till("--json", "gc", "--yes", env=LATER)

    assert run.code == 1 and run.error["code"] == DISK_FULL, run
    _whole(till, head, keep)  # its decision stands; every kept byte is still there
    filler.unlink()
    size = till.json("status")["store"]["bytes"]
    done = till.json("gc", "--yes", env=LATER)
    assert done["bytes_reclaimed"] > 3 * MiB and done["store_bytes_after"] < size - 3 * MiB
    _whole(till, head, keep)
