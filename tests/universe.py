"""Fixtures of the universe tests (forks, merge, radar, bisect; each folder's conftest takes
them from here): an attached project, and a reflink-capable XFS loop file system (root and
mkfs.xfs needed; skipped, saying why, elsewhere). H4's bench copies the recipe in `xfs_loop`."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.helpers import make_project

XFS_SIZE = 1 << 30


def mount_xfs_loop(image: Path, mountpoint: Path) -> str | None:
    """Makes a 1 GiB XFS file system in the file `image` and mounts it (loop) at
    `mountpoint`; returns why it could not, or None when it is mounted."""
    if os.geteuid() != 0:
        return "reflink test needs root to mount an XFS loop file system"
    mkfs = shutil.which("mkfs.xfs") or (
        "/usr/sbin/mkfs.xfs" if os.path.exists("/usr/sbin/mkfs.xfs") else None
    )
    if mkfs is None:
        return "reflink test needs mkfs.xfs (xfsprogs), which is not installed"
    with open(image, "wb") as f:
        f.truncate(XFS_SIZE)
    made = subprocess.run([mkfs, "-q", "-f", str(image)], capture_output=True, text=True)
    if made.returncode != 0:
        return f"mkfs.xfs failed: {made.stderr.strip()}"
    mountpoint.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-o", "loop", str(image), str(mountpoint)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        return f"cannot mount an XFS loop file system here: {mounted.stderr.strip()}"
    return None


def unmount(mountpoint: Path) -> None:
    """Unmounts (lazily when something still holds it, so a teardown never hangs)."""
    done = subprocess.run(["umount", str(mountpoint)], capture_output=True)
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)


@pytest.fixture(scope="session")
def xfs_loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A mounted, empty XFS file system with reflinks, for the session; skipped with the
    reason (visible with `pytest -rs`) where it cannot be made."""
    base = tmp_path_factory.mktemp("xfs")
    mountpoint = base / "mnt"
    why = mount_xfs_loop(base / "xfs.img", mountpoint)
    if why is not None:
        pytest.skip(why)
    try:
        yield mountpoint
    finally:
        unmount(mountpoint)
        (base / "xfs.img").unlink(missing_ok=True)


@pytest.fixture
def project(till: Till, folder: Path) -> Path:
    """An attached realistic project (git repo, .env, ignored files, SQLite db, symlink)."""
    make_project(folder)
    till.json("watch", "--no-daemon")
    return folder
