"""The watcher daemon through the real `till`: start, stop, crash, races, bursts, exclusions,
policy reloads, lost events, cookie sync, permissions and idle cost."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.watch.conftest import WatchTill, daemon_pids, process_gone, wait_for
from tillage.workspace import watchstate


def _watch(t: WatchTill, *args: str) -> dict[str, object]:
    doc: dict[str, object] = t.json("watch", *args)
    assert doc["watching"] is True
    return doc


def _status(t: WatchTill) -> dict[str, object]:
    doc: dict[str, object] = t.json("status")
    return doc


def test_watch_starts_a_detached_daemon_that_status_reports_and_stop_stops(
    wtill: WatchTill, folder: Path
) -> None:
    (folder / "a.txt").write_text("a")
    _watch(wtill)
    status = _status(wtill)
    assert status["watching"] is True
    watcher = status["watcher"]
    assert isinstance(watcher, dict)
    assert watcher["mode"] == "inotify" and watcher["reason"] is None
    assert watcher["debounce_ms"] == 500 and str(watcher["since"]).endswith("Z")
    pid = watcher["pid"]
    assert isinstance(pid, int)
    assert daemon_pids(wtill.home) == [pid]
    assert os.getsid(pid) == pid  # its own session: closing the terminal does not end it

    again = _watch(wtill)  # a second watch attaches to the running one
    assert again["watching"] is True
    assert daemon_pids(wtill.home) == [pid]

    stopped = wtill.json("watch", "--stop")
    assert stopped["watching"] is False and stopped["workspace"] == str(folder.resolve())
    assert _status(wtill)["watching"] is False
    assert _status(wtill)["watcher"] is None
    assert daemon_pids(wtill.home) == []
    assert not watchstate.socket_path(wtill.home, wtill.workspace_id).exists()


def test_a_change_is_sealed_once_the_folder_is_quiet(wtill: WatchTill, folder: Path) -> None:
    _watch(wtill, "--debounce-ms", "100")
    before = len(wtill.snapshots())
    (folder / "src").mkdir()
    (folder / "src" / "new.txt").write_text("fresh")

    def sealed() -> object:
        snaps = wtill.snapshots()
        return snaps[0] if len(snaps) > before else None

    head = wait_for("a watch snapshot", sealed)
    assert head["trigger"] == "watch"
    run = wtill("cat", head["id"], "src/new.txt")
    assert run.code == 0 and run.stdout == "fresh"


def test_a_crashed_daemon_is_not_watching_and_the_next_watch_starts_another(
    wtill: WatchTill,
) -> None:
    _watch(wtill)
    [pid] = daemon_pids(wtill.home)
    os.kill(pid, signal.SIGKILL)
    wait_for("the daemon to die", lambda: process_gone(pid))
    assert _status(wtill)["watching"] is False  # its lock died with it
    _watch(wtill)
    [new_pid] = daemon_pids(wtill.home)
    assert new_pid != pid
    assert _status(wtill)["watching"] is True


def test_five_concurrent_watch_calls_leave_exactly_one_daemon(
    wtill: WatchTill, folder: Path
) -> None:
    (folder / "a.txt").write_text("a")
    wtill.json("watch", "--no-daemon")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tillage", "--json", "watch"],
            cwd=folder,
            env=wtill.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(5)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out)["watching"] is True
    # The losers of the race exit quietly once they find the lock taken.
    wait_for("the losing daemons to exit", lambda: len(daemon_pids(wtill.home)) == 1)
    status = _status(wtill)
    assert status["watching"] is True
    watcher = status["watcher"]
    assert isinstance(watcher, dict) and daemon_pids(wtill.home) == [watcher["pid"]]


def test_a_burst_of_a_thousand_writes_becomes_a_few_snapshots(
    wtill: WatchTill, folder: Path
) -> None:
    (folder / "pkg").mkdir()
    _watch(wtill, "--debounce-ms", "300")
    before = len(wtill.snapshots())
    for i in range(1000):
        sub = folder / "pkg" / f"m{i % 20}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}.txt").write_text(f"content {i}\n")
    wtill.settle()
    snaps = wtill.snapshots()
    added = len(snaps) - before
    assert 1 <= added <= 5, added
    assert snaps[0]["files"] == 1000
    diff = wtill.json("diff", snaps[0]["id"])
    assert diff["changes"] == []  # the last seal holds every write


def test_churn_in_an_excluded_folder_is_not_watched_and_seals_nothing(
    wtill: WatchTill, folder: Path
) -> None:
    (folder / ".tillagepolicy").write_text("cache/\n*.log\n")
    (folder / "cache" / "deep").mkdir(parents=True)
    (folder / "keep.txt").write_text("k")
    _watch(wtill, "--debounce-ms", "50")
    wtill.settle()
    count = len(wtill.snapshots())
    token = wtill.rpc("tillage.changes_since", {"token": None})["token"]
    for i in range(200):
        (folder / "cache" / "deep" / f"x{i}").write_text(str(i))
        (folder / "cache" / f"sub{i}").mkdir()
        (folder / f"noise{i}.log").write_text(str(i))
    answer = wtill.rpc("tillage.changes_since", {"token": token})  # cookie: all noted
    assert answer["dirs"] == []
    assert wtill.rpc("tillage.ping")["pending"] is False
    assert len(wtill.snapshots()) == count


def test_a_policy_change_is_reloaded_and_its_exclusions_apply(
    wtill: WatchTill, folder: Path
) -> None:
    (folder / "gen").mkdir()
    (folder / "src").mkdir()
    _watch(wtill, "--debounce-ms", "50")
    token = wtill.rpc("tillage.changes_since", {"token": None})["token"]
    (folder / "gen" / "a").write_text("1")
    assert wtill.rpc("tillage.changes_since", {"token": token})["dirs"] == ["gen"]

    (folder / ".tillagepolicy").write_text("gen/\n")
    reloaded = wtill.rpc("tillage.changes_since", {"token": token})
    assert reloaded["dirs"] is None  # a policy change: the next seal walks everything
    token = reloaded["token"]
    (folder / "gen" / "b").write_text("2")
    (folder / "src" / "c").write_text("3")
    assert wtill.rpc("tillage.changes_since", {"token": token})["dirs"] == ["src"]
    head = wtill.settle()
    assert head["seals"] >= 1
    assert wtill.json("diff", wtill.snapshots()[0]["id"])["changes"] == []


def test_lost_events_are_recovered_by_the_next_seal(wtill: WatchTill, folder: Path) -> None:
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "a" / "b" / "old.txt").write_text("old")
    (folder / "gone.txt").write_text("bye")
    _watch(wtill, "--debounce-ms", "50")
    wtill.settle()
    token = wtill.rpc("tillage.changes_since", {"token": None})["token"]
    wtill.rpc("tillage.debug.drop_events", {"dropping": True})
    (folder / "a" / "b" / "old.txt").write_text("changed while the queue overflowed")
    (folder / "a" / "b" / "c").mkdir()
    (folder / "a" / "b" / "c" / "new.txt").write_text("new")
    (folder / "gone.txt").unlink()
    wtill.rpc("tillage.changes_since", {"token": token})  # the dropped events were read
    wtill.rpc("tillage.debug.drop_events", {"dropping": False})  # IN_Q_OVERFLOW
    assert wtill.rpc("tillage.changes_since", {"token": token})["dirs"] is None
    wtill.settle()
    head = wtill.snapshots()[0]
    assert wtill.json("diff", head["id"])["changes"] == []
    run = wtill("cat", head["id"], "a/b/old.txt")
    assert run.stdout == "changed while the queue overflowed"


def test_a_change_made_just_before_a_question_is_always_in_the_answer(
    wtill: WatchTill, folder: Path
) -> None:
    """The sync cookie: every event queued before `changes_since` is noted before it answers."""
    _watch(wtill, "--debounce-ms", "60000")
    home, wid = wtill.home, wtill.workspace_id
    token = wtill.rpc("tillage.changes_since", {"token": None})["token"]
    for i in range(60):
        rel = f"d{i % 7}/e{i}"
        (folder / rel).mkdir(parents=True)
        (folder / rel / "f").write_text(str(i))
        answer = watchstate.call(home, wid, "tillage.changes_since", {"token": token}, 10)
        assert answer["dirs"] is not None and rel in answer["dirs"], (i, answer)
        token = answer["token"]


def test_a_change_made_just_before_till_snap_is_in_the_snap(wtill: WatchTill, folder: Path) -> None:
    (folder / "x" / "y").mkdir(parents=True)
    _watch(wtill, "--debounce-ms", "60000")
    for i in range(6):
        (folder / "x" / "y" / "f.txt").write_text(f"version {i}")
        snap = wtill.json("snap")["snapshot"]
        assert wtill("cat", snap["id"], "x/y/f.txt").stdout == f"version {i}"


def test_the_socket_and_run_folder_are_owner_only(wtill: WatchTill) -> None:
    _watch(wtill)
    wid = wtill.workspace_id
    run = watchstate.run_dir(wtill.home)
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    sock = watchstate.socket_path(wtill.home, wid)
    assert stat.S_ISSOCK(sock.lstat().st_mode)
    assert stat.S_IMODE(sock.lstat().st_mode) == 0o600
    for path in (watchstate.info_path(wtill.home, wid), watchstate.log_path(wtill.home, wid)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_store_path_longer_than_sun_path_still_serves_the_socket(
    wtill: WatchTill, tmp_path: Path
) -> None:
    wtill.home = tmp_path / ("s" * 60) / ("t" * 60) / "store"
    _watch(wtill)
    assert len(os.fsencode(str(watchstate.socket_path(wtill.home, wtill.workspace_id)))) > 107
    assert wtill.rpc("tillage.ping")["pid"] in daemon_pids(wtill.home)
    assert _status(wtill)["watching"] is True


def test_an_idle_daemon_writes_nothing_and_seals_nothing(wtill: WatchTill, folder: Path) -> None:
    (folder / "a.txt").write_text("a")
    _watch(wtill, "--debounce-ms", "50")
    wtill.settle()
    [pid] = daemon_pids(wtill.home)
    count = len(wtill.snapshots())

    def io_and_cpu() -> tuple[int, int, int]:
        io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(io["wchar"]), int(io["write_bytes"]), int(fields[11]) + int(fields[12])

    # The seal's own last writes (its index, its log) may still be on their way: idle is
    # once a second passes with no write at all, then nothing may be written for two more.
    quiet = io_and_cpu()

    def no_write_for_a_second() -> bool:
        nonlocal quiet
        time.sleep(1.0)
        now, was = io_and_cpu(), quiet
        quiet = now
        return now[:2] == was[:2]

    wait_for("the daemon to go idle", no_write_for_a_second, timeout=20)
    before = io_and_cpu()
    time.sleep(2.0)  # an observation window, not a synchronisation
    after = io_and_cpu()
    assert after[0] == before[0] and after[1] == before[1], (before, after)
    assert after[2] - before[2] <= 4, (before, after)  # clock ticks: well under 1% of 2 s
    assert len(wtill.snapshots()) == count


def test_forget_stops_the_watcher(wtill: WatchTill) -> None:
    _watch(wtill)
    assert daemon_pids(wtill.home)
    wtill.json("forget")
    assert daemon_pids(wtill.home) == []


def test_foreground_runs_in_this_process_until_sigterm(wtill: WatchTill, folder: Path) -> None:
    (folder / "a.txt").write_text("a")
    wtill.json("watch", "--no-daemon")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", "watch", "--foreground"],
        cwd=folder,
        env=wtill.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        doc = json.loads(proc.stdout.readline())  # the result comes first
        assert doc["watching"] is True
        wait_for("the foreground watcher", lambda: (_status(wtill)["watcher"] or {}).get("pid"))
        watcher = _status(wtill)["watcher"]
        assert isinstance(watcher, dict)
        assert watcher["pid"] == proc.pid and watcher["foreground"] is True
        refused = wtill("--json", "watch", "--foreground")
        assert refused.code == 1 and refused.error["name"] == "busy"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert _status(wtill)["watching"] is False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.mark.slow  # waits for one periodic rescan (5 s)
def test_a_tree_beyond_the_watch_limit_falls_back_to_rescans_and_says_so(
    wtill: WatchTill, folder: Path
) -> None:
    for name in ("a", "b", "c", "d"):
        (folder / name / "inner").mkdir(parents=True)
    wtill.extra["TILLAGE_WATCH_MAX_WATCHES"] = "1"  # the root only
    _watch(wtill, "--debounce-ms", "50")
    watcher = _status(wtill)["watcher"]
    assert isinstance(watcher, dict)
    assert watcher["mode"] == "rescan" and "inotify" in str(watcher["reason"])
    assert wtill.rpc("tillage.changes_since", {"token": None})["dirs"] is None
    wtill.settle()
    before = len(wtill.snapshots())
    (folder / "c" / "inner" / "late.txt").write_text("no event tells of this")

    def sealed_all() -> bool:
        snaps = wtill.snapshots()
        return len(snaps) > before and wtill.json("diff", snaps[0]["id"])["changes"] == []

    wait_for("a periodic rescan to seal the change", sealed_all, timeout=20)


def test_seals_through_the_watcher_equal_full_walks_over_random_edits(
    wtill: WatchTill, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `till snap` that asks the watcher what changed seals the same tree as a walk of
    everything, over random sequences of edits (files, folders, renames, deletions)."""
    from tillage.workspace import attach, seal

    rng = random.Random(1234)
    (folder / "base").mkdir()
    _watch(wtill, "--debounce-ms", "60000")  # only the explicit snaps seal
    ws = attach.require_workspace(wtill.home, folder)
    monkeypatch.setattr(watchstate, "change_source", lambda _ws: None)  # ours walks it all
    try:
        for _round in range(8):
            for _ in range(rng.randint(1, 12)):
                _random_edit(rng, folder)
            snap = wtill.json("snap")["snapshot"]
            full = seal.scan_live(ws)
            assert seal.snapshot_record(ws.store, snap["id"]).tree == full.root.hex()
    finally:
        ws.store.close()


def _random_edit(rng: random.Random, folder: Path) -> None:
    dirs = [p for p in folder.rglob("*") if p.is_dir() and ".tillage" not in p.parts]
    files = [p for p in folder.rglob("*") if p.is_file() and ".tillage" not in p.parts]
    choice = rng.randrange(6)
    if choice == 0 or not files:
        parent = rng.choice([folder, *dirs])
        (parent / f"f{rng.randrange(10**6)}.txt").write_text(str(rng.random()))
    elif choice == 1:
        rng.choice(files).write_text(str(rng.random()))
    elif choice == 2:
        rng.choice(files).unlink()
    elif choice == 3:
        parent = rng.choice([folder, *dirs])
        new = parent / f"d{rng.randrange(10**6)}" / "sub"
        new.mkdir(parents=True)
        (new / "x.txt").write_text("x")
    elif choice == 4 and dirs:
        victim = rng.choice(dirs)
        victim.rename(folder / f"moved{rng.randrange(10**6)}")
    elif dirs:
        import shutil

        shutil.rmtree(rng.choice(dirs))


def test_the_socket_serves_verbs_by_contract_name_with_the_public_error_envelope(
    wtill: WatchTill, folder: Path
) -> None:
    (folder / "a.txt").write_text("a")
    _watch(wtill)
    direct = wtill.json("timeline")
    assert wtill.rpc("timeline.list", {}) == direct
    try:
        wtill.rpc("timeline.show", {"id": "zzzzzzzz"})
    except watchstate.RpcError as err:
        local = wtill("--json", "show", "zzzzzzzz").error
        assert err.code == local["code"] and err.data["name"] == local["name"]
        assert err.data["next"] == local["next"]
    else:
        raise AssertionError("an unknown snapshot must be an error")
    try:
        wtill.rpc("no.such.verb")
    except watchstate.RpcError as err:
        assert err.code == -32601
    else:
        raise AssertionError("an unknown method must be an error")
    sock = watchstate.connect(wtill.home, wtill.workspace_id, 5)
    with sock, sock.makefile("rb") as reader:
        sock.sendall(b"this is not json\n")
        assert json.loads(reader.readline())["error"]["code"] == -32700


def test_the_command_line_runs_in_the_daemon_as_it_runs_locally(
    wtill: WatchTill, folder: Path
) -> None:
    import base64

    (folder / "a.txt").write_text("a")
    _watch(wtill)
    answer = wtill.rpc(
        "tillage.cli",
        {"argv": ["--json", "timeline"], "cwd": str(folder), "env": wtill.env()},
    )
    assert answer["exit"] == 0
    assert json.loads(base64.b64decode(answer["stdout_b64"])) == wtill.json("timeline")


def test_a_storm_that_never_goes_quiet_is_still_sealed(wtill: WatchTill, folder: Path) -> None:
    import threading

    _watch(wtill, "--debounce-ms", "100")  # quiet never comes; the cap is 2 s
    before = len(wtill.snapshots())
    stop = threading.Event()

    def storm() -> None:
        i = 0
        while not stop.is_set():
            (folder / "storm.txt").write_text(str(i))
            i += 1
            time.sleep(0.01)

    writer = threading.Thread(target=storm)
    writer.start()
    try:
        wait_for("a seal during the storm", lambda: len(wtill.snapshots()) > before, 10)
        assert writer.is_alive()
    finally:
        stop.set()
        writer.join()


def test_a_moved_folder_is_watched_under_its_new_name(wtill: WatchTill, folder: Path) -> None:
    (folder / "old" / "deep").mkdir(parents=True)
    (folder / "dest").mkdir()
    _watch(wtill, "--debounce-ms", "60000")
    token = wtill.rpc("tillage.changes_since", {"token": None})["token"]
    (folder / "old").rename(folder / "dest" / "new")
    answer = wtill.rpc("tillage.changes_since", {"token": token})
    assert {"", "dest"} <= set(answer["dirs"])  # both parents
    token = answer["token"]
    (folder / "dest" / "new" / "deep" / "f.txt").write_text("inside the moved tree")
    assert wtill.rpc("tillage.changes_since", {"token": token})["dirs"] == ["dest/new/deep"]
    token = wtill.rpc("tillage.changes_since", {"token": token})["token"]
    (folder / "dest" / "new").rename(folder / "gone")
    import shutil

    shutil.rmtree(folder / "gone")
    (folder / "dest" / "after.txt").write_text("x")
    dirs = set(wtill.rpc("tillage.changes_since", {"token": token})["dirs"])
    assert {"", "dest"} <= dirs <= {"", "dest", "gone", "gone/deep"}  # gone: briefly there
