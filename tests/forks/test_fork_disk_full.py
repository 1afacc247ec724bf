"""A fork onto a disk that fills up (the 1 MiB `small_fs` of tests/conftest.py): a structured
disk_full naming that disk (not the workspace's), nothing left behind, no fork recorded."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Till


def test_a_fork_onto_a_full_disk_names_that_disk_and_leaves_nothing(
    till: Till, project: Path, small_fs: Path
) -> None:
    (project / "big.bin").write_bytes(os.urandom(3 << 20))  # more than the 1 MiB disk
    till.json("snap")
    run = till("--json", "fork", "full", "--destination", str(small_fs / "full"))
    assert run.code == 1
    assert (run.error["code"], run.error["name"]) == (-32110, "store.disk_full")
    assert str(small_fs) in run.error["message"]
    assert run.error["details"]["disk"] == "destination"
    assert os.listdir(small_fs) == []
    assert till.json("forks")["forks"] == []
    assert list((till.home / "intents").iterdir()) == []
