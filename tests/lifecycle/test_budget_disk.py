"""The budget against a real small disk: a store on a tmpfs keeps its reserve free by itself,
seal after seal, and never removes the head to do it."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till, mounted_tmpfs

T0 = 1_767_225_600
DAY = 86_400
MiB = 1 << 20


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs for the store, unmounted afterwards."""
    yield from mounted_tmpfs(tmp_path / "disk", "48m")


def free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_seals_keep_the_reserve_free_on_a_small_disk(
    disk: Path, user_home: Path, folder: Path
) -> None:
    till = Till(disk / "store", user_home, folder)
    rng = random.Random(11)
    (folder / "notes.txt").write_text("keep me\n")
    (folder / "blob.bin").write_bytes(rng.randbytes(6 * MiB))
    first = till.json("watch", "--no-daemon", env={"TILLAGE_NOW": str(T0)})["head"]["id"]
    till.json("budget", "--reserve-free", "20m")
    lows = []
    for n in range(1, 9):
        (folder / "blob.bin").write_bytes(rng.randbytes(6 * MiB))
        (folder / "notes.txt").write_text(f"keep me {n}\n")
        till.json("snap", env={"TILLAGE_NOW": str(T0 + n * DAY)})
        lows.append(free(disk))
    # Without the budget, 9 times 6 MiB of incompressible bytes would have filled the 48 MiB disk.
    assert min(lows) >= 20 * MiB, [x // MiB for x in lows]
    snaps = till.json("timeline")["snapshots"]
    assert snaps[0]["label"] is None and len(snaps) < 9
    assert first not in {s["id"] for s in snaps}
    # The head restores whole.
    head = snaps[0]["id"]
    want = (folder / "blob.bin").read_bytes()
    (folder / "blob.bin").unlink()
    till.json("rewind", head, "--yes")
    assert (folder / "blob.bin").read_bytes() == want
    budget = till.json("budget")
    assert budget["over_budget"] is False
    assert budget["filesystem_free_bytes"] >= 20 * MiB


def test_a_reserve_the_store_cannot_restore_does_not_cost_the_history(
    disk: Path, user_home: Path, folder: Path
) -> None:
    """Something else filled the disk: removing history would not make room, so it stays."""
    till = Till(disk / "store", user_home, folder)
    (folder / "a.txt").write_text("1")
    till.json("watch", "--no-daemon", env={"TILLAGE_NOW": str(T0)})
    for n in range(1, 4):
        (folder / "a.txt").write_text(str(n + 1))
        till.json("snap", env={"TILLAGE_NOW": str(T0 + n * 3600)})
    hog = disk / "hog.bin"
    hog.write_bytes(b"\0" * (40 * MiB))  # tmpfs counts written zeros
    (folder / "a.txt").write_text("5")
    till.json("snap", env={"TILLAGE_NOW": str(T0 + 4 * 3600)})
    status = till.json("status")
    assert status["budget"]["over_budget"] is True
    assert len(till.json("timeline")["snapshots"]) == 5
    hog.unlink()
