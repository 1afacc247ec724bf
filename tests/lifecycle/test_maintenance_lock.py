"""The store's maintenance lock: shared by operations that use objects, exclusive for a gc;
re-entrant in a thread, and never a wait on itself."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tillage.errors import BusyError
from tillage.platform.locks import holds_shared, maintenance_lock

pytestmark = pytest.mark.process  # real `till` processes, daemons or servers

HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from tillage.platform.locks import maintenance_lock\n"
    "with maintenance_lock(Path(sys.argv[1]), exclusive=sys.argv[2] == 'ex'):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(float(sys.argv[3]))\n"
)


def hold(directory: Path, mode: str, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory), mode, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_shared_is_reentrant_and_exclusive_inside_it_is_busy_at_once(tmp_path: Path) -> None:
    with maintenance_lock(tmp_path, exclusive=False):
        with maintenance_lock(tmp_path, exclusive=False):
            assert holds_shared()
        assert holds_shared()
        started = time.monotonic()
        with pytest.raises(BusyError), maintenance_lock(tmp_path, exclusive=True, timeout=30):
            pass
        assert time.monotonic() - started < 1  # refused, not waited for
    assert not holds_shared()


def test_inside_the_exclusive_side_a_shared_ask_is_covered(tmp_path: Path) -> None:
    with maintenance_lock(tmp_path, exclusive=True), maintenance_lock(tmp_path, exclusive=False):
        pass  # a repair that finishes a rewind: no wait on itself


def test_a_gc_waits_for_other_processes_and_they_wait_for_a_gc(tmp_path: Path) -> None:
    reader = hold(tmp_path, "sh", 0.6)
    with maintenance_lock(tmp_path, exclusive=False, timeout=0.1):
        pass  # shared beside shared
    started = time.monotonic()
    with maintenance_lock(tmp_path, exclusive=True, timeout=10):
        assert time.monotonic() - started > 0.3  # it waited for the reader
    reader.communicate()
    gc = hold(tmp_path, "ex", 0.6)
    with pytest.raises(BusyError), maintenance_lock(tmp_path, exclusive=False, timeout=0.1):
        pass
    started = time.monotonic()
    with maintenance_lock(tmp_path, exclusive=False, timeout=10):
        assert time.monotonic() - started > 0.2  # a seal waits for the gc, then proceeds
    gc.communicate()
