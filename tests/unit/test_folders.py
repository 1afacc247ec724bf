"""Folder operations by descriptor: the placement hint is set, then taken back exactly."""

from __future__ import annotations

import array
import fcntl
import os
from pathlib import Path

import pytest

from tillage.platform.folders import remove_tree, spread_new_folders

TOPDIR = 0x00020000


def _flags(fd: int) -> int:
    flags = array.array("i", [0])
    fcntl.ioctl(fd, 0x80086601, flags, True)
    return flags[0]


def test_spreading_marks_the_folder_until_it_is_taken_back(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            before = _flags(fd)
        except OSError:
            pytest.skip("no inode attributes on this file system")
        restore = spread_new_folders(fd)
        if restore is None:
            pytest.skip("this file system does not take the top-of-hierarchy attribute")
        assert _flags(fd) & TOPDIR
        restore()
        assert _flags(fd) == before
    finally:
        os.close(fd)


def test_a_folder_already_marked_by_its_owner_is_left_alone(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            flags = array.array("i", [_flags(fd) | TOPDIR])
            fcntl.ioctl(fd, 0x40086602, flags, True)
        except OSError:
            pytest.skip("no top-of-hierarchy attribute on this file system")
        assert spread_new_folders(fd) is None
        assert _flags(fd) & TOPDIR, "the owner's own mark stays"
    finally:
        os.close(fd)


def test_remove_tree_removes_read_only_folders_inside(tmp_path: Path) -> None:
    (tmp_path / "t" / "ro").mkdir(parents=True)
    (tmp_path / "t" / "ro" / "f").write_text("x")
    (tmp_path / "t" / "ro").chmod(0o555)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        remove_tree(fd, "t")
    finally:
        os.close(fd)
    assert not (tmp_path / "t").exists()
