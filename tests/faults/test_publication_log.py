"""A damaged or torn publication log (INV-5, INV-6): public errors, never tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Till
from tests.faults.harness import (
    STATE_A,
    log_path,
    log_records,
    logged_snapshots,
    manifest,
    patch_file,
    remove_index,
    rewind,
    verify_store,
    write_state,
)


def _snapshots(till: Till, folder: Path) -> list[str]:
    """Attaches and seals twice: the log holds an attach line and two snapshot lines."""
    write_state(folder, STATE_A)
    ids = [till.json("watch", "--no-daemon")["head"]["id"]]
    (folder / "n.txt").write_text("n\n")
    return [*ids, till.json("snap")["snapshot"]["id"]]


def _middle_line(home: Path) -> tuple[int, bytes]:
    """Returns the byte offset and the text of a line in the middle of the log."""
    lines = log_path(home).read_bytes().splitlines(keepends=True)
    mid = len(lines) // 2
    return sum(len(line) for line in lines[:mid]), lines[mid]


def _damage_middle_line(home: Path, how: str) -> None:
    start, line = _middle_line(home)
    if how == "digit":  # still valid JSON: only the hash chain can tell
        at = line.index(b'"at":') + 6
        patch_file(log_path(home), start + at, bytes([line[at] ^ 1]))
    else:  # not even UTF-8
        patch_file(log_path(home), start + line.index(b'"kind"'), b"\xff")


@pytest.mark.parametrize("how", ["digit", "garbage"])
def test_a_damaged_line_in_the_middle_of_the_log_is_a_public_integrity_error(
    till: Till, folder: Path, how: str
) -> None:
    _snapshots(till, folder)
    live = manifest(folder)
    _damage_middle_line(till.home, how)
    remove_index(till.home)  # the next command must read the whole log again
    log_before = log_path(till.home).read_bytes()

    for args in (("status",), ("timeline",), ("snap",)):
        run = till("--json", *args)
        assert run.code == 1, (args, run)
        assert run.error["code"] == -32067
        assert run.error["next"]
        assert "Traceback" not in run.stderr
    plain = till("status")
    assert plain.code == 1 and "Traceback" not in plain.stderr
    assert "-32067" in plain.stderr
    assert log_path(till.home).read_bytes() == log_before
    assert manifest(folder) == live


def test_verify_reports_a_damaged_log_line_as_a_problem(till: Till, folder: Path) -> None:
    _snapshots(till, folder)
    _damage_middle_line(till.home, "digit")

    verify = verify_store(till)
    assert verify["ok"] is False
    assert any("publication.log" in p["object"] for p in verify["problems"])
    remove_index(till.home)
    verify = verify_store(till)
    assert verify["ok"] is False


def test_a_torn_line_at_the_end_of_the_log_is_ignored_and_cut_by_the_next_snap(
    till: Till, folder: Path
) -> None:
    ids = _snapshots(till, folder)
    state = manifest(folder)
    last_line = log_path(till.home).read_bytes().splitlines(keepends=True)[-1]
    with open(log_path(till.home), "ab") as f:
        f.write(last_line[: len(last_line) // 2])  # a crash half-way through an append

    status = till.json("status")
    assert status["head"]["id"] == ids[-1]
    assert status["snapshots"] == len(ids)
    (folder / "n.txt").write_text("after the tear\n")
    new = till.json("snap")["snapshot"]
    assert new["parent"] == ids[-1]
    assert logged_snapshots(till.home) == [*ids, new["id"]]
    assert verify_store(till)["ok"] is True
    timeline = till.json("timeline")["snapshots"]
    remove_index(till.home)
    assert till.json("timeline")["snapshots"] == timeline
    rewind(till, ids[-1])
    assert manifest(folder) == state


def test_a_last_log_line_cut_short_is_no_longer_a_snapshot_anywhere(
    till: Till, folder: Path
) -> None:
    ids = _snapshots(till, folder)
    path = log_path(till.home)
    data = path.read_bytes()
    # The last snapshot's line (an `operation` line follows it: the snap's) cut short there,
    # its final newline and some bytes before it gone with everything after.
    end = data.rindex(b'"kind":"snapshot"')
    end = data.index(b"\n", end) + 1
    path.write_bytes(data[: end - 40])

    status = till.json("status")
    assert status["head"]["id"] == ids[-2]
    (folder / "n.txt").write_text("after the cut\n")
    new = till.json("snap")["snapshot"]
    assert new["parent"] == ids[-2]
    assert logged_snapshots(till.home) == [*ids[:-1], new["id"]]
    timeline = till.json("timeline")["snapshots"]
    remove_index(till.home)
    assert till.json("timeline")["snapshots"] == timeline
    log_records(till.home)


@pytest.mark.parametrize("how", ["digit", "garbage"])
def test_verify_repair_salvages_a_damaged_log_and_the_store_works_again(
    till: Till, folder: Path, how: str
) -> None:
    ids = _snapshots(till, folder)
    live = manifest(folder)
    _damage_middle_line(till.home, how)
    remove_index(till.home)
    assert till("--json", "status").code == 1

    repaired = verify_store(till, "--repair")
    # Issue 6: --repair reports the state after repairing, and what it fixed.
    assert repaired["ok"] is True and repaired["repaired"] >= 1
    assert any(f["object"] == "publication.log" for f in repaired["fixed"])
    assert verify_store(till)["ok"] is True
    status = till.json("status")
    assert status["head"]["id"] in ids
    survivors = [s["id"] for s in till.json("timeline")["snapshots"]]
    assert set(survivors) <= set(ids) and survivors
    (folder / "n.txt").write_text("after the repair\n")
    new = till.json("snap")["snapshot"]
    assert new["parent"] == survivors[0]
    rewind(till, ids[-1])  # the snapshot whose line survived the damage
    assert manifest(folder) == live
    assert verify_store(till)["ok"] is True


def test_repair_brings_back_a_snapshot_whose_log_line_was_destroyed(
    till: Till, folder: Path
) -> None:
    ids = _snapshots(till, folder)
    live = manifest(folder)
    lines = log_path(till.home).read_bytes().splitlines(keepends=True)
    last = lines[-1]
    assert ids[-1].encode() in last
    log_path(till.home).write_bytes(b"".join(lines[:-1]) + b"{garbage}\n")
    remove_index(till.home)
    assert till("--json", "timeline").code == 1

    verify_store(till, "--repair")
    listed = [s["id"] for s in till.json("timeline")["snapshots"]]
    assert listed[0] == ids[-1], "the newest snapshot is back, and still the newest"
    assert set(ids) <= set(listed)
    (folder / "n.txt").write_text("changed again\n")
    rewind(till, ids[-1])
    assert manifest(folder) == live


def test_repair_drops_a_log_line_edited_in_place_instead_of_replaying_it(
    till: Till, folder: Path
) -> None:
    """A line that still parses but lost a field (a key renamed in place) is damage: a repair
    drops it, re-publishes what it named from the packs, and every command works after."""
    ids = _snapshots(till, folder)
    live = manifest(folder)
    lines = log_path(till.home).read_bytes().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if b'"kind":"snapshot"' in line)
    assert b'"files"' in lines[last]
    lines[last] = lines[last].replace(b'"files"', b'"filez"', 1)
    log_path(till.home).write_bytes(b"".join(lines))
    remove_index(till.home)

    verify_store(till, "--repair")
    for args in (("status",), ("timeline",), ("events",)):
        run = till("--json", *args)
        assert run.code == 0 and "Traceback" not in run.stderr, (args, run)
    assert {s["id"] for s in till.json("timeline")["snapshots"]} >= set(ids)
    rewind(till, ids[-1])
    assert manifest(folder) == live
    assert verify_store(till)["ok"] is True
