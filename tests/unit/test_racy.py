"""INV-8: a file touched within the timestamp granularity of a capture is re-read next time."""

from __future__ import annotations

import os
from pathlib import Path

from tillage.workspace.capture import Walker
from tillage.workspace.pathindex import PathIndex
from tillage.workspace.policy import Policy

START = 1_700_000_000_123_456_789


def _stat(mtime_ns: int, ctime_ns: int) -> os.stat_result:
    # st_mode, st_ino, st_dev, st_nlink, st_uid, st_gid, st_size, atime, mtime, ctime (seconds),
    # then the float and nanosecond fields os.stat_result accepts as its optional part.
    return os.stat_result(
        (0o100644, 1, 1, 1, 0, 0, 10, 0, mtime_ns // 10**9, ctime_ns // 10**9),
        {"st_mtime_ns": mtime_ns, "st_ctime_ns": ctime_ns, "st_atime_ns": 0},
    )


def _walker() -> Walker:
    return Walker(Path("/nowhere"), Policy([]), PathIndex(), None, Path("/tmp"), START)


def test_a_file_changed_just_before_the_capture_is_racy() -> None:
    assert _walker()._racy(_stat(START - 10_000_000, START - 10_000_000))


def test_a_file_whose_ctime_alone_is_recent_is_racy() -> None:
    assert _walker()._racy(_stat(START - 10**12, START - 1_000_000))


def test_a_file_changed_well_before_the_capture_is_not_racy() -> None:
    assert not _walker()._racy(_stat(START - 200_000_000, START - 200_000_000))


def test_whole_second_timestamps_widen_the_window() -> None:
    second = (START // 10**9 - 1) * 10**9  # about a second before, with no sub-second part
    assert _walker()._racy(_stat(second, second))
    assert not _walker()._racy(_stat(second - 5 * 10**9, second - 5 * 10**9))
