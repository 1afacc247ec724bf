"""Human output: sizes, relative times, pages per verb, colour and progress, as people read them."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tillage.core.progress import Progress
from tillage.hosts.cli import units
from tillage.hosts.cli.colour import Style, wanted
from tillage.hosts.cli.human import line, render
from tillage.hosts.cli.progress import ProgressPrinter, describe

NOW = units.parse_rfc3339("2026-12-01T12:00:00Z") or 0.0
ID_A = "a" * 64
ID_B = "b" * 64


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Local time is UTC in these tests, so dates and "yesterday" do not depend on the machine."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def snap(sid: str = ID_A, **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": sid,
        "short": sid[:12],
        "sealed_at": "2026-12-01T11:56:59.123456Z",
        "trigger": "manual",
        "label": None,
        "grade": "exact",
        "pinned": False,
        "parent": None,
        "files": 2,
        "bytes": 262987956,
        "agent": None,
        "turn": None,
        "session": None,
    }
    doc.update(fields)
    return doc


# -- sizes and times ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (262987956, "251 MiB"),
        (1024**3 * 3 // 2, "1.5 GiB"),
        (1024 * 1024 - 1, "1.0 MiB"),
        (5 * 1024**5, "5.0 PiB"),
    ],
)
def test_sizes_read_in_binary_units(n: int, text: str) -> None:
    assert units.size(n) == text


def test_a_size_change_says_which_way_it_went() -> None:
    assert units.size_change(None, 2048) == "+2.0 KiB"
    assert units.size_change(300, None) == "-300 B"
    assert units.size_change(10, 10) == "±0 B"
    assert units.size_change(None, None) == ""


@pytest.mark.parametrize(
    ("stamp", "text"),
    [
        ("2026-12-01T11:59:58Z", "just now"),
        ("2026-12-01T11:59:30Z", "30 s ago"),
        ("2026-12-01T11:57:00.123456Z", "2 min ago"),
        ("2026-12-01T10:00:00Z", "2 h ago"),
        ("2026-11-30T09:15:00Z", "yesterday 09:15"),
        ("2026-11-29T23:59:00Z", "2026-11-29 23:59"),
        ("2025-01-02T03:04:05Z", "2025-01-02 03:04"),
    ],
)
def test_times_are_told_relative_to_now(stamp: str, text: str) -> None:
    assert units.when_text(stamp, NOW) == text


def test_a_time_that_is_not_rfc_3339_is_shown_as_it_came() -> None:
    assert units.when_text("sometime", NOW) == "sometime"


def test_tillage_now_takes_epoch_seconds_or_iso_8601() -> None:
    assert units.parse_now(str(int(NOW))) == NOW
    assert units.parse_now("2026-12-01T12:00:00Z") == NOW
    assert units.parse_now("2026-12-01T13:00:00+01:00") == NOW
    assert units.parse_now("2026-12-01T12:00:00") == NOW
    assert units.parse_now("tomorrow") is None
    assert units.parse_now("") is None


def test_an_eta_reads_in_seconds_minutes_or_hours() -> None:
    assert units.duration(8.4) == "8 s"
    assert units.duration(185) == "3 min 5 s"
    assert units.duration(4380) == "1 h 13 min"


# -- pages -------------------------------------------------------------------------------------


def test_a_timeline_reads_like_a_log_with_aligned_columns_and_no_raw_numbers() -> None:
    doc = {
        "snapshots": [
            snap(ID_A, label="precious", pinned=True, files=12345),
            snap(ID_B, trigger="initial", files=1, bytes=3, sealed_at="2026-12-01T09:00:00Z"),
        ]
    }
    text = render("timeline.list", doc, now=NOW)
    first, second = text.splitlines()
    assert first.split() == [
        ID_A[:12],
        "3",
        "min",
        "ago",
        "manual",
        "12,345",
        "files",
        "251",
        "MiB",
        "pinned",
        "precious",
    ]
    assert second.split() == [ID_B[:12], "3", "h", "ago", "initial", "1", "file", "3", "B"]
    assert first.index("manual") == second.index("initial")  # aligned columns
    assert first.index("files") == second.index("file")
    assert "262987956" not in text and "123456" not in text and "exact" not in text


def test_a_partial_snapshot_says_so_in_the_timeline() -> None:
    text = render("timeline.list", {"snapshots": [snap(grade="partial")]}, now=NOW)
    assert "partial" in text


def test_diff_says_its_direction_and_the_size_of_each_change() -> None:
    changes = [
        {"path": "a.txt", "kind": "added", "old_size": None, "new_size": 2048},
        {"path": "b.txt", "kind": "deleted", "old_size": 300, "new_size": None},
        {"path": "c.txt", "kind": "modified", "old_size": 10, "new_size": 1034},
    ]
    doc = {"changes": changes, "from_snapshot": snap(), "to_snapshot": None}
    lines = render("timeline.diff", doc, now=NOW).splitlines()
    assert lines[0].startswith(f"From {ID_A[:12]} (3 min ago, manual) to the live folder")
    assert [line.split() for line in lines[1:]] == [
        ["added", "+2.0", "KiB", "a.txt"],
        ["deleted", "-300", "B", "b.txt"],
        ["modified", "+1.0", "KiB", "c.txt"],
    ]
    between = render("timeline.diff", {**doc, "to_snapshot": snap(ID_B)}, now=NOW)
    assert f"to {ID_B[:12]} (3 min ago, manual)" in between


def test_a_mode_change_shows_no_size() -> None:
    change = {"path": "run.sh", "kind": "mode_changed", "old_size": 5, "new_size": 5}
    doc = {"changes": [change], "from_snapshot": snap(), "to_snapshot": None}
    assert render("timeline.diff", doc, now=NOW).splitlines()[1].split() == ["mode", "run.sh"]


def test_a_diff_with_no_changes_says_so() -> None:
    doc = {"changes": [], "from_snapshot": snap(), "to_snapshot": None}
    assert render("timeline.diff", doc, now=NOW).startswith("No changes from ")


def rewind_doc(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "snapshot": snap(),
        "changes": [{"path": "b", "kind": "deleted", "old_size": 2, "new_size": None}],
        "applied": False,
        "undo": None,
        "rescued": [],
        "rescue": None,
        "next": f"till rewind {ID_A} --yes",
    }
    doc.update(fields)
    return doc


def test_a_dry_run_ends_with_the_exact_command_to_apply_it() -> None:
    text = render("workspace.rewind", rewind_doc(), now=NOW)
    assert text.splitlines()[-1].strip() == f"till rewind {ID_A} --yes"
    assert "Nothing was changed" in text
    assert "rescue" not in text and "(none)" not in text and " -\n" not in text


def test_an_applied_rewind_ends_with_the_exact_command_to_undo_it() -> None:
    doc = rewind_doc(applied=True, undo=ID_B, next=f"till rewind {ID_B} --yes")
    text = render("workspace.rewind", doc, now=NOW)
    assert text.splitlines()[-1].strip() == f"till rewind {ID_B} --yes"
    assert "undo" in text
    assert "rescue" not in text and "(none)" not in text


def test_rescued_files_are_shown_only_when_there_are_some() -> None:
    doc = rewind_doc(applied=True, undo=ID_B, rescued=["c.txt"], rescue="c" * 64)
    text = render("workspace.rewind", doc, now=NOW)
    assert "c.txt" in text and "c" * 12 in text


def test_a_preview_before_a_prompt_leaves_off_the_command() -> None:
    text = render("workspace.rewind", rewind_doc(), now=NOW, footer=False)
    assert "till rewind" not in text


def test_a_field_a_page_does_not_know_is_still_shown() -> None:
    text = render("timeline.snap", {"snapshot": snap(), "policy_skipped": ["bad line"]}, now=NOW)
    assert "policy skipped:" in text and "bad line" in text


def test_a_verb_without_a_page_gets_the_generic_listing_with_human_units() -> None:
    doc = {"bytes_reclaimed": 5 * 1024 * 1024, "removed_at": "2026-12-01T11:00:00Z", "x": None}
    text = render("store.tidy", doc, now=NOW)
    assert "bytes reclaimed: 5.0 MiB" in text
    assert "removed at: 1 h ago" in text
    assert "x:" not in text


def test_status_verify_show_pin_and_forget_read_as_sentences() -> None:
    status = {
        "attached": True,
        "workspace": "/w",
        "id": "w1",
        "head": snap(),
        "watching": False,
        "snapshots": 3,
        "store": {"path": "/s", "bytes": 100885},
        "fidelity": None,
    }
    text = render("workspace.status", status, now=NOW)
    assert "98.5 KiB in /s" in text and "3 snapshots" in text and "100885" not in text
    verify = {"ok": True, "objects": 7, "problems": [], "repaired": 0, "damaged_snapshots": []}
    assert render("store.verify", verify, now=NOW) == "The store is sound: 7 objects checked.\n"
    broken = {**verify, "ok": False, "problems": [{"object": "f" * 64, "problem": "missing"}]}
    assert render("store.verify", broken, now=NOW).splitlines()[-1].strip() == (
        "till verify --repair"
    )
    shown = render(
        "timeline.show",
        {"snapshot": snap(parent=ID_B), "changes_from_parent": 4, "tree": "t", "fidelity": []},
        now=NOW,
    )
    assert "4 paths changed from its parent" in shown and "2026-12-01 11:56:59" in shown
    assert render("timeline.pin", {"snapshot": snap(pinned=True)}, now=NOW).startswith("Pinned ")
    assert render("workspace.forget", {"workspace": "/w", "purged": False}, now=NOW).startswith(
        "Forgot /w"
    )


# -- colour ------------------------------------------------------------------------------------


def test_colour_is_on_only_where_a_terminal_wants_it() -> None:
    assert wanted("auto", is_tty=True, env={}, json_mode=False)
    assert not wanted("auto", is_tty=False, env={}, json_mode=False)
    assert not wanted("auto", is_tty=True, env={"NO_COLOR": "1"}, json_mode=False)
    assert wanted("auto", is_tty=True, env={"NO_COLOR": ""}, json_mode=False)
    assert wanted("always", is_tty=False, env={"NO_COLOR": "1"}, json_mode=False)
    assert not wanted("never", is_tty=True, env={}, json_mode=False)
    assert not wanted("always", is_tty=True, env={}, json_mode=True)


def test_colour_never_breaks_the_columns() -> None:
    doc = {"snapshots": [snap(ID_A, label="x"), snap(ID_B, trigger="pre_rewind")]}
    plain = render("timeline.list", doc, now=NOW)
    painted = render("timeline.list", doc, now=NOW, style=Style(True))
    assert "\x1b[" in painted
    stripped = painted
    for code in ("\x1b[0m", "\x1b[33m", "\x1b[36m", "\x1b[1m"):
        stripped = stripped.replace(code, "")
    assert stripped == plain


# -- progress ----------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def sealing(files: int, done: int) -> Progress:
    return Progress("sealing", files, 0, done, 0)


def test_an_operation_shorter_than_a_second_shows_no_progress() -> None:
    out, clock = io.StringIO(), Clock()
    printer = ProgressPrinter(out, clock=clock, width=200)
    for i in range(100):
        clock.t = i * 0.009
        printer(sealing(i, i * 1000))
    printer.finish()
    assert out.getvalue() == ""


def test_a_long_operation_redraws_at_most_ten_times_a_second_and_ends_the_line() -> None:
    out, clock = io.StringIO(), Clock()
    printer = ProgressPrinter(out, clock=clock, width=200)
    for i in range(1, 3001):  # three seconds, a report every millisecond
        clock.t = i / 1000
        printer(sealing(i, i * 1024 * 1024))
    printer.finish()
    text = out.getvalue()
    draws = text.count("\r")
    assert 15 <= draws <= 22  # two seconds shown at ten a second, plus the final line
    assert text.endswith("\n") and text.count("\n") == 1
    final = text.rsplit("\r", 1)[1]
    assert "sealing  3,000 files  2.9 GiB  1000 MiB/s" in final


def test_progress_with_totals_shows_an_eta_and_a_new_stage_gets_its_own_line() -> None:
    out, clock = io.StringIO(), Clock()
    printer = ProgressPrinter(out, clock=clock, width=200)
    printer(Progress("staging", 0, 10, 0, 1024))
    clock.t = 2.0
    printer(Progress("staging", 10, 10, 1024, 1024))
    printer(Progress("applying", 0, 10, 0, 100 * 1024 * 1024))
    clock.t = 4.0
    printer(Progress("applying", 5, 10, 50 * 1024 * 1024, 100 * 1024 * 1024))
    assert "applying  5/10 files  50.0 MiB/100 MiB  25.0 MiB/s  ETA 2 s" in out.getvalue()
    printer.finish()
    staging, applying, _ = out.getvalue().split("\n")
    assert "staging  10/10 files" in staging
    assert applying.endswith("applying  5/10 files  50.0 MiB/100 MiB  25.0 MiB/s\x1b[K")


def test_a_progress_line_never_wraps_the_terminal() -> None:
    out, clock = io.StringIO(), Clock()
    printer = ProgressPrinter(out, clock=clock, width=20)
    printer(sealing(0, 0))
    clock.t = 5
    printer(sealing(12345, 10**9))
    line = out.getvalue().split("\r")[1].split("\x1b")[0]
    assert len(line) == 19


def test_the_rate_and_eta_come_from_the_stage_so_far() -> None:
    assert describe(Progress("sealing", 3, 0, 0, 0), 0.0) == "sealing  3 files  0 B"
    assert "ETA 1 s" in describe(Progress("applying", 5, 10, 0, 0), 1.0)


def test_skipped_policy_lines_are_named_by_file_and_line() -> None:
    problem = {"file": ".tillagepolicy", "line": 3, "text": "[z-a]", "problem": "bad range"}
    doc = {"snapshot": snap(), "policy_problems": [problem]}
    assert ".tillagepolicy:3: `[z-a]`: bad range" in render("timeline.snap", doc, now=NOW)
    status = render("workspace.status", {"workspace": "/w", "policy_problems": [problem]}, now=NOW)
    assert "Skipped 1 policy line (the others still apply):" in status


def test_verify_says_what_it_reclaimed_and_finished() -> None:
    doc = {
        "ok": True,
        "objects": 3,
        "problems": [],
        "repaired": 0,
        "damaged_snapshots": [],
        "fixed": [],
        "reclaimed_packs": 4,
        "reclaimed_bytes": 95 * 1024 * 1024,
        "finished_rewinds": ["r"],
    }
    text = render("store.verify", doc, now=NOW)
    assert "Reclaimed 4 packs (95.0 MiB)" in text and "Finished 1 interrupted rewind." in text
    assert "reclaimed bytes" not in text


def test_hard_links_put_back_as_files_are_named() -> None:
    doc = rewind_doc(applied=True, undo=ID_B, unlinked=["d/x"], next=f"till rewind {ID_B} --yes")
    text = render("workspace.rewind", doc, now=NOW)
    assert "1 hard link came back as separate files" in text and "  d/x" in text


def test_reports_from_several_threads_draw_whole_lines() -> None:
    import threading

    out, clock = io.StringIO(), Clock()
    printer = ProgressPrinter(out, clock=clock, width=200, interval=0)
    printer(sealing(0, 0))
    clock.t = 2

    def report() -> None:
        for i in range(200):
            printer(sealing(i, i))

    threads = [threading.Thread(target=report) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    printer.finish()
    drawn = out.getvalue().rstrip("\n").split("\r")[1:]
    assert len(drawn) >= 800
    assert all(d.startswith("sealing  ") and d.endswith("\x1b[K") for d in drawn)


def test_watch_says_it_attached_and_sealed_and_nothing_else() -> None:
    doc = {
        "workspace": "/w",
        "head": snap(trigger="initial"),
        "watching": False,
        "attached_now": True,
        "resumed": False,
        "snapshots": 1,
        "note": None,
        "policy_problems": [],
    }
    lines = render("workspace.watch", doc, now=NOW).splitlines()
    assert lines[0] == "Attached /w"
    assert lines[1].startswith(f"Sealed {ID_A[:12]}  3 min ago  initial  2 files  251 MiB")
    assert len(lines) == 2


def test_a_file_name_cannot_drive_the_terminal() -> None:
    evil = "a\x1b[2J\nadded  +1 B  fake\x07"
    change = {"path": evil, "kind": "added", "old_size": None, "new_size": 1}
    doc = {"changes": [change], "from_snapshot": snap(label="x\x1b]0;t\x07"), "to_snapshot": None}
    text = render("timeline.diff", doc, now=NOW, style=Style(True))
    assert "\x1b[2J" not in text and "\x07" not in text and "\x1b]" not in text
    assert len(text.splitlines()) == 2
    assert "a\\x1b[2J\\nadded  +1 B  fake\\x07" in text
    note = render("workspace.forget", {"workspace": "/w", "note": "one\ntwo"}, now=NOW)
    assert "one\ntwo" in note  # free text keeps its lines


def test_a_long_rewind_lists_the_first_changes_and_how_to_see_the_rest() -> None:
    many = [
        {"path": f"f{i:03}", "kind": "added", "old_size": None, "new_size": 1} for i in range(50)
    ]
    applied = rewind_doc(applied=True, undo=ID_B, changes=many, next="till rewind x --yes")
    text = render("workspace.rewind", applied, now=NOW)
    assert "f019" in text and "f020" not in text
    assert f"… and 30 more (`till diff {ID_B[:12]} --to {ID_A[:12]}`" in text
    dry = render("workspace.rewind", rewind_doc(changes=many), now=NOW)
    assert f"… and 30 more (`till diff {ID_A[:12]}`" in dry


def test_the_command_to_run_next_stays_last_whatever_fields_a_result_gains() -> None:
    doc = rewind_doc(unlinked=["d/x"], some_new_field=["value"])
    lines = render("workspace.rewind", doc, now=NOW).splitlines()
    assert lines[-1].strip() == f"till rewind {ID_A} --yes"
    assert "  value" in lines or any("value" in line for line in lines[:-2])
    assert any("would come back as separate files" in line for line in lines)


def test_events_about_universes_read_as_words_with_short_ids() -> None:
    base, result = "ab" * 32, "cd" * 32

    def event(kind: str, detail: dict[str, object]) -> str:
        doc = {"cursor": 7, "at": "2026-12-01T04:31:02Z", "kind": kind, "workspace": "/w"}
        return line("workspace.events", {**doc, "detail": detail})

    forked = event("forked", {"name": "a1", "base": base, "root": "/w.forks/a1"})
    assert "a1 from abababababab at /w.forks/a1" in forked and base not in forked
    merged = event("merged", {"name": "a1", "changes": 1, "result": result})
    assert "a1 1 change into cdcdcdcdcdcd" in merged
    conflict = event(
        "conflict", {"path": "f.txt", "forks": ["a1", "b2"], "workspace": True, "state": "opened"}
    )
    assert "opened f.txt in a1, b2, the workspace" in conflict
    assert "src/** by agent-7" in event("claimed", {"pattern": "src/**", "owner": "agent-7"})


def test_status_inside_a_fork_names_the_fork_its_parent_and_base() -> None:
    text = render(
        "workspace.status",
        {
            "attached": True,
            "workspace": "/w.forks/a1",
            "fork": {"name": "a1", "parent": "/w", "parent_workspace": "x", "base": "ef" * 32},
            "snapshots": 1,
        },
        now=0.0,
    )
    assert "Fork       a1 of /w, from efefefefefef" in text
