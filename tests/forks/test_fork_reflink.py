"""The reflink driver on a file system that has it (an XFS loop mount: root and mkfs.xfs
needed, skipped visibly elsewhere): a fork shares its blocks, so it costs about nothing."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Till
from tests.helpers import make_project, manifest
from tillage.platform.clone import copy_tree, probe


def test_on_xfs_a_fork_is_reflinked_and_costs_almost_no_disk(
    xfs_loop: Path, tmp_path: Path
) -> None:
    root = xfs_loop / f"case-{os.getpid()}-{tmp_path.name}"
    user_home = root / "home"
    folder = user_home / "project"
    folder.mkdir(parents=True)
    make_project(folder)
    (folder / "model.bin").write_bytes(os.urandom(20 << 20))
    till = Till(tmp_path / "store", user_home, folder)
    till.json("watch", "--no-daemon")
    assert till.json("exec", "--plan")["plan"]["driver"] == "reflink"

    doc = till.json("fork", "cow")["fork"]

    assert doc["driver"] == "reflink"
    assert manifest(Path(doc["path"])) == manifest(folder)
    (listed,) = till.json("forks")["forks"]
    assert listed["disk_bytes"] < doc["bytes"] * 0.05  # shares (almost) every block
    # A write in the fork un-shares what it wrote, and only that.
    with open(Path(doc["path"]) / "model.bin", "r+b") as f:
        f.write(os.urandom(1 << 20))
        os.fsync(f.fileno())
    (after,) = till.json("forks")["forks"]
    assert (1 << 20) <= after["disk_bytes"] < (4 << 20)


def test_probe_finds_reflink_on_xfs_and_copy_tree_uses_it(xfs_loop: Path, tmp_path: Path) -> None:
    src = xfs_loop / f"probe-{tmp_path.name}"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f").write_bytes(os.urandom(1 << 20))
    assert probe(src, xfs_loop) == "reflink"
    stats = copy_tree(src, xfs_loop / f"probe-copy-{tmp_path.name}")
    assert stats.driver == "reflink"
    assert (xfs_loop / f"probe-copy-{tmp_path.name}" / "d" / "f").read_bytes() == (
        src / "d" / "f"
    ).read_bytes()
