"""Crashes around the other facts the log holds (INV-5): attachments and pins."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Till
from tests.faults.harness import (
    assert_crashed,
    crash,
    log_records,
    remove_index,
    write_state,
)


@pytest.mark.parametrize("failpoint", ["publog.before_append", "publish.after_log"])
def test_an_attach_killed_around_its_log_line_attaches_the_folder_once(
    till: Till, folder: Path, failpoint: str
) -> None:
    write_state(folder, {"a.txt": b"a\n"})

    proc = crash(till, failpoint, "kill", "--json", "watch", "--no-daemon")
    assert_crashed(proc, failpoint, "kill")

    doc = till.json("watch", "--no-daemon")
    assert doc["workspace"] == str(folder.resolve())
    status = till.json("status")
    assert status["head"]["id"] == doc["head"]["id"]
    attaches = [r for r in log_records(till.home) if r["kind"] == "attach"]
    assert len(attaches) == 1
    assert attaches[0]["body"]["workspace"] == status["id"]
    assert (folder / ".tillage" / "workspace.json").is_file()


@pytest.mark.parametrize(
    ("failpoint", "pinned"), [("publog.before_append", False), ("publish.after_log", True)]
)
def test_a_pin_killed_around_its_log_line_is_pinned_exactly_when_its_line_landed(
    till: Till, folder: Path, failpoint: str, pinned: bool
) -> None:
    write_state(folder, {"a.txt": b"a\n"})
    first = till.json("watch", "--no-daemon")["head"]["id"]

    proc = crash(till, failpoint, "kill", "--json", "pin", first)
    assert_crashed(proc, failpoint, "kill")

    assert till.json("timeline")["snapshots"][0]["pinned"] is pinned
    remove_index(till.home)
    assert till.json("timeline")["snapshots"][0]["pinned"] is pinned
    assert till.json("pin", first)["snapshot"]["pinned"] is True
    pins = [r for r in log_records(till.home) if r["kind"] == "pin"]
    assert len(pins) == 1


def test_a_damaged_index_answers_no_internal_error_and_verify_repair_rebuilds_it(
    till: Till, folder: Path
) -> None:
    write_state(folder, {"a.txt": b"a\n", "b/c.txt": b"c\n"})
    till.json("watch", "--no-daemon")
    till.json("pin", till.json("snap", "-m", "second")["snapshot"]["id"])
    before = till.json("timeline")["snapshots"]
    remove_index(till.home)
    (till.home / "index.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x5a" * 8192)

    status = till("--json", "status")
    assert "Traceback" not in status.stderr
    assert status.code == 0 or status.error["code"] == -32067, status
    repaired = till("--json", "verify", "--repair")
    assert repaired.code == 0, repaired
    assert till.json("timeline")["snapshots"] == before
