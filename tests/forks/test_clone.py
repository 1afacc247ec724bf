"""copy_tree, plan_tree, probe: byte-exact copies with metadata, never out of the source."""

from __future__ import annotations

import errno
import os
import socket
import stat
from pathlib import Path

import pytest

from tests.helpers import (
    DEEP_NAMES,
    SPARSE_SIZE,
    allocated,
    digest,
    make_project,
    make_sparse,
    manifest,
    open_deep,
    read_deep,
    write_at,
)
from tillage.platform.clone import DRIVERS, copy_tree, plan_tree, probe


def _xattr_ok(path: Path) -> bool:
    try:
        os.setxattr(path, "user.tillage-test", b"1")
    except OSError:
        return False
    return True


def test_a_copy_is_byte_exact_with_modes_mtimes_links_and_a_git_repo(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    make_project(src)
    (src / "ro").mkdir()
    (src / "ro" / "f").write_text("read only folder\n")
    (src / "ro").chmod(0o555)
    (src / "secret").write_text("x")
    (src / "secret").chmod(0o600)

    stats = copy_tree(src, tmp_path / "dst")

    assert manifest(tmp_path / "dst") == manifest(src)
    assert stats.driver in DRIVERS
    assert stats.links == 1
    assert stat.S_IMODE(os.stat(tmp_path / "dst" / "ro").st_mode) == 0o555
    assert os.stat(tmp_path / "dst" / "ro").st_mtime_ns == os.stat(src / "ro").st_mtime_ns
    assert os.stat(tmp_path / "dst").st_mtime_ns == os.stat(src).st_mtime_ns
    files, total = plan_tree(src)
    assert (files, total) == (stats.files, stats.bytes)


def test_hard_links_stay_links_and_specials_are_left_out_and_counted(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir()
    (src / "a" / "one").write_bytes(b"shared inode\n")
    os.link(src / "a" / "one", src / "b" / "two")
    os.mkfifo(src / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(src / "sock"))
    try:
        stats = copy_tree(src, tmp_path / "dst")
    finally:
        sock.close()
    dst = tmp_path / "dst"
    assert os.stat(dst / "a" / "one").st_ino == os.stat(dst / "b" / "two").st_ino
    assert os.stat(dst / "a" / "one").st_ino != os.stat(src / "a" / "one").st_ino
    assert (dst / "b" / "two").read_bytes() == b"shared inode\n"
    assert stats.hardlinks == 1
    assert stats.skipped_special == 2
    assert not (dst / "fifo").exists()
    assert not (dst / "sock").exists()


def test_a_symlinked_folder_is_copied_as_a_link_and_never_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private").write_text("never copied\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "escape").symlink_to(outside)
    (src / "dangling").symlink_to("/nonexistent/target")

    copy_tree(src, tmp_path / "dst")

    assert os.readlink(tmp_path / "dst" / "escape") == str(outside)
    assert os.readlink(tmp_path / "dst" / "dangling") == "/nonexistent/target"
    assert plan_tree(src) == (0, 0)


def test_skip_leaves_out_files_and_whole_subtrees_by_relative_path(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / ".tillage" / "deep").mkdir(parents=True)
    (src / ".tillage" / "deep" / "x").write_text("x")
    (src / "keep").mkdir()
    (src / "keep" / "a").write_text("a")
    (src / "keep" / "b").write_text("b")
    seen: list[str] = []

    def skip(rel: str) -> bool:
        seen.append(rel)
        return rel in (".tillage", "keep/b")

    copy_tree(src, tmp_path / "dst", skip=skip)

    assert sorted(p.name for p in (tmp_path / "dst").iterdir()) == ["keep"]
    assert [p.name for p in (tmp_path / "dst" / "keep").iterdir()] == ["a"]
    assert ".tillage/deep" not in seen
    assert plan_tree(src, skip=skip) == (1, 1)


def test_user_xattrs_are_copied(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("f")
    if not _xattr_ok(src / "f"):
        pytest.skip("this file system has no user xattrs")
    os.setxattr(src / "f", "user.origin", b"downloaded")
    copy_tree(src, tmp_path / "dst")
    assert os.getxattr(tmp_path / "dst" / "f", "user.origin") == b"downloaded"


@pytest.mark.parametrize("threads", [0, 3])
@pytest.mark.parametrize("driver", DRIVERS)
def test_every_driver_copies_exactly_falling_back_where_it_cannot_work(
    tmp_path: Path, driver: str, threads: int
) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "big").write_bytes(os.urandom(3 << 20))
    (src / "empty").write_bytes(b"")
    for i in range(150):  # more than one worker batch
        (src / "d" / f"f{i}").write_bytes(os.urandom(i * 7))
    stats = copy_tree(src, tmp_path / "dst", driver=driver, threads=threads)
    assert manifest(tmp_path / "dst") == manifest(src)
    assert stats.files == 152
    # The driver reported is the one that really copied: at or after the one asked for.
    assert DRIVERS.index(stats.driver) >= DRIVERS.index(driver)


def test_a_tree_deeper_than_path_max_is_copied_by_descriptor(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    fd = open_deep(src, create=True)
    try:
        write_at(fd, "leaf", b"at the bottom\n")
    finally:
        os.close(fd)
    stats = copy_tree(src, tmp_path / "dst")
    assert stats.dirs == len(DEEP_NAMES)
    assert read_deep(tmp_path / "dst", "leaf") == b"at the bottom\n"


def test_the_destination_must_not_exist(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    with pytest.raises(FileExistsError):
        copy_tree(tmp_path / "src", tmp_path / "dst")


def test_on_file_reports_stat_facts_before_and_after_each_copy(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a").write_text("a")
    facts: dict[str, tuple[os.stat_result, os.stat_result, os.stat_result]] = {}

    def on_file(
        rel: str, before: os.stat_result, after: os.stat_result, copy: os.stat_result
    ) -> None:
        facts[rel] = (before, after, copy)

    copy_tree(src, tmp_path / "dst", on_file=on_file)
    before, after, copy = facts["sub/a"]
    assert before.st_mtime_ns == after.st_mtime_ns == copy.st_mtime_ns
    assert copy.st_ino == os.stat(tmp_path / "dst" / "sub" / "a").st_ino


def test_probe_names_a_driver_and_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert probe(tmp_path / "a", tmp_path / "b") in DRIVERS
    assert list((tmp_path / "a").iterdir()) == []
    assert list((tmp_path / "b").iterdir()) == []


# Holes: a copy writes only the data of a sparse file (1 MiB of 256 MiB here), never its holes.
SPARSE_DISK_LIMIT = 4 << 20


@pytest.mark.parametrize("driver", ["copy_file_range", "copy"])
def test_a_sparse_file_is_copied_with_its_holes_by_every_driver_that_writes(
    tmp_path: Path, driver: str
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    whole = make_sparse(src / "disk.img")
    with open(src / "tail-hole.img", "wb") as f:  # data, then a hole up to the end
        f.write(os.urandom(1 << 20))
        f.truncate(64 << 20)
    with open(src / "all-hole.img", "wb") as f:
        f.truncate(32 << 20)
    if allocated(src / "disk.img") > SPARSE_DISK_LIMIT:
        pytest.skip("this file system does not keep holes")

    stats = copy_tree(src, tmp_path / "dst", driver=driver)

    dst = tmp_path / "dst"
    assert stats.driver == driver
    assert os.stat(dst / "disk.img").st_size == SPARSE_SIZE
    assert digest(dst / "disk.img") == whole
    assert allocated(dst / "disk.img") <= SPARSE_DISK_LIMIT
    for name in ("tail-hole.img", "all-hole.img"):
        assert os.stat(dst / name).st_size == os.stat(src / name).st_size
        assert digest(dst / name) == digest(src / name)
        assert allocated(dst / name) <= allocated(src / name) + (1 << 20)
    assert stats.bytes == SPARSE_SIZE + (64 << 20) + (32 << 20)


@pytest.mark.parametrize("driver", ["copy_file_range", "copy"])
def test_a_file_system_that_cannot_seek_by_holes_gets_a_whole_copy(
    tmp_path: Path, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    whole = make_sparse(src / "disk.img", 8 << 20)
    real_lseek = os.lseek

    def no_holes(fd: int, pos: int, how: int) -> int:
        if how in (os.SEEK_DATA, os.SEEK_HOLE):
            raise OSError(errno.EINVAL, "SEEK_DATA not supported")
        return real_lseek(fd, pos, how)

    monkeypatch.setattr(os, "lseek", no_holes)
    copy_tree(src, tmp_path / "dst", driver=driver, threads=0)
    assert digest(tmp_path / "dst" / "disk.img") == whole
