"""Fixtures for the watcher: real `till`, real daemons, real inotify; every daemon a test
started is stopped when it ends, whatever happened."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tests.helpers import process_gone  # noqa: F401  (the watch tests import it from here)
from tillage.workspace import watchstate


def wait_for(what: str, check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """Polls `check` until it returns something truthy; fails naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.1)


def daemon_pids(home: Path) -> list[int]:
    """Every live watcher daemon process serving the store at `home` (from /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        args = raw.split(b"\0")
        if b"tillage.hosts.daemon" in args and os.fsencode(str(home)) in args and state != "Z":
            pids.append(int(entry))
    return pids


class WatchTill(Till):
    """`till` with extra environment (the daemon inherits it: TILLAGE_WATCH_DEBUG)."""

    extra: dict[str, str]

    def env(self) -> dict[str, str]:
        return {**super().env(), **self.extra}

    @property
    def workspace_id(self) -> str:
        doc = json.loads((self.cwd / ".tillage" / "workspace.json").read_text())
        return str(doc["workspace"])

    def rpc(self, method: str, params: dict[str, Any] | None = None, timeout: float = 10) -> Any:
        return watchstate.call(self.home, self.workspace_id, method, params or {}, timeout)

    def snapshots(self) -> list[dict[str, Any]]:
        snaps: list[dict[str, Any]] = self.json("timeline", "-n", "1000")["snapshots"]
        return snaps

    def settle(self) -> dict[str, Any]:
        """Waits until the watcher has noted everything queued and sealed what is pending."""

        def quiet() -> Any:
            self.rpc("tillage.changes_since", {"token": None})  # a cookie round: all noted
            doc = self.rpc("tillage.ping")
            return doc if not doc["pending"] else None

        result: dict[str, Any] = wait_for("the watcher to go quiet", quiet, timeout=30)
        return result


@pytest.fixture
def wtill(tmp_path: Path, user_home: Path, folder: Path) -> Iterator[WatchTill]:
    t = WatchTill(tmp_path / "store", user_home, folder)
    t.extra = {"TILLAGE_WATCH_DEBUG": "1"}
    try:
        yield t
    finally:
        for pid in daemon_pids(t.home):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
