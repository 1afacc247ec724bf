"""`till sync --follow` between two machines through a folder remote, as real processes: a
change on either side reaches the other within a few cycles (the latency is measured and
printed), a divergence pauses the follower until the person merges, a remote that goes away
for a while is an error line and not the end, and the follower stops cleanly on SIGTERM, on
Ctrl-C and when its reader goes away."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tillage.platform.interrupts import interruptions_held

pytestmark = pytest.mark.process  # real `till` processes, daemons or servers

POLL = "0.2"


class Follow:
    """A `till --json sync --follow` process whose lines are read as they come."""

    def __init__(self, machine: Till, cwd: Path, *args: str) -> None:
        self.stderr = (cwd.parent / f".follow-{cwd.name}.err").open("w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "sync", "--follow", *args],
            cwd=cwd,
            env=machine.env(),
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self.lines: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), json.loads(line)))

    def until(
        self, wanted: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> tuple[float, dict[str, Any]]:
        """The first line from now on that `wanted` accepts, with when it arrived."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no such line in {timeout} s; last: {self.seen[-3:]}"
            try:
                arrived, doc = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                assert self.proc.poll() is None, f"the follower ended: {self.err()}"
                continue
            self.seen.append(doc)
            if wanted(doc):
                return arrived, doc

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, list[dict[str, Any]]]:
        """Signals the follower, waits, and returns its status and the lines not read yet."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get()[1])
        self.stderr.close()
        return code, rest

    def err(self) -> str:
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()


def wait_for(check: Callable[[], bool], timeout: float = 30) -> float:
    """Polls `check` until it holds; returns when (monotonic), fails at the deadline."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return time.monotonic()


def two_machines(tmp_path: Path, till: Till, folder: Path) -> tuple[Till, Till, Path, Path]:
    """Machine A (the `till` fixture's store and folder) pushed to a folder remote, and
    machine B (a store of its own) holding a clone of it."""
    (folder / "notes.txt").write_text("one\n")
    till.json("watch", "--no-daemon")
    remote = tmp_path / "remote"
    key = till.json("remote", "add", str(remote))["key"]
    till.json("sync", "--push")
    b = Till(tmp_path / "store-b", till.user_home, tmp_path)
    b.json("clone", str(remote), "b", "--key", key, cwd=tmp_path)
    return till, b, remote, tmp_path / "b"


def test_a_change_on_either_machine_reaches_the_other(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    a, b, _remote, copy = two_machines(tmp_path, till, folder)
    on_a = Follow(a, folder, "--poll-seconds", POLL)
    on_b = Follow(b, copy, "--poll-seconds", POLL)
    try:
        _, first = on_a.until(lambda d: True)
        assert first["cycle"] == 1 and first["pulled"] == "up_to_date"
        assert first["pushed"] is None and first["paused"] is False and first["error"] is None
        on_b.until(lambda d: d["pulled"] == "up_to_date")

        latencies = []
        for n in range(3):
            (folder / f"from-a-{n}.txt").write_text(f"a {n}\n")
            a.json("snap")
            sealed = time.monotonic()
            arrived = wait_for(lambda n=n: (copy / f"from-a-{n}.txt").is_file())
            latencies.append(arrived - sealed)
            assert (copy / f"from-a-{n}.txt").read_text() == f"a {n}\n"
        _, pushed = on_a.until(lambda d: d["pushed"] is not None)
        assert pushed["uploaded_objects"] > 0
        on_b.until(lambda d: d["pulled"] == "fast_forwarded")

        (copy / "from-b.txt").write_text("b\n")
        # Written at once, possibly while B still applies the last pull: it must go up all
        # the same (a pull's landing seal may hold it).
        wait_for((folder / "from-b.txt").is_file)
        assert (folder / "from-b.txt").read_text() == "b\n"
        print(
            f"\nseal on A -> file on B with --poll-seconds {POLL}: "
            + ", ".join(f"{s:.2f} s" for s in latencies)
        )
        assert max(latencies) < 10
    finally:
        code_a, rest_a = on_a.stop(signal.SIGTERM)
        code_b, rest_b = on_b.stop(signal.SIGINT)
    assert code_a == 143 and rest_a[-1]["error"]["name"] == "interrupted"
    assert code_b == 130 and rest_b[-1]["error"]["name"] == "interrupted"
    # Stopped between cycles or in one, nothing is left half-done: both agree afterwards.
    assert a.json("sync", "--pull")["disposition"] == "up_to_date"
    assert b.json("sync", "--pull", cwd=copy)["disposition"] == "up_to_date"


def test_a_conflict_pauses_until_the_person_merges(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    a, b, _remote, copy = two_machines(tmp_path, till, folder)
    (copy / "notes.txt").write_text("one, edited on b\n")
    (folder / "notes.txt").write_text("one, edited on a\n")
    (folder / "later.txt").write_text("from a\n")
    a.json("sync", "--push")

    on_b = Follow(b, copy, "--poll-seconds", POLL)
    try:
        _, paused = on_b.until(lambda d: d["paused"])
        assert paused["pulled"] == "diverged" and paused["pushed"] is None
        assert paused["conflicts"] == ["notes.txt"] and paused["merged"] is None
        incoming = paused["incoming"]
        assert paused["next_step"] == f"till merge --snapshot {incoming}"
        on_b.until(lambda d: d["paused"] and d["cycle"] > paused["cycle"])  # it keeps checking
        assert not (copy / "later.txt").exists()  # nothing landed
        assert (copy / "notes.txt").read_text() == "one, edited on b\n"
        sealed = len(b.json("timeline", "-n", "100", cwd=copy)["snapshots"])
        on_b.until(lambda d: d["paused"] and d["cycle"] > paused["cycle"] + 3)
        # A conflicted merge is not tried again every cycle: no snapshot per poll.
        assert len(b.json("timeline", "-n", "100", cwd=copy)["snapshots"]) == sealed

        merge = ("merge", "--snapshot", incoming, "--take", "ours", "notes.txt")
        assert b.json(*merge, cwd=copy)["landed"] is True
        _, resumed = on_b.until(lambda d: d["pushed"] is not None)
        assert resumed["paused"] is False and resumed["error"] is None
        on_b.until(lambda d: d["pulled"] == "up_to_date" and d["pushed"] is None)
    finally:
        code, _rest = on_b.stop()
    assert code == 143
    assert a.json("sync", "--pull")["disposition"] == "fast_forwarded"
    assert (folder / "notes.txt").read_text() == "one, edited on b\n"
    assert (folder / "later.txt").read_text() == "from a\n"


def test_two_machines_editing_different_files_merge_on_their_own(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    a, b, _remote, copy = two_machines(tmp_path, till, folder)
    on_a = Follow(a, folder, "--poll-seconds", POLL)
    on_b = Follow(b, copy, "--poll-seconds", POLL)
    try:
        on_a.until(lambda d: d["pulled"] == "up_to_date")
        on_b.until(lambda d: d["pulled"] == "up_to_date")
        for n in range(4):  # both sides edit at once, each its own file, sealed at once
            (folder / f"from-a-{n}.txt").write_text(f"a {n}\n")
            (copy / f"from-b-{n}.txt").write_text(f"b {n}\n")
            a.json("snap")
            b.json("snap", cwd=copy)
            time.sleep(0.1)
        names = {f"from-{side}-{n}.txt" for side in "ab" for n in range(4)}
        for root in (folder, copy):
            wait_for(lambda root=root: names <= {p.name for p in root.iterdir()}, timeout=60)
        for n in range(4):
            assert (copy / f"from-a-{n}.txt").read_text() == f"a {n}\n"
            assert (folder / f"from-b-{n}.txt").read_text() == f"b {n}\n"
    finally:
        on_a.stop()
        on_b.stop()
    lines = on_a.seen + on_b.seen
    assert not any(d["paused"] for d in lines), [d for d in lines if d["paused"]][:2]
    assert not any(d["error"] for d in lines), [d["error"] for d in lines if d["error"]][:2]
    assert a.json("sync", "--pull")["disposition"] == "up_to_date"
    assert b.json("sync", "--pull", cwd=copy)["disposition"] == "up_to_date"


def test_a_remote_gone_for_a_while_is_an_error_line_not_the_end(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    a, b, remote, copy = two_machines(tmp_path, till, folder)
    on_a = Follow(a, folder, "--poll-seconds", POLL)
    try:
        on_a.until(lambda d: d["cycle"] == 1)
        away = tmp_path / "remote-away"
        remote.rename(away)  # an unmounted disk
        _, failed = on_a.until(lambda d: d["error"] is not None)
        assert failed["error"]["name"] == "sync.not_a_remote"
        assert failed["pulled"] is None and failed["pushed"] is None
        remote.write_text("not a folder")  # something else in its place
        _, again = on_a.until(lambda d: d["error"] is not None and d["cycle"] > failed["cycle"])
        assert again["error"]["name"] == "sync.remote_unavailable"
        assert again["retry_in"] > failed["retry_in"]  # backing off
        (folder / "while-away.txt").write_text("kept\n")
        remote.unlink()
        away.rename(remote)
        _, back = on_a.until(lambda d: d["error"] is None and d["pushed"] is not None)
        assert back["retry_in"] == float(POLL)
        on_a.until(lambda d: d["error"] is None and d["cycle"] > back["cycle"])
    finally:
        code, _rest = on_a.stop()
    assert code == 143
    assert b.json("sync", "--pull", cwd=copy)["disposition"] == "fast_forwarded"
    assert (copy / "while-away.txt").read_text() == "kept\n"


def test_a_follower_whose_reader_went_away_stops(tmp_path: Path, till: Till, folder: Path) -> None:
    a, _b, _remote, _copy = two_machines(tmp_path, till, folder)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", "sync", "--follow", "--poll-seconds", "5"],
        cwd=folder,
        env=a.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["cycle"] == 1
    proc.stdout.close()  # the reader goes away while the follower waits 5 s
    assert proc.wait(timeout=10) == 141


def test_follow_refuses_what_it_cannot_do(till: Till, folder: Path) -> None:
    till.json("watch", "--no-daemon")
    run = till("--json", "sync", "--follow")
    assert run.code == 1 and run.error["name"] == "sync.unknown_remote"
    run = till("--json", "sync", "--follow", "--push")
    assert run.code == 1 and run.error["name"] == "invalid_argument"
    run = till("--json", "sync", "--follow", "--poll-seconds", "soon")
    assert run.code == 2 and run.error["name"] == "usage"  # not a number: a usage error
    run = till("--json", "sync", "--follow", "--poll-seconds", "-1")
    assert run.code == 1 and run.error["name"] == "invalid_argument"


def test_an_interruption_during_a_step_waits_for_its_end() -> None:
    """What keeps a landed pull and its sync_ref fact together: Ctrl-C or SIGTERM in a step is
    delivered when the step is done, as the handler in place would have (a second one at
    once), and the handlers are as they were afterwards."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    done = []
    with pytest.raises(KeyboardInterrupt), interruptions_held():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # delivered here if it were not held
        done.append("the step")
    assert done == ["the step"]

    class TerminatedError(Exception):
        pass

    def terminate(_signum: int, _frame: object) -> None:
        raise TerminatedError

    signal.signal(signal.SIGTERM, terminate)
    try:
        with pytest.raises(TerminatedError), interruptions_held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)  # asked twice: now
            time.sleep(0.05)
            done.append("not reached")
    finally:
        signal.signal(signal.SIGTERM, before[1])
    assert done == ["the step"]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
