"""`till events`: the publication log read as a stream of events, through the real process."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Till

from tillage.store.publog import GENESIS, PublicationLog, encode_line

EVENT_FIELDS = {"cursor", "at", "kind", "workspace", "workspace_id", "detail"}


def _events(till: Till, *args: str, cwd: Path | None = None) -> list[dict[str, Any]]:
    run = till("--json", "events", *args, cwd=cwd)
    assert run.code == 0, (run.code, run.stdout, run.stderr)
    return [json.loads(line) for line in run.stdout.splitlines()]


def _attach(till: Till, folder: Path) -> dict[str, Any]:
    (folder / "a.txt").write_text("one\n")
    head: dict[str, Any] = till.json("watch", "--no-daemon")["head"]
    return head


def _log(till: Till) -> PublicationLog:
    return PublicationLog(till.home / "log" / "publication.log")


def test_seal_pin_unpin_and_rewind_are_events_with_their_detail(till: Till, folder: Path) -> None:
    first = _attach(till, folder)
    (folder / "a.txt").write_text("two\n")
    second = till.json("snap", "-m", "second")["snapshot"]
    till.json("pin", first["id"])
    till.json("rewind", first["id"], "--dry-run")  # a preview happens nowhere: no event
    undo = till.json("rewind", first["id"], "--paths", "a.txt", "--yes")["undo"]
    till.json("unpin", first["id"])
    till.json("pin", second["id"])
    till.json("pin", second["id"])  # already pinned: nothing happened, no event

    events = _events(till)
    assert [e["kind"] for e in events] == [
        "sealed",
        "sealed",
        "pinned",
        "sealed",
        "rewound",
        "unpinned",
        "pinned",
    ]
    for event in events:
        assert set(event) == EVENT_FIELDS
        assert event["workspace"] == str(folder.resolve())
        assert event["at"].endswith("Z") and event["at"][:4].isdigit()
    initial, snap, pinned, pre_rewind, rewound, unpinned, pinned2 = events
    assert initial["detail"] == {
        "snapshot": first["id"],
        "short": first["id"][:12],
        "trigger": "initial",
        "label": first["label"],
        "agent": None,
        "turn": None,
        "session": None,
    }
    assert snap["detail"]["snapshot"] == second["id"] and snap["detail"]["label"] == "second"
    assert pinned["detail"] == {"snapshot": first["id"], "short": first["id"][:12]}
    assert pre_rewind["detail"]["trigger"] == "pre_rewind"
    assert pre_rewind["detail"]["snapshot"] == undo
    assert rewound["detail"] == {
        "snapshot": first["id"],
        "short": first["id"][:12],
        "paths": ["a.txt"],
        "undo": undo,
        "changes": 1,
    }
    assert unpinned["detail"]["snapshot"] == first["id"]
    assert pinned2["detail"]["snapshot"] == second["id"]
    cursors = [e["cursor"] for e in events]
    assert cursors == sorted(set(cursors))


def test_human_output_is_one_line_per_event(till: Till, folder: Path) -> None:
    first = _attach(till, folder)
    till.json("pin", first["id"])
    run = till("events")
    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 2
    assert "sealed" in lines[0] and first["id"][:12] in lines[0] and "initial" in lines[0]
    assert "pinned" in lines[1] and str(folder.resolve()) in lines[1]


def test_cursors_survive_a_restart_of_everything(till: Till, folder: Path) -> None:
    _attach(till, folder)
    for n in range(3):
        (folder / f"f{n}").write_text(str(n))
        till.json("snap")
    before = _events(till)
    for path in till.home.glob("index.sqlite*"):
        path.unlink()  # the index is rebuilt from the log: cursors live in the log itself
    assert _events(till) == before
    (folder / "later").write_text("x")
    till.json("snap")
    after = _events(till, "--after", str(before[-1]["cursor"]))
    assert len(after) == 1 and after[0]["cursor"] > before[-1]["cursor"]
    assert _events(till)[: len(before)] == before


def test_after_is_exclusive_and_exact_and_limit_caps_the_count(till: Till, folder: Path) -> None:
    _attach(till, folder)
    for n in range(6):
        (folder / f"f{n}").write_text(str(n))
        till.json("snap")
    every = _events(till)
    cursors = [e["cursor"] for e in every]
    assert len(every) == 7
    for i, cursor in enumerate(cursors):
        assert _events(till, "--after", str(cursor)) == every[i + 1 :]
        assert _events(till, "--after", str(cursor), "--limit", "2") == every[i + 1 : i + 3]
    assert _events(till, "--after", "0") == every
    assert _events(till, "-n", "1") == every[:1]
    assert _events(till, "--after", str(cursors[-1] + 1000)) == []


@pytest.mark.parametrize("bad", ["-1", "x", "1.5", "", "0x10"])
def test_an_invalid_cursor_is_an_invalid_argument(till: Till, folder: Path, bad: str) -> None:
    _attach(till, folder)
    run = till("--json", "events", f"--after={bad}")
    assert run.code == 1, (run.stdout, run.stderr)
    assert run.error["name"] == "invalid_argument"


def test_a_limit_below_one_is_an_invalid_argument(till: Till, folder: Path) -> None:
    _attach(till, folder)
    run = till("--json", "events", "--limit", "0")
    assert run.code == 1 and run.error["name"] == "invalid_argument"


def test_events_in_a_folder_that_is_not_attached(till: Till) -> None:
    run = till("--json", "events")
    assert run.code == 1
    assert run.error["name"] == "workspace.not_attached"


def test_events_of_another_workspace_are_not_shown_unless_all(
    till: Till, folder: Path, user_home: Path
) -> None:
    _attach(till, folder)
    other = user_home / "other"
    other.mkdir()
    (other / "b.txt").write_text("b")
    till.json("watch", "--no-daemon", cwd=other)
    (other / "b.txt").write_text("bb")
    till.json("snap", cwd=other)
    (folder / "a.txt").write_text("aa")
    till.json("snap")

    mine = _events(till)
    theirs = _events(till, cwd=other)
    assert [e["workspace"] for e in mine] == [str(folder.resolve())] * 2
    assert [e["workspace"] for e in theirs] == [str(other.resolve())] * 2
    every = _events(till, "--all")
    assert sorted(e["cursor"] for e in mine + theirs) == [e["cursor"] for e in every]


def test_a_torn_tail_is_not_an_event_until_whole_and_a_cut_one_never(
    till: Till, folder: Path
) -> None:
    _attach(till, folder)
    before = _events(till)
    log = _log(till)
    last = list(log.read_from(0, GENESIS))[-1]
    body = {"workspace": before[0]["workspace_id"], "kind": "rewound", "detail": {"x": 1}}
    line, _hash = encode_line(last.seq + 1, last.hash, last.at_ns + 1, "event", body)
    with open(log.path, "ab") as f:
        f.write(line[:40])  # a crash mid-append
    assert _events(till) == before
    with open(log.path, "ab") as f:
        f.write(line[40:])
    completed = _events(till)
    assert completed[:-1] == before
    assert completed[-1]["cursor"] == last.seq + 1 and completed[-1]["detail"] == {"x": 1}

    # A torn tail the next writer cuts is never an event.
    last = list(log.read_from(0, GENESIS))[-1]
    line, _hash = encode_line(last.seq + 1, last.hash, last.at_ns + 1, "event", body)
    with open(log.path, "ab") as f:
        f.write(line[:40])
    (folder / "a.txt").write_text("after the tear\n")
    sealed = till.json("snap")["snapshot"]
    now = _events(till)
    assert now[:-1] == completed
    assert now[-1]["kind"] == "sealed" and now[-1]["detail"]["snapshot"] == sealed["id"]


def test_a_damaged_line_is_an_integrity_error_and_repair_keeps_cursors(
    till: Till, folder: Path
) -> None:
    _attach(till, folder)
    for n in range(4):
        (folder / f"f{n}").write_text(str(n))
        till.json("snap")
    every = _events(till)
    log = _log(till)
    lines = log.path.read_bytes().splitlines(keepends=True)
    # Damage the line of the third event (a sealed one): it no longer parses.
    target = every[2]["cursor"] - 1
    damaged = lines[target].replace(b'"files":', b'"files"!')
    assert damaged != lines[target]
    log.path.write_bytes(b"".join([*lines[:target], damaged, *lines[target + 1 :]]))
    run = till("--json", "events")
    # A stream: the whole events before the damage, then the error as its last line.
    *shown, last = [json.loads(line) for line in run.stdout.splitlines()]
    assert run.code == 1 and last["error"]["name"] == "integrity", run.stdout
    assert shown == every[:2]
    run = till("--json", "events", "--after", str(every[2]["cursor"]))
    assert run.code == 1 and run.error["name"] == "integrity", run.stdout

    repaired = till("--json", "verify", "--repair")
    assert "ok" in repaired.doc and repaired.doc["ok"] is True, repaired.stdout
    after = _events(till)
    survivors = [e for e in every if e["cursor"] != every[2]["cursor"]]
    # Every surviving event keeps its cursor; the dropped seal is published again at the end.
    assert after[: len(survivors)] == survivors
    assert [e["detail"]["snapshot"] for e in after[len(survivors) :]] == [
        every[2]["detail"]["snapshot"]
    ]
    assert after[-1]["cursor"] > every[-1]["cursor"]


def test_verify_is_ok_with_event_records_in_the_log(till: Till, folder: Path) -> None:
    first = _attach(till, folder)
    (folder / "a.txt").write_text("two\n")
    till.json("snap")
    till.json("rewind", first["id"], "--yes")
    kinds = [r.kind for r in _log(till).read_from(0, GENESIS)]
    assert "event" in kinds
    assert till.json("verify")["ok"] is True
    assert till.json("verify", "--repair")["ok"] is True
    timeline = till.json("timeline")["snapshots"]
    for path in till.home.glob("index.sqlite*"):
        path.unlink()
    assert till.json("timeline")["snapshots"] == timeline  # the index replay skips events
    assert [e["kind"] for e in _events(till)][-1] == "rewound"


# -- following --------------------------------------------------------------------------------


class Follower:
    """A `till --json events --follow` process whose lines are read as they come."""

    def __init__(self, till: Till, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "events", "--follow", *args],
            cwd=till.cwd,
            env=till.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.time(), line))

    def take(self, count: int, timeout: float) -> list[tuple[float, dict[str, Any]]]:
        """The next `count` lines, each parsed, with when it arrived; fails at the deadline."""
        deadline = time.monotonic() + timeout
        got = []
        while len(got) < count:
            left = deadline - time.monotonic()
            assert left > 0, f"only {len(got)} of {count} events arrived in {timeout} s"
            try:
                arrived, line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            got.append((arrived, json.loads(line)))
        return got

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, list[str]]:
        """Signals the process (unless it ended), waits, and returns its status and the lines
        not taken yet."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get()[1])
        return code, rest


def test_follow_delivers_every_event_of_two_concurrent_writers_once_in_order(
    till: Till, folder: Path
) -> None:
    _attach(till, folder)
    start = _events(till)[-1]["cursor"]
    follower = Follower(till, "--after", str(start))
    sealed: list[str] = []
    failures: list[str] = []

    def writer(name: str) -> None:
        for n in range(15):
            (folder / f"{name}{n}.txt").write_text(f"{name} {n}\n")
            run = till("--json", "snap")
            if run.code != 0:
                failures.append(run.stdout + run.stderr)
                return
            sealed.append(run.doc["snapshot"]["id"])

    writers = [threading.Thread(target=writer, args=(name,)) for name in ("x", "y")]
    try:
        for t in writers:
            t.start()
        for t in writers:
            t.join(timeout=300)
        assert not failures, failures
        got = follower.take(30, timeout=60)
    finally:
        code, rest = follower.stop()

    events = [doc for _at, doc in got]
    assert sorted(e["detail"]["snapshot"] for e in events) == sorted(sealed)
    cursors = [e["cursor"] for e in events]
    assert cursors == sorted(set(cursors)), "no duplicate, log order"
    # No gap: exactly what a reader that did not follow gets after the same cursor.
    assert events == _events(till, "--after", str(start))
    # Each was delivered soon after it was published (the contract says within a second; the
    # bound here leaves room for a loaded machine).
    latency = [arrived - _epoch(doc["at"]) for arrived, doc in got]
    assert max(latency) < 5, latency
    # Interrupted, it ends as the contract says: one `interrupted` document, status 130.
    assert code == 130, code
    assert [json.loads(line)["error"]["name"] for line in rest] == ["interrupted"]


def test_follow_sends_the_backlog_then_waits_and_ends_at_the_limit(
    till: Till, folder: Path
) -> None:
    _attach(till, folder)
    follower = Follower(till, "--limit", "3")
    try:
        backlog = follower.take(1, timeout=60)
        assert backlog[0][1]["detail"]["trigger"] == "initial"
        for n in range(2):
            (folder / f"n{n}").write_text(str(n))
            till.json("snap")
        follower.take(2, timeout=60)
        assert follower.proc.wait(timeout=30) == 0  # the limit is of the whole stream
    finally:
        follower.stop()


@pytest.mark.process
def test_follow_ends_on_sigterm_with_the_interrupted_document(till: Till, folder: Path) -> None:
    _attach(till, folder)
    follower = Follower(till)
    follower.take(1, timeout=60)
    code, rest = follower.stop(signal.SIGTERM)
    assert code == 143
    assert [json.loads(line)["error"]["name"] for line in rest] == ["interrupted"]


@pytest.mark.process
def test_follow_ends_quietly_when_its_reader_goes_away(till: Till, folder: Path) -> None:
    _attach(till, folder)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "events", "--follow"],
        cwd=till.cwd,
        env=till.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert b"sealed" in proc.stdout.readline()
    proc.stdout.close()  # `till events --follow | head -1`: the reader is gone, nothing new comes
    code = proc.wait(timeout=30)
    assert proc.stderr is not None
    errors = proc.stderr.read()
    proc.stderr.close()
    assert code == 141, errors
    assert b"Traceback" not in errors


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_a_follower_names_the_workspace_of_a_pin_of_a_snapshot_sealed_after_it_started(
    till: Till, folder: Path
) -> None:
    _attach(till, folder)
    follower = Follower(till, "--after", str(_events(till)[-1]["cursor"]))
    try:
        (folder / "new.txt").write_text("new\n")
        sealed = till.json("snap")["snapshot"]
        till.json("pin", sealed["id"])
        got = [doc for _at, doc in follower.take(2, timeout=60)]
    finally:
        follower.stop()
    assert [e["kind"] for e in got] == ["sealed", "pinned"]
    assert got[1]["detail"]["snapshot"] == sealed["id"]
    assert got[1]["workspace"] == str(folder.resolve())
