"""A tree beyond inotify's watch limit (issue 26): the watcher comes up rescanning, says which
folders it does not watch and how they are covered, gives back the watches it cannot use, and
an idle rescan writes nothing to the store.

The real limit is lowered in a user namespace of this test's own (`unshare -U -r`, then
/proc/sys/user/max_inotify_watches, which bounds only the processes in it): the machine's
fs.inotify.max_user_watches is never touched. Where no user namespace can be made, that test
is skipped; the knob's tests (TILLAGE_WATCH_MAX_WATCHES) run everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.watch.conftest import WatchTill, daemon_pids, wait_for
from tillage.watch.timing import RESCAN_INTERVAL

LIMIT = 64  # inotify watches in the test's user namespace
FOLDERS = 150


def _limited(limit: int) -> list[str] | None:
    """The argv prefix that runs a command with inotify's watch limit at `limit` (in a user
    namespace of its own), or None when this machine cannot make one."""
    setting = f"echo {limit} > /proc/sys/user/max_inotify_watches"
    try:
        probe = subprocess.run(
            ["unshare", "-U", "-r", "sh", "-c", setting], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if probe.returncode != 0:
        return None
    return ["unshare", "-U", "-r", "sh", "-c", f'{setting} && exec "$@"', "sh"]


def _folders(root: Path, count: int, files: int = 1) -> None:
    for i in range(count):
        d = root / f"d{i:03}" / "inner"
        d.mkdir(parents=True)
        for j in range(files):
            (d / f"f{j}.txt").write_text(f"{i} {j}\n")


def inotify_watches(pid: int) -> int:
    """How many inotify watches process `pid` holds (its fdinfo lists one line per watch)."""
    count = 0
    fds = Path(f"/proc/{pid}/fdinfo")
    for fd in os.listdir(fds):
        try:
            text = (fds / fd).read_text()
        except OSError:
            continue
        count += sum(1 for line in text.splitlines() if line.startswith("inotify wd:"))
    return count


def _rescan_watcher(status: dict[str, object]) -> dict[str, object]:
    assert status["watching"] is True
    watcher = status["watcher"]
    assert isinstance(watcher, dict)
    assert watcher["mode"] == "rescan", watcher
    assert "inotify allows" in str(watcher["reason"]), watcher
    assert watcher["unwatched"] == "every folder but the workspace folder itself", watcher
    assert watcher["rescan_every_s"] == RESCAN_INTERVAL
    assert watcher["watches"] == 1
    return watcher


@pytest.mark.slow  # waits for one periodic rescan (5 s)
def test_beyond_the_real_inotify_limit_the_watcher_comes_up_rescanning(
    wtill: WatchTill, folder: Path
) -> None:
    prefix = _limited(LIMIT)
    if prefix is None:
        pytest.skip("no user namespace here to lower inotify's watch limit in")
    _folders(folder, FOLDERS)
    run = subprocess.run(
        [*prefix, sys.executable, "-m", "tillage", "--json", "watch", "--debounce-ms", "50"],
        cwd=folder,
        env=wtill.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert json.loads(run.stdout)["watching"] is True
    watcher = _rescan_watcher(wtill.json("status"))
    assert "max_user_watches" in str(watcher["reason"]) and f"{LIMIT} here" in str(
        watcher["reason"]
    )
    [pid] = daemon_pids(wtill.home)
    # It gave back what it could not use: the workspace, cookie and store folders keep theirs.
    assert inotify_watches(pid) <= 3
    # The folders it does not watch are covered by the rescans.
    before = len(wtill.snapshots())
    (folder / f"d{FOLDERS - 1:03}" / "inner" / "late.txt").write_text("no event tells of this")

    def sealed_all() -> bool:
        snaps = wtill.snapshots()
        return len(snaps) > before and wtill.json("diff", snaps[0]["id"])["changes"] == []

    wait_for("a periodic rescan to seal the change", sealed_all, timeout=30)


def test_a_watcher_that_falls_back_to_rescans_gives_back_its_watches(
    wtill: WatchTill, folder: Path
) -> None:
    _folders(folder, FOLDERS)
    wtill.extra["TILLAGE_WATCH_MAX_WATCHES"] = str(LIMIT)
    assert wtill.json("watch")["watching"] is True
    [pid] = daemon_pids(wtill.home)
    assert inotify_watches(pid) <= 3  # not the LIMIT it held when it ran out
    _rescan_watcher(wtill.json("status"))


def _store_files(home: Path) -> dict[str, tuple[int, int]]:
    """Every file of the store but its run folder (log, socket, cookies): (size, mtime_ns).
    SQLite's shared-memory file and write-ahead log come and go with its connections (their
    writes are in the process's byte count, _written)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(home):
        if Path(dirpath) == home and "run" in dirnames:
            dirnames.remove("run")
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if not name.endswith(("-shm", "-wal")):
                out[os.path.relpath(os.path.join(dirpath, name), home)] = (
                    st.st_size,
                    st.st_mtime_ns,
                )
    return out


def _written(pid: int) -> int:
    """The bytes process `pid` has passed to write(2) and its kin (not sockets' send)."""
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(io["wchar"])


@pytest.mark.slow  # waits for three periodic rescans (15 s)
def test_an_idle_rescan_writes_nothing_to_the_store(wtill: WatchTill, folder: Path) -> None:
    _folders(folder, 100, files=30)  # 3,000 files
    wtill.extra["TILLAGE_WATCH_MAX_WATCHES"] = "1"
    assert wtill.json("watch", "--debounce-ms", "50")["watching"] is True
    assert wtill.json("status")["watcher"]["mode"] == "rescan"
    [pid] = daemon_pids(wtill.home)

    def rescans_after(count: int) -> bool:
        return bool(wtill.rpc("tillage.ping")["seal_attempts"] >= count)

    first = wtill.rpc("tillage.ping")["seal_attempts"]
    wait_for("a first rescan", lambda: rescans_after(first + 1), timeout=30)
    before, written = _store_files(wtill.home), _written(pid)
    counted = wtill.rpc("tillage.ping")["seal_attempts"]
    wait_for("two more rescans", lambda: rescans_after(counted + 2), timeout=30)
    assert _store_files(wtill.home) == before
    # SQLite's set-up of a connection's shared-memory file (eight 1-byte writes) is all.
    done = wtill.rpc("tillage.ping")["seal_attempts"] - counted
    assert _written(pid) - written <= 8 * (done + 1), (_written(pid) - written, done)
