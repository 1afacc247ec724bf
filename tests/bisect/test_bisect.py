"""`till bisect`: the first snapshot where a check fails, through real `till` processes.

Every test checks what a user relies on: the answer, few probes, the workspace's files and
timeline untouched (but for the sealed present when --bad is not given), and no probe folder
left behind, beside the workspace or in the store.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Till
from tests.helpers import manifest

CHECK = "touch probed-$TILLAGE_BISECT_SNAPSHOT; grep -qx ok state.txt"


def build(till: Till, folder: Path, states: list[str]) -> list[str]:
    """A timeline with one snapshot per state (state.txt holds it), oldest first; a read-only
    folder in each, so probes must remove what they cannot write."""
    ro = folder / "ro"
    ro.mkdir()
    (ro / "kept.txt").write_text("read-only folder\n")
    ro.chmod(0o555)
    ids = []
    for n, state in enumerate(states):
        (folder / "state.txt").write_text(state + "\n")
        (folder / "n.txt").write_text(f"{n}\n")
        if n == 0:
            ids.append(till.json("watch", "--no-daemon")["head"]["id"])
        else:
            ids.append(till.json("snap", "-m", f"state {n}")["snapshot"]["id"])
    return ids


def leftovers(till: Till, folder: Path) -> list[str]:
    """Probe folders anywhere a bisect could leave one: the store's tmp dir and beside the
    workspace."""
    tmp = till.home / "tmp"
    found = [n for n in os.listdir(tmp) if n.startswith("bisect-")] if tmp.exists() else []
    return found + sorted(set(os.listdir(folder.parent)) - {folder.name})


def running(pid: int, timeout: float = 10.0) -> bool:
    """Whether `pid` is still a live process (a zombie waiting for its reaper is not) after
    waiting up to `timeout` seconds for it to go."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            return False
        if fields[0] == "Z":
            return False
        time.sleep(0.02)
    return True


def timeline(till: Till) -> list[str]:
    return [s["id"] for s in till.json("timeline", "-n", "1000")["snapshots"]]


def test_finds_the_first_bad_snapshot_in_a_few_probes_and_touches_nothing(
    till: Till, folder: Path
) -> None:
    ids = build(till, folder, ["ok"] * 6 + ["fail"] * 4)
    before, history = manifest(folder), timeline(till)
    stale = till.home / "tmp" / "bisect-0123456789abcdef"  # a killed bisect's area
    (stale / "project").mkdir(parents=True)

    doc = till.json("bisect", "--", CHECK)

    assert doc["outcome"] == "found"
    assert doc["first_bad"]["id"] == ids[6]
    assert doc["last_good"]["id"] == ids[5]
    assert doc["candidates"] == [ids[6]]
    assert doc["range"] == {"good": doc["last_good"], "bad": doc["first_bad"], "remaining": 1}
    assert doc["sealed"] is None  # the folder was as its head: nothing to seal
    assert 2 < doc["probe_count"] < 10 and doc["probe_count"] == len(doc["probes"])
    # The ends first (good, then bad), each probe's verdict from its exit status.
    assert [p["snapshot"]["id"] for p in doc["probes"][:2]] == [ids[0], ids[9]]
    for probe in doc["probes"]:
        position = ids.index(probe["snapshot"]["id"])
        assert (probe["verdict"], probe["exit_code"]) == (
            ("good", 0) if position < 6 else ("bad", 1)
        )
    assert doc["next"] == f"till diff {ids[5][:12]} --to {ids[6][:12]}"
    assert manifest(folder) == before  # no probe ran here (no probed-* file), nothing changed
    assert timeline(till) == history
    assert leftovers(till, folder) == []


def test_without_bad_the_present_is_sealed_first_and_files_stay_as_they_are(
    till: Till, folder: Path
) -> None:
    ids = build(till, folder, ["ok", "ok", "ok", "ok"])
    (folder / "state.txt").write_text("fail\n")  # not sealed yet
    before, history = manifest(folder), timeline(till)

    doc = till.json("bisect", "--", CHECK)

    sealed = doc["sealed"]
    assert sealed is not None and sealed["trigger"] == "manual"
    assert doc["first_bad"]["id"] == sealed["id"]
    assert doc["last_good"]["id"] == ids[3]
    assert timeline(till) == [sealed["id"], *history]  # only the present was added
    assert manifest(folder) == before
    assert leftovers(till, folder) == []


def test_ends_that_do_not_hold_are_errors_that_name_the_end(till: Till, folder: Path) -> None:
    ids = build(till, folder, ["ok", "ok", "fail", "fail", "fail"])

    good_fails = till("--json", "bisect", "--good", ids[3], "--bad", ids[4], "--", CHECK)
    assert good_fails.code == 1
    assert good_fails.error["name"] == "bisect.good_fails"
    assert good_fails.error["code"] == -32180
    # Nothing else ran: only the good end's probe.
    assert [p["snapshot"] for p in good_fails.error["details"]["probes"]] == [ids[3]]

    bad_passes = till("--json", "bisect", "--good", ids[0], "--bad", ids[1], "--", CHECK)
    assert bad_passes.code == 1
    assert (bad_passes.error["name"], bad_passes.error["code"]) == ("bisect.bad_passes", -32181)

    backwards = till("--json", "bisect", "--good", ids[4], "--bad", ids[1], "--", CHECK)
    assert backwards.code == 1
    assert backwards.error["code"] == -32066  # invalid_argument: good is not an ancestor
    assert backwards.error["name"] == "bisect.bad_range"

    same = till("--json", "bisect", "--good", ids[2], "--bad", ids[2][:8], "--", CHECK)
    assert (same.code, same.error["name"]) == (1, "bisect.bad_range")

    unknown = till("--json", "bisect", "--good", "abcdef123456", "--", CHECK)
    assert (unknown.code, unknown.error["code"]) == (1, -32061)
    malformed = till("--json", "bisect", "--bad", "xyz", "--", CHECK)
    assert malformed.code == 1 and malformed.error["code"] == -32066

    no_command = till("--json", "bisect", "--good", ids[0])
    assert (no_command.code, no_command.error["code"]) == (1, -32066)
    assert list(folder.glob("probed-*")) == []
    assert leftovers(till, folder) == []


def test_a_timeline_of_one_snapshot_has_nothing_to_search(till: Till, folder: Path) -> None:
    build(till, folder, ["fail"])

    run = till("--json", "bisect", "--", CHECK)

    assert (run.code, run.error["code"], run.error["name"]) == (1, -32066, "bisect.bad_range")
    assert list(folder.glob("probed-*")) == []
    assert leftovers(till, folder) == []


def test_untestable_snapshots_exit_125_and_a_neighbour_is_probed(till: Till, folder: Path) -> None:
    check = "grep -q untestable state.txt && exit 125; " + CHECK
    states = ["ok", "ok", "ok", "ok", "untestable", "ok", "fail", "fail", "fail", "fail"]
    ids = build(till, folder, states)

    doc = till.json("bisect", "--", check)

    assert doc["outcome"] == "found"
    assert (doc["first_bad"]["id"], doc["last_good"]["id"]) == (ids[6], ids[5])
    skipped = [p for p in doc["probes"] if p["verdict"] == "skip"]
    assert [p["snapshot"]["id"] for p in skipped] == [ids[4]]
    assert skipped[0]["exit_code"] == 125


def test_when_only_skipped_snapshots_are_left_the_candidates_say_which(
    till: Till, folder: Path
) -> None:
    check = "grep -q untestable state.txt && exit 125; " + CHECK
    ids = build(till, folder, ["ok", "ok", "untestable", "fail", "fail"])

    doc = till.json("bisect", "--", check)

    assert doc["outcome"] == "only_skipped_left"
    assert doc["candidates"] == [ids[2], ids[3]]
    # ids[2] or ids[3]: the check cannot tell, so no culprit is named.
    assert doc["first_bad"] is None
    assert doc["last_good"]["id"] == ids[1]
    assert (doc["range"]["good"]["id"], doc["range"]["bad"]["id"]) == (ids[1], ids[3])
    assert doc["range"]["remaining"] == 2
    assert doc["next"] == f"till diff {ids[1][:12]} --to {ids[3][:12]}"


def test_limit_names_no_culprit_but_the_narrowed_range_and_how_to_go_on(
    till: Till, folder: Path
) -> None:
    ids = build(till, folder, ["ok"] * 6 + ["fail"] * 4)

    doc = till.json("bisect", "--limit", "3", "--", CHECK)

    assert doc["outcome"] == "limit_reached"
    assert doc["probe_count"] == 3
    assert doc["steps_left"] >= 1
    # Three probes (the ends, then the middle, ids[4], good) leave ids[5..9]: not proven.
    assert doc["first_bad"] is None
    narrowed = doc["range"]
    good, bad = ids.index(narrowed["good"]["id"]), ids.index(narrowed["bad"]["id"])
    assert (good, bad) == (4, 9)
    assert narrowed["good"] == doc["last_good"]
    assert narrowed["remaining"] == len(doc["candidates"]) == bad - good
    assert doc["candidates"] == ids[good + 1 : bad + 1]
    assert doc["next"] == f"till bisect --good {ids[good][:12]} --bad {ids[bad][:12]} -- '{CHECK}'"
    too_small = till("--json", "bisect", "--limit", "1", "--", CHECK)
    assert (too_small.code, too_small.error["code"]) == (1, -32066)
    assert leftovers(till, folder) == []


def test_the_next_command_of_a_limited_bisect_finds_the_culprit(till: Till, folder: Path) -> None:
    ids = build(till, folder, ["ok"] * 6 + ["fail"] * 4)
    limited = till.json("bisect", "--limit", "3", "--", CHECK)
    words = shlex.split(limited["next"])
    assert words[:2] == ["till", "bisect"]

    doc = till.json(*words[1:])  # as a shell would hand it over

    assert doc["outcome"] == "found"
    assert (doc["first_bad"]["id"], doc["last_good"]["id"]) == (ids[6], ids[5])
    assert doc["range"]["bad"] == doc["first_bad"] and doc["range"]["remaining"] == 1


def test_human_page_of_a_limited_bisect_says_it_found_nothing_yet(till: Till, folder: Path) -> None:
    ids = build(till, folder, ["ok"] * 6 + ["fail"] * 4)

    run = till("bisect", "--limit", "3", "--", CHECK)

    assert run.code == 0, run.stderr
    assert "First bad" not in run.stdout
    assert f"narrowed to 5 candidates between {ids[4][:12]} and {ids[9][:12]}" in run.stdout
    assert "larger --limit" in run.stdout
    assert f"till bisect --good {ids[4][:12]} --bad {ids[9][:12]} -- '{CHECK}'" in run.stdout


@pytest.mark.process
def test_a_check_killed_or_above_127_aborts_with_the_probes_so_far(
    till: Till, folder: Path
) -> None:
    check = "grep -q boom state.txt && kill -KILL $$; " + CHECK
    build(till, folder, ["ok", "ok", "ok", "boom", "fail"])

    run = till("--json", "bisect", "--", check)

    assert run.code == 1
    assert (run.error["name"], run.error["code"]) == ("bisect.aborted", -32183)
    assert run.error["details"]["exit_code"] == 128 + signal.SIGKILL
    assert run.error["details"]["probes"][-1]["verdict"] is None
    assert leftovers(till, folder) == []


def test_human_page_names_the_first_bad_snapshot_and_the_diff_to_run(
    till: Till, folder: Path
) -> None:
    ids = build(till, folder, ["ok", "ok", "fail"])

    run = till("bisect", "--", CHECK)

    assert run.code == 0, run.stderr
    assert "First bad" in run.stdout and ids[2][:12] in run.stdout
    assert "state 2" in run.stdout  # its label
    assert f"till diff {ids[1][:12]} --to {ids[2][:12]}" in run.stdout


@pytest.mark.process
def test_ctrl_c_during_a_probe_removes_the_probe_folder(till: Till, folder: Path) -> None:
    build(till, folder, ["ok", "ok", "fail"])
    before = manifest(folder)
    started = folder.parent / "probe-started"  # outside the workspace: the test's signal
    # The probe says where it runs and its process ID, then waits to be interrupted.
    check = f'echo "$PWD $$" > "{started}.tmp"; mv "{started}.tmp" "{started}"; exec sleep 60'
    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", "bisect", "--", check],
        cwd=folder,
        env=till.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    probe_dir, check_pid = "", 0
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the probe never started"
            time.sleep(0.02)
        probe_dir, pid = started.read_text().split()
        check_pid = int(pid)
        assert Path(probe_dir).is_dir() and Path(probe_dir) != folder
        proc.send_signal(signal.SIGINT)  # to till only, as a SIGTERM would be
        out, _err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        if check_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(check_pid, signal.SIGKILL)
    started.unlink()
    assert proc.returncode == 130
    assert not running(check_pid)  # the check was stopped with till, not left behind
    assert '"interrupted"' in out
    assert not Path(probe_dir).exists()
    assert manifest(folder) == before
    assert leftovers(till, folder) == []
