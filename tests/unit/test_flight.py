"""Writes a rewind hands to its pool: through fds of their own, bounded, never leaking one."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tillage.core.rewind_plan import Action, Op
from tillage.workspace.journal.flight import Flight, Outcome, Placed


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _folder(tmp_path: Path, name: str) -> int:
    (tmp_path / name).mkdir()
    return os.open(tmp_path / name, os.O_RDONLY | os.O_DIRECTORY)


def _group(fd: int, *names: str) -> list[Placed]:
    return [(Action(Op.WRITE, name, None), fd, name) for name in names]


def _write_files(group: list[Placed]) -> Outcome:
    for _action, fd, name in group:
        made = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(made, name.encode())
        os.close(made)
    return [action for action, _fd, _name in group], []


def test_a_group_in_flight_writes_into_its_folder_after_the_caller_closed_its_fd(
    tmp_path: Path,
) -> None:
    """The plan's thread closes its oldest folder fds as it goes on; a number it closed may be
    reused at once by another folder, and a write through it would land there instead."""
    before = _open_fds()
    go = threading.Event()
    landed: list[Outcome] = []

    def held_write(group: list[Placed]) -> Outcome:
        assert go.wait(10)
        return _write_files(group)

    a = _folder(tmp_path, "a")
    with ThreadPoolExecutor(2) as pool, Flight(pool, 4, held_write, landed.append) as flight:
        flight.submit(_group(a, "big.bin"))
        os.close(a)
        b = _folder(tmp_path, "b")  # most likely gets the number `a` had
        go.set()
        flight.finish()
        os.close(b)
    assert (tmp_path / "a" / "big.bin").read_bytes() == b"big.bin"
    assert not (tmp_path / "b" / "big.bin").exists()
    assert [[a.path for a in written] for written, _retry in landed] == [["big.bin"]]
    assert _open_fds() == before


def test_no_more_than_the_limit_of_groups_is_in_flight(tmp_path: Path) -> None:
    lock = threading.Lock()
    running = [0]
    most = [0]

    def slow_write(group: list[Placed]) -> Outcome:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return _write_files(group)

    fd = _folder(tmp_path, "a")
    landed: list[Outcome] = []
    with ThreadPoolExecutor(6) as pool, Flight(pool, 2, slow_write, landed.append) as flight:
        for n in range(8):
            flight.submit(_group(fd, f"f{n}"))
            assert running[0] <= 2
        flight.finish()
    os.close(fd)
    assert most[0] == 2
    assert sorted(os.listdir(tmp_path / "a")) == sorted(f"f{n}" for n in range(8))
    assert len(landed) == 8


def test_an_error_in_a_group_is_raised_and_the_groups_that_never_ran_give_their_fds_back(
    tmp_path: Path,
) -> None:
    before = _open_fds()
    started = threading.Event()

    def failing_write(group: list[Placed]) -> Outcome:
        started.set()
        time.sleep(0.05)
        if group[0][2] == "bad":
            raise OSError(5, "Input/output error")
        return _write_files(group)

    fd = _folder(tmp_path, "a")
    with (
        ThreadPoolExecutor(1) as pool,
        pytest.raises(OSError, match="Input/output"),
        Flight(pool, 8, failing_write, lambda outcome: None) as flight,
    ):
        flight.submit(_group(fd, "bad"))
        for n in range(5):
            flight.submit(_group(fd, f"never{n}"))  # queued behind it, on one thread
        assert started.wait(10)
        flight.finish()
    os.close(fd)
    assert _open_fds() == before
    assert len(os.listdir(tmp_path / "a")) < 5  # the queued ones were cancelled, not all run


def test_a_group_that_cannot_get_its_fds_is_refused_and_keeps_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of fds half-way through a group's copies: the ones made are closed again."""
    import errno

    from tillage.workspace.journal import flight as module

    a, b = _folder(tmp_path, "a"), _folder(tmp_path, "b")
    before = _open_fds()
    real_dup = os.dup
    calls = [0]

    def dup(fd: int) -> int:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_dup(fd)

    monkeypatch.setattr(module.os, "dup", dup)
    with (
        ThreadPoolExecutor(1) as pool,
        pytest.raises(OSError, match="Too many"),
        Flight(pool, 4, _write_files, lambda outcome: None) as flight,
    ):
        flight.submit([*_group(a, "one"), *_group(b, "two")])
    assert _open_fds() == before
    os.close(a)
    os.close(b)
