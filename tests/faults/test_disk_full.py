"""A store on a full file system: a public disk-full error, an untouched folder, a usable store.

Needs a tiny tmpfs (root and a kernel that lets us mount one); skipped cleanly otherwise.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.faults.harness import manifest, noise, rewind, verify_store, write_state

DISK_FULL = -32110


@pytest.fixture
def full_till(small_fs: Path, user_home: Path, folder: Path) -> Till:
    return Till(small_fs / "store", user_home, folder)


def _fill(fs: Path, leave: int) -> Path:
    """Fills the file system until about `leave` bytes are free; returns the filler."""
    filler = fs / "filler"
    st = os.statvfs(fs)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        f.write(b"\0" * max(0, free - leave))
    return filler


def test_a_snap_larger_than_the_free_space_answers_disk_full_and_touches_nothing(
    full_till: Till, folder: Path
) -> None:
    till = full_till
    write_state(folder, {"a.txt": b"a\n", "sub/b.txt": b"b\n"})
    first = till.json("watch", "--no-daemon")["head"]["id"]
    (folder / "huge.bin").write_bytes(noise(5, 2 * 1024 * 1024))
    before = manifest(folder)

    run = till("--json", "snap")

    assert run.code == 1, run
    assert run.error["code"] == DISK_FULL
    assert run.error["name"] == "store.disk_full"
    assert manifest(folder) == before
    status = till.json("status")
    assert status["head"]["id"] == first and status["snapshots"] == 1
    verify = verify_store(till)
    assert verify["damaged_snapshots"] == []
    assert all(p["object"].endswith(".pack") for p in verify["problems"]), verify
    # A rewind that cannot seal the present first must not touch the folder either.
    run = till("--json", "rewind", first, "--yes")
    assert run.code == 1 and run.error["code"] == DISK_FULL
    assert manifest(folder) == before
    assert till.json("cat", first, "sub/b.txt")["size"] == 2


def test_a_seal_that_ran_out_of_space_gives_the_space_back(full_till: Till, folder: Path) -> None:
    till = full_till
    write_state(folder, {"a.txt": b"a\n"})
    first = till.json("watch", "--no-daemon")["head"]["id"]
    used = till.json("status")["store"]["bytes"]
    (folder / "huge.bin").write_bytes(noise(5, 2 * 1024 * 1024))
    assert till("--json", "snap").error["code"] == DISK_FULL

    assert till.json("status")["store"]["bytes"] < used + 64 * 1024
    (folder / "huge.bin").unlink()
    (folder / "c.txt").write_bytes(b"c\n")
    state = manifest(folder)
    second = till.json("snap")["snapshot"]["id"]
    rewind(till, first)
    rewind(till, second)
    assert manifest(folder) == state


def test_however_little_space_is_left_a_snap_succeeds_or_answers_disk_full(
    full_till: Till, small_fs: Path, folder: Path
) -> None:
    till = full_till
    (folder / "a.txt").write_bytes(b"a\n")
    till.json("watch", "--no-daemon")
    for n, leave in enumerate((0, 8 * 1024, 32 * 1024, 64 * 1024, 128 * 1024)):
        (folder / f"n{n}.txt").write_bytes(noise(n, 3000))
        before = manifest(folder)
        filler = _fill(small_fs, leave)
        run = till("--json", "snap")
        filler.unlink()
        assert manifest(folder) == before
        assert "Traceback" not in run.stderr
        assert run.code == 0 or run.error["code"] == DISK_FULL, (leave, run)
        assert verify_store(till)["damaged_snapshots"] == []


def test_a_full_workspace_disk_is_named_as_the_workspace_not_the_store(
    small_fs: Path, tmp_path: Path, user_home: Path
) -> None:
    folder = small_fs / "project"
    folder.mkdir()
    till = Till(tmp_path / "store", user_home, folder)
    (folder / "big.bin").write_bytes(noise(9, 600 * 1024))
    first = till.json("watch", "--no-daemon")["head"]["id"]
    (folder / "big.bin").unlink()
    (folder / "note.txt").write_bytes(b"after\n")
    filler = _fill(small_fs, 64 * 1024)
    before = manifest(folder)

    run = till("--json", "rewind", first, "--yes")

    assert run.code == 1, run
    assert run.error["name"] == "workspace.disk_full", run.error
    assert str(folder) in run.error["message"]
    assert manifest(folder) == before, "the rewind failed before it touched the folder"
    filler.unlink()
    rewind(till, first)
    assert (folder / "big.bin").read_bytes() == noise(9, 600 * 1024)
