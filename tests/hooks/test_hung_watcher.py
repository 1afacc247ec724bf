"""A hook with a watcher that does not answer: it seals in its own process, exits 0 and prints
nothing; the watcher runs a hook only once the hook's door says go, so a watcher that was stopped
and continued later never seals one late.

Claude Code's hooks are run as Claude Code runs them (the installed command, through a shell,
its JSON payload on stdin); speed is bench/hook_latency.py's, never asserted here.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_fast_door import FakeWatcher, _reply
from tests.conftest import Till
from tests.hooks.test_hooks import hook, ok
from tests.hooks.test_install import ON_PATH, SESSION, command_for, payload, run_as_claude
from tillage.hosts.cli import where
from tillage.platform.identity import code_identity
from tillage.workspace import watchstate

pytestmark = pytest.mark.process

SCRIPT = Path(sys.executable).with_name("till")
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="the till console script is missing")


def timeline(till: Till) -> list[dict[str, Any]]:
    snaps: list[dict[str, Any]] = till.json("timeline", "-n", "1000")["snapshots"]
    return snaps


@pytest.fixture
def attached(till: Till, folder: Path) -> Path:
    (folder / "a.txt").write_text("a")
    till.json("watch", "--no-daemon")
    ok(hook(till, "install", "--no-watcher", env=ON_PATH))
    return folder


@pytest.fixture
def watcher(till: Till, attached: Path) -> Iterator[int]:
    """The folder's real watcher daemon, running; its pid. Continued and stopped at the end,
    whatever the test did to it."""
    assert till.json("watch")["watching"] is True
    pid = till.json("status")["watcher"]["pid"]
    try:
        yield int(pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        till("watch", "--stop")


def stop_hook(till: Till, attached: Path) -> subprocess.CompletedProcess[str]:
    command = command_for(attached, "Stop")
    doc = payload("Stop", attached, stop_hook_active=False)
    return run_as_claude(till, command, attached, doc, ON_PATH)


@needs_script
def test_a_sigstopped_watcher_the_hook_still_seals_exits_0_and_prints_nothing(
    till: Till, attached: Path, watcher: int
) -> None:
    (attached / "a.txt").write_text("the turn's work")
    os.kill(watcher, signal.SIGSTOP)
    try:
        run = stop_hook(till, attached)
        assert (run.returncode, run.stdout) == (0, ""), run.stderr
        sealed = [s for s in timeline(till) if s["session"] == SESSION]
        assert [s["label"] for s in sealed] == ["hook turn-end agent=claude-code"]
        assert till("cat", sealed[0]["id"], "a.txt").stdout == "the turn's work"
        (attached / "a.txt").write_text("later, after the hook")
        again = hook(till, "turn-end", "--agent", "bot", env=ON_PATH)  # the JSON answer
        assert again.code == 0 and again.doc["sealed"] is True
        assert again.stdout.count("\n") == 1  # one document, nothing else on stdout
    finally:
        os.kill(watcher, signal.SIGCONT)
    count = len(timeline(till))
    # Continued, the watcher reads what the hooks left on its socket (their pings): it seals
    # nothing for them, now or a moment later.
    for _ in range(5):
        watchstate.call(till.home, till.json("status")["id"], "tillage.ping", {}, 10)
        time.sleep(0.2)
    assert len(timeline(till)) == count
    assert till("cat", sealed[0]["id"], "a.txt").stdout == "the turn's work"


@pytest.fixture
def silent_after_ping(till: Till, attached: Path) -> Iterator[FakeWatcher]:
    """A watcher's socket that answers the ping and then never answers the command: a watcher
    stopped (or hung) between the two."""
    workspace_id = where.workspace_id(str(attached))
    assert workspace_id is not None
    path = Path(where.socket_path(str(till.home), workspace_id))

    def answer(request: dict[str, Any]) -> bytes | None:
        if request["method"] == "tillage.ping":
            return _reply(request, {"id": workspace_id, "code": code_identity()})
        return None  # silent

    fake = FakeWatcher(path, answer)
    try:
        yield fake
    finally:
        fake.close()


@needs_script
def test_a_watcher_that_goes_silent_after_the_ping_does_not_hold_the_hook(
    till: Till, attached: Path, silent_after_ping: FakeWatcher
) -> None:
    (attached / "a.txt").write_text("sealed here")
    run = stop_hook(till, attached)
    assert (run.returncode, run.stdout) == (0, ""), run.stderr
    newest = timeline(till)[0]
    assert (newest["label"], newest["session"]) == ("hook turn-end agent=claude-code", SESSION)
    assert till("cat", newest["id"], "a.txt").stdout == "sealed here"
    asked = [r for r in silent_after_ping.requests if r.get("method") == "tillage.cli"]
    assert len(asked) == 1 and asked[0]["params"]["handshake"] is True
    # It never told the silent watcher to go: nothing of it could be sealed there later.
    assert not any(r.get("method") == "tillage.go" for r in silent_after_ping.requests)


def _connect(till: Till) -> socket.socket:
    workspace_id = till.json("status")["id"]
    return watchstate.connect(till.home, workspace_id, 10)


def _line(conn: socket.socket) -> Any:
    buf = b""
    while not buf.endswith(b"\n"):
        piece = conn.recv(65536)
        if not piece:
            return None  # hung up
        buf += piece
    return json.loads(buf)


def _hook_call(till: Till, attached: Path) -> bytes:
    params = {
        "argv": ["--json", "hook", "turn-end", "--agent", "handshake-test"],
        "cwd": str(attached),
        "env": {"TILLAGE_HOME": str(till.home), "HOME": str(till.user_home)},
        "stdin_b64": None,
        "handshake": True,
    }
    request = {"jsonrpc": "2.0", "id": 7, "method": "tillage.cli", "params": params}
    return json.dumps(request).encode() + b"\n"


def test_the_watcher_runs_a_hook_only_when_its_caller_says_go(
    till: Till, attached: Path, watcher: int
) -> None:
    count = len(timeline(till))
    with _connect(till) as conn:
        conn.sendall(_hook_call(till, attached))
        notice = _line(conn)
        assert notice == {"jsonrpc": "2.0", "method": "tillage.starting", "params": {"id": 7}}
        conn.shutdown(socket.SHUT_WR)  # the caller gave up: it says nothing more
        assert _line(conn) is None  # the watcher hung up without running it
    assert len(timeline(till)) == count

    with _connect(till) as conn:
        conn.sendall(_hook_call(till, attached))
        assert _line(conn)["method"] == "tillage.starting"
        go = {"jsonrpc": "2.0", "method": "tillage.go", "params": {"id": 7}}
        conn.sendall(json.dumps(go).encode() + b"\n")
        answer = _line(conn)
    assert answer["id"] == 7 and answer["result"]["exit"] == 0
    assert timeline(till)[0]["agent"] == "handshake-test"
    assert len(timeline(till)) == count + 1


def test_a_hook_whose_caller_hangs_up_before_the_watcher_reads_it_is_never_run(
    till: Till, attached: Path, watcher: int
) -> None:
    """The SIGSTOPped watcher continued later finds a hook whose caller left: nothing runs."""
    count = len(timeline(till))
    os.kill(watcher, signal.SIGSTOP)
    try:
        conn = _connect(till)  # the kernel queues it for the stopped watcher
        conn.sendall(_hook_call(till, attached))
        conn.close()  # the hook gave up and sealed in its own process instead
    finally:
        os.kill(watcher, signal.SIGCONT)
    with _connect(till) as probe:  # the watcher serves connections in the order they came
        probe.sendall(b'{"jsonrpc":"2.0","id":1,"method":"tillage.ping","params":{}}\n')
        assert _line(probe)["id"] == 1
    time.sleep(1.0)  # room for the queued call's thread to have run, had it run anything
    assert len(timeline(till)) == count
