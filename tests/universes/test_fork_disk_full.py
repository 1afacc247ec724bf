"""A fork onto a disk that fills up: a structured disk_full naming that disk (not the
workspace's), nothing left behind, no fork recorded."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root needed; skipped, saying why, elsewhere)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_fork_onto_a_full_disk_names_that_disk_and_leaves_nothing(
    till: Till, project: Path, tiny_disk: Path
) -> None:
    (project / "big.bin").write_bytes(os.urandom(200_000))
    till.json("snap")
    run = till("--json", "fork", "full", "--destination", str(tiny_disk / "full"))
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32110, "store.disk_full")
    assert str(tiny_disk) in run.error["message"]
    assert run.error["details"]["disk"] == "destination"
    assert os.listdir(tiny_disk) == []
    assert till.json("forks")["forks"] == []
    assert list((till.home / "intents").iterdir()) == []
